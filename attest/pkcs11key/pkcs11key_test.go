package pkcs11key

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

func writeKey(t *testing.T, key crypto.Signer) string {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSignsAsTheFile: a key imported into SoftHSM signs through Open as
// the same key in a file does: RSA PKCS#1 v1.5 byte for byte, ECDSA
// verified by the public key.
func TestSignsAsTheFile(t *testing.T) {
	h := testutil.StartSoftHSM(t)
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h.Import(writeKey(t, rk), "rsa", 1)
	h.Import(writeKey(t, ek), "ec", 2)
	digest := sha256.Sum256([]byte("nodeforge"))

	k, err := Open(h.URI("rsa"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if !rk.PublicKey.Equal(k.Public()) {
		t.Fatal("the token's RSA key is another key")
	}
	got, err := k.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := rsa.SignPKCS1v15(nil, rk, crypto.SHA256, digest[:])
	if string(got) != string(want) {
		t.Error("the token's RSA signature differs from the file key's")
	}

	e, err := Open(h.URI("ec"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	sig, err := e.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if !ecdsa.VerifyASN1(&ek.PublicKey, digest[:], sig) {
		t.Error("the token's ECDSA signature does not verify")
	}
}

// TestRefusals: what is wrong is named, and the PIN never appears.
func TestRefusals(t *testing.T) {
	h := testutil.StartSoftHSM(t)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	h.Import(writeKey(t, rk), "rsa", 1)
	pinFile := filepath.Join(t.TempDir(), "pin")
	os.WriteFile(pinFile, []byte(h.PIN+"\n"), 0o600)
	bad := "pkcs11:token=" + h.Token + ";object=rsa?module-path=" + h.Module + "&pin-value=0000"
	for _, c := range []struct{ uri, want string }{
		{"file:/etc/key", "not a PKCS#11 URI"},
		{"pkcs11:object=rsa?module-path=" + h.Module + "&pin-value=1", "names no token"},
		{"pkcs11:token=" + h.Token + "?module-path=" + h.Module + "&pin-value=1", "names no key"},
		{"pkcs11:token=x;object=rsa?module-path=/nonexistent.so&pin-value=1", "module-path '/nonexistent.so' is not accessible"},
		{"pkcs11:token=x;object=rsa?module-path=" + h.Module + "&pin-value=1", "opening the token"},
		{strings.Replace(h.URI("nothere"), "pin-value=1234", "pin-source=file:"+pinFile, 1), "no such key pair"},
		{bad, "opening the token"},
	} {
		t.Run(c.want, func(t *testing.T) {
			k, err := Open(c.uri, "")
			if err == nil {
				k.Close()
				t.Fatalf("%s opened", c.uri)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "pin-value") {
				t.Errorf("%s: %v (want %q, without the PIN)", c.uri, err, c.want)
			}
		})
	}
	// No PIN in the URI: the caller's.
	uri := "pkcs11:token=" + h.Token + ";object=rsa?module-path=" + h.Module
	if _, err := Open(uri, ""); err == nil || !strings.Contains(err.Error(), PINEnv) {
		t.Errorf("no PIN: %v", err)
	}
	k, err := Open(uri, h.PIN)
	if err != nil {
		t.Fatal(err)
	}
	k.Close()
}
