package compose

import (
	"archive/tar"
	"bytes"
	"strings"
	"testing"
)

// layer writes a tar of the given headers (files get their name as
// content).
func layer(t *testing.T, hs ...*tar.Header) *bytes.Reader {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range hs {
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(h.Name))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(h.Name))
		}
	}
	tw.Close()
	return bytes.NewReader(b.Bytes())
}

const manifest = "version: v1alpha1\nmetadata:\n  name: demo\n  version: 1.0\n  author: t\n  description: d\n  compatibility:\n    talos:\n      version: '>= v1.0.0'\n"

// TestExtensionFromLayer: a layer as builds write it reads back with its
// paths relocated, hard links grouped, owners numeric and modules found;
// a layer that is not one is refused with the reason.
func TestExtensionFromLayer(t *testing.T) {
	man := &tar.Header{Typeflag: tar.TypeReg, Name: "./manifest.yaml", Mode: 0o644}
	var mb bytes.Buffer
	tw := tar.NewWriter(&mb)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "./manifest.yaml", Mode: 0o644, Size: int64(len(manifest))})
	tw.Write([]byte(manifest))
	for _, h := range []*tar.Header{
		{Typeflag: tar.TypeDir, Name: "./rootfs/", Mode: 0o755},
		{Typeflag: tar.TypeDir, Name: "./rootfs/usr/lib/modules/6.1/", Mode: 0o755},
		{Typeflag: tar.TypeReg, Name: "./rootfs/usr/lib/modules/6.1/zfs.ko", Mode: 0o644, Uid: 1000, Gid: 1000, Size: 3},
		{Typeflag: tar.TypeLink, Name: "./rootfs/usr/lib/modules/6.1/zfs-link.ko", Linkname: "./rootfs/usr/lib/modules/6.1/zfs.ko"},
		{Typeflag: tar.TypeSymlink, Name: "./rootfs/usr/bin-link", Linkname: "lib"},
	} {
		tw.WriteHeader(h)
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte("elf"))
		}
	}
	tw.Close()
	e, err := ExtensionFromLayer(bytes.NewReader(mb.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if e.Name != "demo" || !e.Modules {
		t.Errorf("name %q, modules %t", e.Name, e.Modules)
	}
	a, b := e.Tree.Get("/usr/lib/modules/6.1/zfs.ko"), e.Tree.Get("/usr/lib/modules/6.1/zfs-link.ko")
	if a == nil || b == nil || a.LinkGroup == "" || a.LinkGroup != b.LinkGroup || string(b.Data) != "elf" || a.User != "1000" {
		t.Fatalf("hard link: %+v %+v", a, b)
	}
	if l := e.Tree.Get("/usr/bin-link"); l == nil || l.Target != "lib" {
		t.Errorf("symlink: %+v", l)
	}
	if e.Tree.Get("/manifest.yaml") != nil || e.Tree.Get("/rootfs") != nil {
		t.Error("the layer's own files are in the extension's tree")
	}
	for _, c := range []struct {
		name string
		r    *bytes.Reader
		want string
	}{
		{"no manifest", layer(t, &tar.Header{Typeflag: tar.TypeDir, Name: "./rootfs/", Mode: 0o755}), "without manifest.yaml"},
		{"bad manifest", layer(t, man), "manifest.yaml"},
		{"dangling hard link", layer(t, &tar.Header{Typeflag: tar.TypeLink, Name: "./rootfs/a", Linkname: "./rootfs/b"}), "hard link to ./rootfs/b"},
		{"unknown type", layer(t, &tar.Header{Typeflag: 'V', Name: "./rootfs/x"}), "not one a tree holds"},
		{"not a tar", bytes.NewReader([]byte("not a tar at all, just some bytes that are long enough to be read as a header block")), "tar:"},
	} {
		if _, err := ExtensionFromLayer(c.r); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestParams(t *testing.T) {
	p := Params{Architectures: []string{"x86_64"}, Cmdline: []string{"a=b c"}, Squashfs: SquashfsParams{Compressor: "zstd", Level: 13}}
	v, err := p.Annotation()
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParseParams(v)
	if err != nil || q.Cmdline[0] != "a=b c" || q.SquashfsOptions().Level != 13 {
		t.Errorf("%+v %v", q, err)
	}
	if _, err := ParseParams(""); err == nil || !strings.Contains(err.Error(), "made before") {
		t.Errorf("no annotation: %v", err)
	}
}
