package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/builder/media/secureboot"
	"github.com/nodeforge/builder/internal/testutil"
)

func TestKeysGenerate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	t.Setenv("COSIGN_PASSWORD", "pw")
	if _, err := runBuilder(t, "keys", "generate", "--out", dir); err != nil {
		t.Fatal(err)
	}
	priv, _ := os.ReadFile(filepath.Join(dir, "cosign.key"))
	pub, _ := os.ReadFile(filepath.Join(dir, "cosign.pub"))
	if _, err := signing.LoadPrivate(priv, []byte("pw")); err != nil {
		t.Error(err)
	}
	if _, err := signing.LoadPublic(pub); err != nil {
		t.Error(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "cosign.key")); fi.Mode().Perm() != 0o600 {
		t.Errorf("cosign.key mode %v", fi.Mode())
	}
	if _, err := runBuilder(t, "keys", "generate", "--out", dir); err == nil || !strings.Contains(err.Error(), "not overwriting") {
		t.Errorf("overwrote a key: %v", err)
	}
	os.Unsetenv("COSIGN_PASSWORD")
	if _, err := runBuilder(t, "keys", "generate", "--out", t.TempDir()); err == nil || !strings.Contains(err.Error(), "COSIGN_PASSWORD") {
		t.Errorf("no password: %v", err)
	}
}

// TestKeysGenerateSecureBoot: a Secure Boot set loads for signing, its
// certificates name the channel, the private keys are the owner's only,
// openssl reads the .pem files, and a second run refuses to overwrite.
func TestKeysGenerateSecureBoot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sb")
	out, err := runBuilder(t, "keys", "generate", "--secureboot", "--common-name", "Example dev", "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(out)); n != 16 {
		t.Errorf("printed %d files, want 16 (PK, KEK, db × key, pem, esl, auth; KEK and db .wellknown.auth; pcr.key, pcr.pub):\n%s", n, out)
	}
	s, err := secureboot.Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Signer.Cert.Subject.CommonName != "Example dev db" || len(s.Auth) != 3 || s.PCR == nil {
		t.Errorf("loaded %q with %d .auth files", s.Signer.Cert.Subject.CommonName, len(s.Auth))
	}
	if _, err := s.WellKnownAuth(); err != nil {
		t.Error(err)
	}
	for _, k := range []string{"PK", "KEK", "db", "pcr"} {
		if fi, err := os.Stat(filepath.Join(dir, k+".key")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s.key: %v %v", k, fi.Mode(), err)
		}
		if k == "pcr" {
			continue
		}
		o, err := exec.Command(testutil.NeedTool(t, "openssl"), "x509", "-in", filepath.Join(dir, k+".pem"), "-noout", "-subject").CombinedOutput()
		if err != nil || !strings.Contains(string(o), "Example dev "+k) {
			t.Errorf("openssl x509 %s.pem: %v %s", k, err, o)
		}
	}
	if _, err := runBuilder(t, "keys", "generate", "--secureboot", "--out", dir); err == nil || !strings.Contains(err.Error(), "not overwriting") {
		t.Errorf("overwrote a Secure Boot key: %v", err)
	}
}
