package pkcs7

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/internal/testutil"
)

// signer makes a key of the kind and a self-signed certificate for it.
func signer(t testing.TB, ec bool) Signer {
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
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(42), Subject: pkix.Name{CommonName: "pkcs7 test"},
		NotBefore: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), NotAfter: time.Date(2046, 1, 1, 0, 0, 0, 0, time.UTC)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return Signer{Key: key, Cert: cert}
}

// attributes are CMS's two required signed attributes for data.
func attributes(t testing.TB, data []byte) ([]Attribute, []byte) {
	t.Helper()
	sum := sha256.Sum256(data)
	ct, _ := asn1.Marshal(OIDData)
	md, _ := asn1.Marshal(sum[:])
	return []Attribute{{Type: OIDContentType, Value: ct}, {Type: OIDMessageDigest, Value: md}}, sum[:]
}

// TestOpenSSLVerifies: OpenSSL's CMS verifier (an independent judge)
// accepts both shapes we write, for RSA and ECDSA signers: detached
// without attributes (authenticated variables) and carried with signed
// attributes (Authenticode's shape, over id-data here); and refuses them
// with a byte of the content changed.
func TestOpenSSLVerifies(t *testing.T) {
	openssl := testutil.NeedTool(t, "openssl")
	data := []byte("PK KEK db: a variable's content\n")
	for _, ec := range []bool{false, true} {
		s := signer(t, ec)
		dir := t.TempDir()
		write := func(name string, b []byte) string {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}
		sum := sha256.Sum256(data)
		detached, err := SignedData(s, Content{Type: OIDData}, nil, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		attrs, digest := attributes(t, data)
		octets, _ := asn1.Marshal(data)
		carried, err := SignedData(s, Content{Type: OIDData, DER: octets}, attrs, digest)
		if err != nil {
			t.Fatal(err)
		}
		for name, sd := range map[string][]byte{"detached": detached, "carried": carried} {
			wrapped, err := Wrap(sd)
			if err != nil {
				t.Fatal(err)
			}
			sig := write(name+".p7", wrapped)
			args := []string{"cms", "-verify", "-inform", "DER", "-in", sig, "-binary", "-noverify", "-out", filepath.Join(dir, "out")}
			if name == "detached" {
				args = append(args, "-content", write("data", data))
			}
			if out, err := exec.Command(openssl, args...).CombinedOutput(); err != nil || !strings.Contains(string(out), "Verification successful") {
				t.Errorf("ec=%t %s: openssl cms -verify: %v\n%s", ec, name, err, out)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, "out")); string(got) != string(data) {
				t.Errorf("ec=%t %s: openssl read %q", ec, name, got)
			}
			if name == "detached" {
				tampered := append([]byte{}, data...)
				tampered[0] ^= 1
				args[len(args)-1] = write("tampered", tampered)
				if out, err := exec.Command(openssl, args...).CombinedOutput(); err == nil {
					t.Errorf("ec=%t: openssl accepted changed content\n%s", ec, out)
				}
			}
		}
	}
}

// TestParseVerify: what we write parses back to its signer, content and
// message digest and verifies; a changed signature, attribute or digest
// does not.
func TestParseVerify(t *testing.T) {
	s := signer(t, false)
	data := []byte("an EFI image's hash stands here")
	attrs, digest := attributes(t, data)
	octets, _ := asn1.Marshal(data)
	sd, err := SignedData(s, Content{Type: OIDData, DER: octets}, attrs, digest)
	if err != nil {
		t.Fatal(err)
	}
	wrapped, _ := Wrap(sd)
	for name, der := range map[string][]byte{"bare": sd, "wrapped": wrapped} {
		p, err := Parse(der)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !p.Signer.Equal(s.Cert) || string(p.MessageDigest) != string(digest) || string(p.Content) != string(octets) || !p.ContentType.Equal(OIDData) {
			t.Errorf("%s: parsed %+v", name, p)
		}
		if err := p.Verify(nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The signature is the last bytes of the SignedData: flip its last.
	bad := append([]byte{}, sd...)
	bad[len(bad)-1] ^= 1
	if p, err := Parse(bad); err != nil || p.Verify(nil) == nil {
		t.Errorf("a changed signature verified (parse: %v)", err)
	}
	// Detached, no attributes: the signature covers the digest given.
	sum := sha256.Sum256(data)
	det, _ := SignedData(s, Content{Type: OIDData}, nil, sum[:])
	p, err := Parse(det)
	if err != nil {
		t.Fatal(err)
	}
	if p.Verify(sum[:]) != nil || p.Content != nil || p.MessageDigest != nil {
		t.Errorf("detached: %+v", p)
	}
	other := sha256.Sum256([]byte("other"))
	if p.Verify(other[:]) == nil {
		t.Error("a detached signature verified for other content")
	}
	if _, err := SignedData(Signer{}, Content{Type: OIDData}, nil, sum[:]); err == nil {
		t.Error("signed without a key")
	}
}

// FuzzParse: no input panics Parse or Verify.
func FuzzParse(f *testing.F) {
	s := signer(f, true)
	sum := sha256.Sum256([]byte("x"))
	det, _ := SignedData(s, Content{Type: OIDData}, nil, sum[:])
	f.Add(det)
	if w, err := Wrap(det); err == nil {
		f.Add(w)
	}
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x01})
	f.Fuzz(func(t *testing.T, der []byte) {
		if p, err := Parse(der); err == nil {
			p.Verify(sum[:])
		}
	})
}
