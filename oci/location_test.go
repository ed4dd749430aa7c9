package oci

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseLocation: every form means the same everywhere, a bare word is
// taken for what is on disk, and a mistaken form is named with the one to
// write.
func TestParseLocation(t *testing.T) {
	dir := t.TempDir()
	layout := filepath.Join(dir, "layout")
	os.MkdirAll(layout, 0o755)
	os.WriteFile(filepath.Join(layout, "index.json"), []byte(`{"schemaVersion":2,"manifests":[]}`), 0o644)
	plain := filepath.Join(dir, "plain")
	os.MkdirAll(plain, 0o755)
	file := filepath.Join(dir, "x.tar")
	os.WriteFile(file, nil, 0o644)
	os.WriteFile(filepath.Join(dir, "split.000"), nil, 0o644)
	good := []struct {
		in   string
		want Location
		str  string
	}{
		{"docker://127.0.0.1:5000/nodeforge/p11", Location{Kind: KindRegistry, Path: "127.0.0.1:5000/nodeforge/p11"}, ""},
		{"docker://registry.local/", Location{Kind: KindRegistry, Path: "registry.local"}, "docker://registry.local"},
		{"127.0.0.1:5000/dev", Location{Kind: KindRegistry, Path: "127.0.0.1:5000/dev"}, "docker://127.0.0.1:5000/dev"},
		{"oci:" + layout, Location{Kind: KindLayout, Path: layout}, ""},
		{"oci:/not/yet", Location{Kind: KindLayout, Path: "/not/yet"}, ""},
		{layout, Location{Kind: KindLayout, Path: layout}, "oci:" + layout},
		{"oci-archive:p11.tar", Location{Kind: KindArchive, Path: "p11.tar"}, ""},
		{"oci:" + layout + "#installer:1.11.0", Location{Kind: KindLayout, Path: layout, Repo: "installer", Ref: "1.11.0"}, ""},
		{"oci:d#extensions/zfs@sha256:" + strings.Repeat("a", 64), Location{Kind: KindLayout, Path: "d", Repo: "extensions/zfs", Ref: "sha256:" + strings.Repeat("a", 64)}, ""},
	}
	for _, c := range good {
		got, err := ParseLocation(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseLocation(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			continue
		}
		str := c.str
		if str == "" {
			str = c.in
		}
		if got.String() != str {
			t.Errorf("%q: String() = %q, want %q", c.in, got.String(), str)
		}
	}
	bad := []struct{ in, msg string }{
		{plain, "write oci:" + plain},
		{file, "write oci-archive:" + file},
		{filepath.Join(dir, "split"), "first part of a split archive"},
		{"oci:", "names no directory"},
		{"oci-archive:", "names no file"},
		{"docker://", "names no registry"},
		{"oci:d#installer", "after # want REPO:TAG"},
		{"has space/x", "want docker://"},
		{"out/demo/release/dve", "no such directory here"},
	}
	for _, c := range bad {
		if _, err := ParseLocation(c.in); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("ParseLocation(%q): %v, want %q", c.in, err, c.msg)
		}
	}
}

// TestParseImageLocation: one image, with # in any store, or as a
// registry reference with the repository last.
func TestParseImageLocation(t *testing.T) {
	for in, want := range map[string]Location{
		"docker://127.0.0.1:5000/nodeforge/p11/installer:1.11.0":    {Kind: KindRegistry, Path: "127.0.0.1:5000/nodeforge/p11", Repo: "installer", Ref: "1.11.0"},
		"127.0.0.1:5000/p11/boot@sha256:" + strings.Repeat("b", 64): {Kind: KindRegistry, Path: "127.0.0.1:5000/p11", Repo: "boot", Ref: "sha256:" + strings.Repeat("b", 64)},
		"docker://127.0.0.1:5000/p11#extensions/zfs:1.0":            {Kind: KindRegistry, Path: "127.0.0.1:5000/p11", Repo: "extensions/zfs", Ref: "1.0"},
	} {
		got, err := ParseImageLocation(in)
		if err != nil || got != want {
			t.Errorf("ParseImageLocation(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"docker://127.0.0.1:5000", "oci:/x", "docker://127.0.0.1:5000/p11/installer"} {
		if _, err := ParseImageLocation(in); err == nil {
			t.Errorf("ParseImageLocation(%q) accepted", in)
		}
	}
}

// TestOpenMissing: a layout that is not there is said not to exist; a
// directory without index.json is said not to be a layout.
func TestOpenMissing(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ path, want string }{
		{filepath.Join(dir, "typo"), "oci:" + filepath.Join(dir, "typo") + ": directory " + filepath.Join(dir, "typo") + " does not exist"},
		{dir, "oci:" + dir + ": not an OCI layout (no index.json)"},
	} {
		_, err := Open(Location{Kind: KindLayout, Path: c.path}, OpenOptions{})
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("Open %s: %v, want %q", c.path, err, c.want)
		}
	}
}
