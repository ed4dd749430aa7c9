package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/attest/signing"
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
