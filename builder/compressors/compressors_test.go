package compressors

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// nonReference is a builder built without cgo, as This reports it there.
func nonReference() []Implementation {
	list := This()
	list[0].Module, list[0].Version = klauspost, "v1.20.4"
	return list
}

// TestRefusal: a builder whose squashfs zstd is not libzstd refuses in one
// line that says what it lacks and how to build one that can; the
// reference set is not refused.
func TestRefusal(t *testing.T) {
	ref := This()
	for k := range ref {
		ref[k].Module = ref[k].Reference
	}
	if err := Refusal(ref); err != nil {
		t.Errorf("the reference set is refused: %v", err)
	}
	err := Refusal(nonReference())
	if err == nil {
		t.Fatal("a builder without libzstd is not refused")
	}
	msg := err.Error()
	for _, want := range []string{"built without cgo", "squashfs zstd", klauspost, "libzstd via " + datadog, "CGO_ENABLED=1", "to build releases"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal lacks %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("the refusal is more than one line: %q", msg)
	}
}

// TestThis: the implementations of the builder the tests run in (cgo, as
// CI builds it) are the reference, with their versions; the key and the
// map name each. (A test binary carries no versions of its
// dependencies: "unknown" here, the go.mod's in the builder.)
func TestThis(t *testing.T) {
	list := This()
	m := Map(list)
	if len(m) != len(list) {
		t.Errorf("formats named twice: %v", list)
	}
	for _, i := range list {
		if !i.IsReference() || i.Version == "" {
			t.Errorf("%s: %s@%q is not the reference %s", i.Writes, i.Module, i.Version, i.Reference)
		}
		if !strings.Contains(Key(list), i.Writes+"="+i.String()+";") {
			t.Errorf("the key %q lacks %s", Key(list), i.Writes)
		}
	}
	if Key(list) == Key(nonReference()) {
		t.Error("another zstd gives the same key")
	}
	if m["squashfs zstd"] != list[0].String() {
		t.Errorf("map: %v", m)
	}
}

// TestEveryWriterListed: every compression library the build and the
// factory import is one This names, so that a new writer cannot go
// unrecorded; the standard library's compress packages are imported only
// where they decode, or where what they write is written down here.
func TestEveryWriterListed(t *testing.T) {
	var mods []string
	for _, i := range This() {
		mods = append(mods, i.Module)
	}
	// Files allowed to import the standard library's compress packages.
	std := map[string]string{
		"builder/kernel/decompress.go": "decodes modules",
		"factory/talosctl.go":          "decodes layers",
		"builder/media/meta/meta.go":   "gzips META values past 256 bytes (schematic meta): the Go release's bytes, not recorded",
	}
	compression := []string{"github.com/klauspost/compress", "github.com/ulikunitz/xz", "github.com/DataDog/zstd", "github.com/pierrec/lz4", "github.com/andybalholm/brotli", "github.com/dsnet/compress"}
	fset := token.NewFileSet()
	root := filepath.Join("..", "..")
	for _, dir := range []string{"builder", "factory"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			for _, im := range f.Imports {
				path, _ := strconv.Unquote(im.Path.Value)
				if strings.HasPrefix(path, "compress/") && std[rel] == "" {
					t.Errorf("%s imports %s: name it in This, or here if it only decodes", rel, path)
				}
				for _, c := range compression {
					if (path == c || strings.HasPrefix(path, c+"/")) && !slices.Contains(mods, c) && !strings.HasPrefix(rel, "builder/rootfs/sqfs/zstd_") {
						t.Errorf("%s imports %s, which This does not name", rel, path)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestDiskXZ: the .xz disk images are liblzma's (vendored, at its
// version) in a cgo build; a builder whose disk xz is ulikunitz/xz (one
// built without cgo) writes other bytes and is refused, naming it.
func TestDiskXZ(t *testing.T) {
	list := This()
	i := slices.IndexFunc(list, func(i Implementation) bool { return i.Writes == "disk xz" })
	if i < 0 || list[i].String() != "liblzma@5.4.1" || !list[i].IsReference() {
		t.Fatalf("disk xz: %+v", list)
	}
	list[i].Module, list[i].Version = ulikunitz, "v0.5.15"
	err := Refusal(list)
	if err == nil {
		t.Fatal("a builder whose disk xz is ulikunitz/xz is not refused")
	}
	for _, want := range []string{"built without cgo", "disk xz", ulikunitz, "liblzma 5.4.1 via internal/xzdec", "CGO_ENABLED=1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q: %v", want, err)
		}
	}
}
