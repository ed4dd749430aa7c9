package secureboot

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/attest/authenticode"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/sassoftware/relic/v8/lib/pkcs7"
)

// TestAgainstEfitools: efitools' cert-to-efi-sig-list and
// sign-efi-sig-list, given our keys, owner and time stamp, write the same
// signature lists and .auth files byte for byte.
func TestAgainstEfitools(t *testing.T) {
	toESL := testutil.NeedTool(t, "cert-to-efi-sig-list")
	signESL := testutil.NeedTool(t, "sign-efi-sig-list")
	stamp := time.Date(2026, 11, 30, 21, 7, 5, 0, time.UTC)
	ks, files := generate(t, stamp)
	dir := writeSet(t, files, nil, nil)
	owner := strings.ToLower(ks.Owner.String())
	signers := map[string]string{"db": "KEK", "KEK": "PK", "PK": "PK"}
	for _, n := range Names {
		esl := filepath.Join(dir, "efitools-"+n+".esl")
		if out, err := exec.Command(toESL, "-g", owner, filepath.Join(dir, n+".pem"), esl).CombinedOutput(); err != nil {
			t.Fatalf("cert-to-efi-sig-list %s: %v\n%s", n, err, out)
		}
		sameFile(t, esl, files[n+".esl"])
		auth := filepath.Join(dir, "efitools-"+n+".auth")
		s := signers[n]
		cmd := exec.Command(signESL, "-g", owner, "-t", stamp.Format("2006-01-02 15:04:05"), "-k", filepath.Join(dir, s+".key"), "-c", filepath.Join(dir, s+".pem"), n, esl, auth)
		cmd.Env = append(os.Environ(), "TZ=UTC", "LC_ALL=C")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sign-efi-sig-list %s: %v\n%s", n, err, out)
		}
		sameFile(t, auth, files[n+".auth"])
	}
}

func sameFile(t *testing.T, path string, ours []byte) {
	t.Helper()
	theirs, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(theirs, ours) {
		i := 0
		for i < len(theirs) && i < len(ours) && theirs[i] == ours[i] {
			i++
		}
		t.Errorf("%s: efitools wrote %d bytes, we %d; first difference at %d\n theirs % x\n ours   % x", filepath.Base(path), len(theirs), len(ours), i,
			theirs[max(0, i-8):min(len(theirs), i+24)], ours[max(0, i-8):min(len(ours), i+24)])
	}
}

// TestLoad reads a generated set back for signing and refuses what
// cannot sign: a missing key, a key of another certificate, an
// incomplete set of .auth files, an encrypted key.
func TestLoad(t *testing.T) {
	ks, files := generate(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	write := func(skip string, replace map[string][]byte) string {
		return writeSet(t, files, []string{skip}, replace)
	}
	s, err := Load(write("", nil), "")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Signer.Cert.Equal(ks.DB.Cert) || len(s.Auth) != 3 || !bytes.Equal(s.Auth["PK"], files["PK.auth"]) || s.PCR == nil || !ks.PCR.Equal(s.PCR) {
		t.Errorf("Load gave another signer or .auth files: %v, %d files", s.Signer.Cert.Subject, len(s.Auth))
	}
	for what, c := range map[string]struct {
		dir  string
		want string
	}{
		"no db.key":          {write("db.key", nil), "db.key"},
		"another key":        {write("", map[string][]byte{"db.key": files["KEK.key"]}), "does not belong"},
		"PK.auth missing":    {write("PK.auth", nil), "go together"},
		"not PEM":            {write("", map[string][]byte{"db.key": []byte("hello")}), "no PEM"},
		"encrypted":          {write("", map[string][]byte{"db.key": []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n")}), "encrypted"},
		"certificate as key": {write("", map[string][]byte{"db.key": files["db.pem"]}), "not a private key"},
		"PCR key not RSA":    {write("", map[string][]byte{"pcr.key": ecKey(t)}), "must be RSA"},
	} {
		if _, err := Load(c.dir, ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Load said %v, want an error with %q", what, err, c.want)
		}
	}
	if _, err := Auth("Boot0001", nil, time.Time{}, ks.PK); err == nil {
		t.Error("Auth signed a variable that is not a Secure Boot one")
	}
}

func ecKey(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// TestLoadFromToken: with db.pkcs11 and pcr.pkcs11 naming the set's keys
// imported into SoftHSM, and the key files gone, Load signs as it did
// from the files (PKCS#1 v1.5 is deterministic: the same bytes), and
// refuses a token key that is not the certificate's.
func TestLoadFromToken(t *testing.T) {
	h := testutil.StartSoftHSM(t)
	ks, files := generate(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	keys := t.TempDir()
	for _, n := range []string{"db.key", "pcr.key", "KEK.key"} {
		if err := os.WriteFile(filepath.Join(keys, n), files[n], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h.Import(filepath.Join(keys, "db.key"), "db", 1)
	h.Import(filepath.Join(keys, "pcr.key"), "pcr", 2)
	h.Import(filepath.Join(keys, "KEK.key"), "kek", 3)
	dir := t.TempDir()
	for n, b := range files {
		if !strings.HasSuffix(n, ".key") {
			os.WriteFile(filepath.Join(dir, n), b, 0o600)
		}
	}
	os.WriteFile(filepath.Join(dir, SigningTokenFile), []byte(h.URI("db")+"\n"), 0o600)
	os.WriteFile(filepath.Join(dir, PCRTokenFile), []byte(h.URI("pcr")), 0o600)
	s, err := Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	digest := sha256.Sum256([]byte("a UKI"))
	for what, k := range map[string][2]crypto.Signer{"db": {s.Signer.Key, ks.DB.Key}, "pcr": {s.PCR, ks.PCR}} {
		got, err := k[0].Sign(rand.Reader, digest[:], crypto.SHA256)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		want, _ := k[1].Sign(rand.Reader, digest[:], crypto.SHA256)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the token signs otherwise than the key file", what)
		}
	}
	if !s.Signer.Cert.Equal(ks.DB.Cert) || len(s.Auth) != 3 {
		t.Error("Load from the token gave another certificate or .auth files")
	}
	os.WriteFile(filepath.Join(dir, SigningTokenFile), []byte(h.URI("kek")), 0o600)
	if _, err := Load(dir, ""); err == nil || !strings.Contains(err.Error(), "does not belong to db.pem") {
		t.Errorf("the KEK on the token signed for db.pem: %v", err)
	}
	os.WriteFile(filepath.Join(dir, SigningTokenFile), []byte("/etc/db.key"), 0o600)
	if _, err := Load(dir, ""); err == nil || !strings.Contains(err.Error(), "not a PKCS#11 URI") {
		t.Errorf("a path as URI: %v", err)
	}
}

// generate makes a key set and its files.
func generate(t *testing.T, stamp time.Time) (*Keys, map[string][]byte) {
	t.Helper()
	ks, err := Generate("Nodeforge test", stamp)
	if err != nil {
		t.Fatal(err)
	}
	files, err := ks.Files()
	if err != nil {
		t.Fatal(err)
	}
	return ks, files
}

// writeSet writes a set's files into a new directory, but for those
// named in skip, with replace's contents for those named there.
func writeSet(t *testing.T, files map[string][]byte, skip []string, replace map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for n, b := range files {
		if r, ok := replace[n]; ok {
			b = r
		}
		if slices.Contains(skip, n) {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestOpenSSLVerifiesSignedData: OpenSSL's CMS verifier (a judge besides
// efitools, which makes RSA keys only) accepts the detached SignedData of
// authenticated variables for RSA and ECDSA signers, and refuses it over
// changed content.
func TestOpenSSLVerifiesSignedData(t *testing.T) {
	openssl := testutil.NeedTool(t, "openssl")
	data := []byte("PK KEK db: a variable's content\n")
	sum := sha256.Sum256(data)
	for _, ec := range []bool{false, true} {
		s := testSigner(t, ec)
		sd, err := detachedSignedData(s, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		// OpenSSL reads a SignedData in its ContentInfo.
		wrapped, err := asn1.Marshal(struct {
			Type    asn1.ObjectIdentifier
			Content asn1.RawValue
		}{pkcs7.OidSignedData, asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: 0, IsCompound: true, Bytes: sd}})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		sig, content := filepath.Join(dir, "sig.p7"), filepath.Join(dir, "data")
		os.WriteFile(sig, wrapped, 0o644)
		os.WriteFile(content, data, 0o644)
		args := []string{"cms", "-verify", "-inform", "DER", "-in", sig, "-binary", "-noverify", "-content", content, "-out", os.DevNull}
		if out, err := exec.Command(openssl, args...).CombinedOutput(); err != nil || !strings.Contains(string(out), "Verification successful") {
			t.Errorf("ec=%t: openssl cms -verify: %v\n%s", ec, err, out)
		}
		os.WriteFile(content, append([]byte("x"), data[1:]...), 0o644)
		if out, err := exec.Command(openssl, args...).CombinedOutput(); err == nil {
			t.Errorf("ec=%t: openssl accepted changed content\n%s", ec, out)
		}
	}
	if _, err := detachedSignedData(authenticode.Signer{}, sum[:]); err == nil {
		t.Error("signed without a key")
	}
}

// testSigner is an RSA or ECDSA P-256 key and a self-signed certificate.
func testSigner(t *testing.T, ec bool) authenticode.Signer {
	t.Helper()
	var key crypto.Signer
	var err error
	if ec {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(42), Subject: pkix.Name{CommonName: "signed data test"},
		NotBefore: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2046, 1, 1, 0, 0, 0, 0, time.UTC)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return authenticode.Signer{Key: key, Cert: cert}
}
