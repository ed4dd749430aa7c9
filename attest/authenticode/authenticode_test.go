package authenticode

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/builder/media/uki"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/testbase"
)

// testSigner is an RSA-2048 key and a self-signed certificate for it, as
// a Secure Boot db entry would be.
func testSigner(t testing.TB) (Signer, string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(42), Subject: pkix.Name{CommonName: "Nodeforge test db key"},
		NotBefore: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2045, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "db.pem")
	os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	return Signer{Key: key, Cert: cert}, path
}

// TestSign: systemd-boot and a UKI signed here are accepted by
// sbsigntool's sbverify and osslsigncode with the certificate; the same
// image and key sign to the same bytes; stripped of its signature the
// signed UKI is the unsigned one; a flipped byte fails sbverify; the
// wrong certificate fails it.
func TestSign(t *testing.T) {
	s, certPath := testSigner(t)
	boot := testbase.EFIForTest(t, "systemd-bootx64.efi")
	stub := testbase.EFIForTest(t, "linuxx64.efi.stub")
	if boot == nil || stub == nil {
		return
	}
	unsignedUKI, err := uki.Build(stub, uki.Sections([]byte("ID=nodeforge\n"), []byte("console=ttyS0"), nil, []byte("initrd"), bytes.Repeat([]byte("k"), 70000)))
	if err != nil {
		t.Fatal(err)
	}
	sbverify, ossl := testutil.NeedTool(t, "sbverify"), testutil.NeedTool(t, "osslsigncode")
	dir := t.TempDir()
	for name, img := range map[string][]byte{"systemd-bootx64.efi": boot, "nodeforge-uki.efi": unsignedUKI} {
		signed, err := Sign(img, s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		again, _ := Sign(img, s)
		if !bytes.Equal(signed, again) {
			t.Errorf("%s: two signatures differ", name)
		}
		path := filepath.Join(dir, name)
		os.WriteFile(path, signed, 0o644)
		if out, err := exec.Command(sbverify, "--cert", certPath, path).CombinedOutput(); err != nil || !strings.Contains(string(out), "Signature verification OK") {
			t.Errorf("sbverify %s: %v\n%s", name, err, out)
		}
		if out, err := exec.Command(ossl, "verify", "-CAfile", certPath, "-in", path).CombinedOutput(); err != nil || !strings.Contains(string(out), "Signature verification: ok") {
			t.Errorf("osslsigncode verify %s: %v\n%s", name, err, out)
		}
		stripped, err := Strip(signed)
		if err != nil {
			t.Fatal(err)
		}
		if name == "nodeforge-uki.efi" && !bytes.Equal(stripped, img) {
			t.Errorf("%s stripped of its signature is not the unsigned image", name)
		}
		if _, err := Sign(signed, s); err == nil || !strings.Contains(err.Error(), "signed already") {
			t.Errorf("%s signed twice: %v", name, err)
		}
		if cert, err := Verify(signed); err != nil || !cert.Equal(s.Cert) {
			t.Errorf("Verify %s: %v", name, err)
		}
		flipped := bytes.Clone(signed)
		flipped[len(flipped)/3] ^= 1
		fpath := filepath.Join(dir, "flipped-"+name)
		os.WriteFile(fpath, flipped, 0o644)
		if out, err := exec.Command(sbverify, "--cert", certPath, fpath).CombinedOutput(); err == nil {
			t.Errorf("sbverify accepted %s with a flipped byte:\n%s", name, out)
		}
		if _, err := Verify(flipped); err == nil {
			t.Errorf("Verify accepted %s with a flipped byte", name)
		}
		if _, err := Verify(img); err == nil || !strings.Contains(err.Error(), "not signed") {
			t.Errorf("Verify of the unsigned %s: %v", name, err)
		}
	}
	// The certificate of another key: sbverify refuses.
	_, otherPath := testSigner(t)
	if out, err := exec.Command(sbverify, "--cert", otherPath, filepath.Join(dir, "nodeforge-uki.efi")).CombinedOutput(); err == nil {
		t.Errorf("sbverify accepted another certificate:\n%s", out)
	}
}

// TestVerifySbsign: Verify accepts what sbsigntool's sbsign signs (an
// independent signer) and names its certificate.
func TestVerifySbsign(t *testing.T) {
	sbsign := testutil.NeedTool(t, "sbsign")
	s, certPath := testSigner(t)
	boot := testbase.EFIForTest(t, "systemd-bootx64.efi")
	if boot == nil {
		return
	}
	dir := t.TempDir()
	der, err := x509.MarshalPKCS8PrivateKey(s.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, "db.key")
	os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	in, out := filepath.Join(dir, "in.efi"), filepath.Join(dir, "out.efi")
	os.WriteFile(in, boot, 0o644)
	if o, err := exec.Command(sbsign, "--key", keyPath, "--cert", certPath, "--output", out, in).CombinedOutput(); err != nil {
		t.Fatalf("sbsign: %v\n%s", err, o)
	}
	signed, _ := os.ReadFile(out)
	if cert, err := Verify(signed); err != nil || !cert.Equal(s.Cert) {
		t.Errorf("Verify of sbsign's signature: %v", err)
	}
}

// TestHashRefuses: what is not a PE32+ image is refused.
func TestHashRefuses(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("MZ"), bytes.Repeat([]byte{0}, 200)} {
		if _, err := Hash(b); err == nil {
			t.Errorf("%q hashed", b)
		}
	}
}
