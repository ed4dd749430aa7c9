package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoBaseThenLock is the README's quick start in-process: write the
// demo base, lock it, and lock it again from another copy: same bytes.
func TestDemoBaseThenLock(t *testing.T) {
	var locks [][]byte
	for i := 0; i < 2; i++ {
		dir := filepath.Join(t.TempDir(), "demo")
		if _, err := runBuilder(t, "demo-base", dir); err != nil {
			t.Fatal(err)
		}
		if _, err := runBuilder(t, "lock", "-q", "--spec", filepath.Join(dir, "spec.yaml"), "--cache", t.TempDir()); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "demo.lock.json"))
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, b)
	}
	if !bytes.Equal(locks[0], locks[1]) {
		t.Error("locks of two demo bases differ")
	}
	if !bytes.Contains(locks[0], []byte(`"nevra": "kernel-image-std-def-2:6.12.40-alt1.x86_64"`)) {
		t.Error("lock does not pin the newest kernel")
	}
}

func TestLockErrors(t *testing.T) {
	if _, err := runBuilder(t, "lock"); err == nil || !strings.Contains(err.Error(), "--spec") {
		t.Errorf("no spec: %v", err)
	}
	if _, err := runBuilder(t, "lock", "--branch", "p99"); err == nil || !strings.Contains(err.Error(), "p99") {
		t.Errorf("unknown branch: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "demo")
	if _, err := runBuilder(t, "demo-base", dir); err != nil {
		t.Fatal(err)
	}
	if _, err := runBuilder(t, "demo-base", dir); err == nil {
		t.Error("demo-base overwrote a non-empty directory without --force")
	}
	_, err := runBuilder(t, "lock", "-q", "--spec", filepath.Join(dir, "spec.yaml"), "--cache", t.TempDir(), "--repo-url", "nope=/x")
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("override of unknown repository: %v", err)
	}
}

// demo-base --force replaces the demo base, never the channels' signing
// keys kept under keys/ as the demo spec says.
func TestDemoBaseForceKeepsKeys(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	if _, err := runBuilder(t, "demo-base", dir); err != nil {
		t.Fatal(err)
	}
	mine := map[string]string{"keys/dev/cosign.key": "dev secret", "keys/prod/cosign.key": "prod secret", "notes.txt": "mine"}
	for rel, content := range mine {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o755)
		os.WriteFile(filepath.Join(dir, rel), []byte(content), 0o600)
	}
	os.WriteFile(filepath.Join(dir, "spec.yaml"), []byte("edited"), 0o644)
	if _, err := runBuilder(t, "demo-base", "--force", dir); err != nil {
		t.Fatal(err)
	}
	for rel, content := range mine {
		if b, err := os.ReadFile(filepath.Join(dir, rel)); err != nil || string(b) != content {
			t.Errorf("%s: %q, %v: demo-base --force changed it", rel, b, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "spec.yaml")); string(b) == "edited" {
		t.Error("spec.yaml not replaced")
	}
	if _, err := os.Stat(filepath.Join(dir, "keys", "demo.asc")); err != nil {
		t.Error(err)
	}
}
