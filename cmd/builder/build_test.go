package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoBuildAndRepro: the README quick start (demo base, lock, build),
// then builder repro, which starts two builds as child processes under
// different TZ, locale, umask, GOMAXPROCS, cwd, HOME and lay order.
func TestDemoBuildAndRepro(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	cacheDir := t.TempDir()
	if _, err := runBuilder(t, "demo-base", dir); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "spec.yaml")
	if _, err := runBuilder(t, "lock", "-q", "--spec", spec, "--cache", cacheDir); err != nil {
		t.Fatal(err)
	}
	out, err := runBuilder(t, "build", "-q", "--spec", spec, "--cache", cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"x86_64/vmlinuz", "x86_64/initramfs.xz", "x86_64/rootfs.sqsh", "x86_64/cmdline", "report.json"} {
		if !strings.Contains(out, filepath.Join(dir, "out", f)) {
			t.Errorf("build output does not name %s:\n%s", f, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "out", f)); err != nil {
			t.Error(err)
		}
	}
	t.Setenv("NODEFORGE_TEST_AS_MAIN", "1") // children run main()
	out, err = runBuilder(t, "repro", "--spec", spec, "--cache", cacheDir)
	if err != nil {
		t.Fatalf("repro: %v\n%s", err, out)
	}
	if !strings.Contains(out, "reproducible: both builds identical") {
		t.Errorf("repro: %s", out)
	}
}
