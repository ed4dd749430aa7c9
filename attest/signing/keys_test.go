package signing

import (
	"bytes"
	"strings"
	"testing"
)

func TestGenerateSignVerify(t *testing.T) {
	priv, pub, err := Generate([]byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(priv), "ENCRYPTED SIGSTORE PRIVATE KEY") || !strings.Contains(string(pub), "PUBLIC KEY") {
		t.Fatalf("formats:\n%s\n%s", priv, pub)
	}
	if _, err := LoadPrivate(priv, []byte("wrong")); err == nil {
		t.Fatal("a wrong password opened the key")
	}
	sv, err := LoadPrivate(priv, []byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("release payload")
	sig, err := sv.SignMessage(bytes.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	v, err := LoadPublic(pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.VerifySignature(bytes.NewReader(sig), bytes.NewReader(msg)); err != nil {
		t.Errorf("verify: %v", err)
	}
	if err := v.VerifySignature(bytes.NewReader(sig), bytes.NewReader([]byte("tampered"))); err == nil {
		t.Error("a tampered message verified")
	}
}
