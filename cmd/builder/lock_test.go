package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/pkgbase/demobase"
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

// TestDemoBaseBootableErrors: the bootable base's flags go together, and
// a cache without Debian's packages is named with the way to fill it
// (make demo then writes the stand-ins); nothing is written.
func TestDemoBaseBootableErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	if _, err := runBuilder(t, "demo-base", "--init", "bin/nodeforge-init", dir); err == nil || !strings.Contains(err.Error(), "--kernel-cache and --init go together") {
		t.Errorf("--init alone: %v", err)
	}
	cache := t.TempDir()
	_, err := runBuilder(t, "demo-base", "--kernel-cache", cache, "--init", "bin/nodeforge-init", dir)
	if err == nil || !strings.Contains(err.Error(), cache) || !strings.Contains(err.Error(), "fetch-test-kernel.sh --demo") {
		t.Errorf("empty cache: %v", err)
	}
	if _, serr := os.Stat(dir); serr == nil {
		t.Errorf("a failed demo-base left %s", dir)
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
	// A bootable base's extension definitions and container image go
	// with it: the stand-in base has none.
	os.MkdirAll(filepath.Join(dir, demobase.ExtensionsDir), 0o755)
	os.WriteFile(filepath.Join(dir, demobase.ExtensionsDir, "cri.yaml"), []byte("old"), 0o644)
	os.WriteFile(filepath.Join(dir, oldImageFile), []byte("old"), 0o644)
	if _, err := runBuilder(t, "demo-base", "--force", dir); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{demobase.ExtensionsDir, oldImageFile} {
		if _, err := os.Stat(filepath.Join(dir, gone)); err == nil {
			t.Errorf("demo-base --force left the old base's %s", gone)
		}
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

// TestLockElsewhere: a lock written with -o into another directory than
// its spec's records where the spec is from it, so why, diff and build
// read the spec's repositories from a third working directory, every path
// given relative to it. The package caches of diff and build start empty:
// the packages come from the repositories.
func TestLockElsewhere(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	a, b, c := filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "c")
	if err := demobase.Write(a); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(b, 0o755)
	os.Mkdir(c, 0o755)
	run := func(args ...string) string {
		t.Helper()
		cmd := builderCommand(t, args...)
		cmd.Dir = c
		out, err := cmd.Output()
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		if err != nil {
			t.Fatalf("builder %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}
	lockCache := t.TempDir()
	run("lock", "-q", "--spec", "../a/spec.yaml", "--cache", lockCache, "-o", "../b/old.lock.json")
	if err := demobase.WriteUpdated(a, demobase.Update{Name: "containerd", Version: "1.7.28", Release: "alt1", Note: "- 1.7.28: fixes CVE-2025-47290."}); err != nil {
		t.Fatal(err)
	}
	run("lock", "-q", "--spec", "../a/spec.yaml", "--cache", lockCache, "-o", "../b/new.lock.json")
	if l, err := os.ReadFile(filepath.Join(b, "new.lock.json")); err != nil || !strings.Contains(string(l), `"specDir": "../a"`) {
		t.Fatalf("the lock does not say where its spec is: %v", err)
	}

	if out := run("why", "-q", "--lock", "../b/new.lock.json", "--cache", "", "libseccomp"); !strings.Contains(out, "libseccomp-2.5.5-alt1.x86_64") {
		t.Errorf("why: %s", out)
	}
	if out := run("diff", "--cache", t.TempDir(), "../b/old.lock.json", "../b/new.lock.json"); !strings.Contains(out, "CVE-2025-47290") {
		t.Errorf("diff lacks the new package's changelog:\n%s", out)
	}
	run("build", "-q", "--spec", "../a/spec.yaml", "--lock", "../b/new.lock.json", "--cache", t.TempDir(), "--out", "out")
	if _, err := os.Stat(filepath.Join(c, "out", "report.json")); err != nil {
		t.Error(err)
	}
}
