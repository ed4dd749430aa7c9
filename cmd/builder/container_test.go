package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/pkgbase/demobase"
)

// TestImageContainer: builder lock and image --kind container --name of a
// demo spec with an images section print the image's OCI layout; build
// lists it; a name the spec lacks and a missing --name are refused.
func TestImageContainer(t *testing.T) {
	dir := t.TempDir()
	if err := demobase.Write(dir); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, demobase.SpecFile)
	f, err := os.OpenFile(spec, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("images:\n  shell:\n    packages: [bash]\n    entrypoint: [/bin/bash]\n    links: {/usr/local/bin/sh: /bin/bash}\n")
	f.Close()
	cache := filepath.Join(dir, "cache")
	if _, err := runBuilder(t, "lock", "--spec", spec, "--cache", cache); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	got, err := runBuilder(t, "image", "--spec", spec, "--cache", cache, "--out", out, "--kind", "container", "--name", "shell")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(out, "images", "shell") + "  sha256:"; !strings.HasPrefix(got, want) || strings.Count(got, "\n") != 1 {
		t.Errorf("image --kind container printed %q, want one line %q…", got, want)
	}
	if _, err := os.Stat(filepath.Join(out, "images", "shell", "index.json")); err != nil {
		t.Error(err)
	}
	// The output is a build's: another build into it is up to date, and
	// lists the image.
	got, err = runBuilder(t, "build", "--spec", spec, "--cache", cache, "--out", out)
	if err != nil || !strings.Contains(got, filepath.Join(out, "images", "shell")+"  sha256:") {
		t.Errorf("build: %v\n%s", err, got)
	}
	// why explains a package of the image, from the spec and from the
	// lock alone, the same.
	locks, _ := filepath.Glob(filepath.Join(dir, "*.lock.json"))
	if len(locks) != 1 {
		t.Fatalf("locks: %v", locks)
	}
	fromSpec, err := runBuilder(t, "why", "-q", "--spec", spec, "--cache", cache, "--image", "shell", "libtinfo")
	if err != nil || !strings.HasPrefix(fromSpec, "libtinfo-") || !strings.Contains(fromSpec, " is in image shell (x86_64)") {
		t.Errorf("why --image: %v\n%s", err, fromSpec)
	}
	if fromLock, err := runBuilder(t, "why", "-q", "--lock", locks[0], "--cache", cache, "--image", "shell", "libtinfo"); err != nil || fromLock != fromSpec {
		t.Errorf("why --lock --image: %v\n%s\nfrom the spec:\n%s", err, fromLock, fromSpec)
	}
	asJSON, err := runBuilder(t, "why", "-q", "--lock", locks[0], "--cache", cache, "--image", "shell", "--json", "libtinfo")
	if err != nil {
		t.Fatal(err)
	}
	validateSchema(t, "why.schema.json", []byte(asJSON))
	if _, err := runBuilder(t, "why", "-q", "--lock", locks[0], "--cache", cache, "--image", "shell", "containerd"); err == nil || !strings.Contains(err.Error(), "containerd is not in image shell") {
		t.Errorf("why --image of a package not in it: %v", err)
	}
	for args, want := range map[string]string{
		"--name nosuch": "--name nosuch: the spec has no such container image (it has: shell)",
		"":              "--kind container needs --name",
	} {
		a := append([]string{"image", "--spec", spec, "--cache", cache, "--out", out, "--kind", "container"}, strings.Fields(args)...)
		if _, err := runBuilder(t, a...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("image %s: %v, want %q", args, err, want)
		}
	}
}
