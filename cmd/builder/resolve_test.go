package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/demobase"
)

// fixtureRepo lays the real p10 checkinstall index out as a dist, listed in
// a release with the line the real p10 release carries for it.
func fixtureRepo(t *testing.T) string {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "base"), 0o755)
	b, err := os.ReadFile(filepath.Join(testutil.Fixtures(t, "alt"), "pkglist.checkinstall.xz"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "base", "pkglist.checkinstall.xz"), b, 0o644)
	os.WriteFile(filepath.Join(dir, "base", "release"), []byte("Origin: ALT Linux Team\nLabel: p10\nComponents: checkinstall\nMD5Sum:\n 2a302598dcead80c989aa1c2fb2b7219 240792 base/pkglist.checkinstall\n"), 0o644)
	return dir
}

func TestResolveALTFixture(t *testing.T) {
	t.Setenv("NODEFORGE_CACHE", t.TempDir()) // the parsed-index cache
	dir := fixtureRepo(t)
	_, err := runBuilder(t, "resolve", "--repo", dir, "--insecure-skip-verify", "--arch", "x86_64", "kernel-image-std-def-checkinstall")
	if err == nil || !strings.Contains(err.Error(), "requires kernel-image-std-def = 2:5.10.253-alt1:p10+415595.100.2.1, which nothing provides") {
		t.Fatalf("kernel checkinstall: %v", err)
	}
	if ee, ok := err.(*exitError); !ok || ee.code != 1 {
		t.Errorf("want exit code 1, got %#v", err)
	}
	// On its own the checkinstall component cannot install
	// libnss-nssckbi-checkinstall: its p11-kit-checkinstall requires
	// packages of the classic component. The explanation says so.
	_, err = runBuilder(t, "resolve", "--repo", dir, "--insecure-skip-verify", "--arch", "x86_64", "libnss-nssckbi-checkinstall")
	if err == nil || !strings.Contains(err.Error(), "libnss-nssckbi-checkinstall-3.117-alt1.x86_64 requires p11-kit-checkinstall -> p11-kit-checkinstall-0.24.1-alt1.x86_64 requires nss-utils") {
		t.Fatalf("libnss checkinstall alone: %v", err)
	}
	// No keyring and no explicit skip: refused.
	if _, err := runBuilder(t, "resolve", "--repo", dir, "x"); err == nil || !strings.Contains(err.Error(), "--insecure-skip-verify") {
		t.Errorf("unverified repository accepted: %v", err)
	}
}

func TestResolveDemoBase(t *testing.T) {
	t.Setenv("NODEFORGE_CACHE", t.TempDir()) // the parsed-index cache
	dir := filepath.Join(t.TempDir(), "demo")
	if err := demobase.Write(dir); err != nil {
		t.Fatal(err)
	}
	repos := []string{"resolve", "--repo", filepath.Join(dir, "alt", "x86_64"), "--repo", filepath.Join(dir, "alt", "noarch"),
		"--keyring", filepath.Join(dir, "keys", "demo.asc"), "--arch", "x86_64"}
	out, err := runBuilder(t, append(repos, "zfs-utils")...)
	if err != nil {
		t.Fatal(err)
	}
	if out != "glibc-core-6:2.38.0.76.e9f05fa1c6-alt1.x86_64\nlibzfs-2.2.7-alt1.x86_64\nzfs-utils-2.2.7-alt1.x86_64\n" {
		t.Errorf("zfs-utils: %q", out)
	}
	// Two kernels side by side: the module pinned to the newer one plus an
	// explicit request for the older one.
	out, err = runBuilder(t, append(repos, "kernel-modules-zfs-std-def", "kernel-image-std-def = 2:6.12.30-alt1")...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "kernel-image-std-def-2:6.12.30-alt1.x86_64\nkernel-image-std-def-2:6.12.40-alt1.x86_64\n") {
		t.Errorf("multi-version kernels: %q", out)
	}
	// JSON carries epoch as a number or null.
	out, err = runBuilder(t, append(repos, "--json", "kernel-image-std-def")...)
	if err != nil || !strings.Contains(out, `"epoch": 2`) || !strings.Contains(out, `"epoch": null`) {
		t.Errorf("json: %v %s", err, out)
	}
	validateSchema(t, "resolve.schema.json", []byte(out))
	// A wrong keyring refuses the repository.
	other := filepath.Join(testutil.Fixtures(t, "keys"), "RPM-GPG-KEY-CentOS-7")
	if _, err := runBuilder(t, "resolve", "--repo", filepath.Join(dir, "alt", "x86_64"), "--keyring", other, "bash"); err == nil || !strings.Contains(err.Error(), "not in the keyring") {
		t.Errorf("wrong keyring: %v", err)
	}
}

// TestResolveIndexCache: a resolve that reads the parsed-index cache
// prints what one that parses the indexes prints, and the release is still
// verified.
func TestResolveIndexCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	if err := demobase.Write(dir); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	args := []string{"resolve", "--repo", filepath.Join(dir, "alt", "x86_64"), "--repo", filepath.Join(dir, "alt", "noarch"),
		"--keyring", filepath.Join(dir, "keys", "demo.asc"), "--arch", "x86_64", "--json", "zfs-utils", "kernel-image-std-def"}
	want, err := runBuilder(t, append(args, "--cache", "")...)
	if err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"cold", "warm"} {
		got, err := runBuilder(t, append(args, "--cache", cache)...)
		if err != nil || got != want {
			t.Fatalf("%s: %v\n%s\nwant\n%s", what, err, got, want)
		}
	}
	if entries, _ := filepath.Glob(filepath.Join(cache, "repo-index", "*.idx")); len(entries) != 2 {
		t.Errorf("cache entries %q, want one a repository", entries)
	}
	other := filepath.Join(testutil.Fixtures(t, "keys"), "RPM-GPG-KEY-CentOS-7")
	if _, err := runBuilder(t, "resolve", "--cache", cache, "--repo", filepath.Join(dir, "alt", "x86_64"), "--keyring", other, "bash"); err == nil || !strings.Contains(err.Error(), "not in the keyring") {
		t.Errorf("wrong keyring with a warm cache: %v", err)
	}
}
