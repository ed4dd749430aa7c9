package kernel

import (
	"bytes"
	"compress/gzip"
	"maps"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

func sampleModule() testModule {
	m := exporter("demo", []string{"printk", "virtqueue_add", "printk"}, "demo_register", "demo_unregister")
	m.modinfo = append(m.modinfo, "depends=virtio_ring,virtio", "alias=virtio:d00000002v*", "alias=fs-demo",
		"softdep=pre: crc32c post: foo bar", "firmware=demo/fw.bin", "license=Dual BSD/GPL", "novalue", "retpoline=Y")
	m.syms = append(m.syms, testSym{name: "weak_thing", info: 0x20}, testSym{name: "local_defined", shndx: 3})
	m.versions = []string{"module_layout", "printk", "virtqueue_add", "not_referenced"}
	return m
}

func TestReadModinfo(t *testing.T) {
	want := &Modinfo{
		Name: "demo", Vermagic: "6.1.0 SMP mod_unload", License: "GPL",
		Depends:  []string{"virtio_ring", "virtio"},
		Aliases:  []string{"virtio:d00000002v*", "fs-demo"},
		Softdeps: []Softdep{{Raw: "pre: crc32c post: foo bar", Pre: []string{"crc32c"}, Post: []string{"foo", "bar"}}},
		Firmware: []string{"demo/fw.bin"},
		Exports:  []string{"demo_register", "demo_unregister"},
		// Undefined in table order (repeats kept, as kmod), then the
		// __versions entries nothing referred to.
		Undefined: []string{"printk", "virtqueue_add", "printk", "weak_thing", "module_layout", "not_referenced"},
	}
	for _, variant := range []struct {
		name      string
		is64, big bool
	}{{"elf64le", true, false}, {"elf32be", false, true}, {"elf64be", true, true}, {"elf32le", false, false}} {
		m := sampleModule()
		m.is64, m.bigEndian = variant.is64, variant.big
		raw := m.build()
		for _, f := range []struct {
			name string
			data []byte
		}{
			{"demo.ko", raw}, {"demo.ko.xz", xzBytes(t, raw)}, {"demo.ko.zst", zstdBytes(t, raw)}, {"demo.ko.gz", gzipBytes(t, raw)},
		} {
			got, err := ReadModinfo(f.name, f.data)
			if err != nil {
				t.Fatalf("%s %s: %v", variant.name, f.name, err)
			}
			if len(got.Fields) != 11 || got.Fields[9] != (Field{"novalue", "novalue"}) {
				t.Errorf("%s %s: fields = %q", variant.name, f.name, got.Fields)
			}
			got.Fields = nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s:\n got %+v\nwant %+v", variant.name, f.name, got, want)
			}
		}
	}
}

// Without __crc_ symbols (no modversions) kmod takes the exports from
// __ksymtab_strings.
func TestReadModinfoKsymtabStrings(t *testing.T) {
	m := testModule{is64: true, modinfo: []string{"license=GPL"}, ksymstrs: []string{"", "alpha", "beta", "", "gamma"},
		syms: []testSym{{name: "needed", info: 0x10}}}
	got, err := ReadModinfo("k.ko", m.build())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Exports, []string{"alpha", "beta", "gamma"}) || !slices.Equal(got.Undefined, []string{"needed"}) {
		t.Errorf("exports %q, undefined %q", got.Exports, got.Undefined)
	}
	// No symbol table at all: no dependencies, exports still found.
	m.noSymtab = true
	got, err = ReadModinfo("k.ko", m.build())
	if err != nil || got.Undefined != nil || len(got.Exports) != 3 {
		t.Errorf("no symtab: %+v, %v", got, err)
	}
}

func TestReadModinfoErrors(t *testing.T) {
	good := sampleModule().build()
	noModinfo := sampleModule()
	noModinfo.modinfo = nil
	badShstr := bytes.Clone(good)
	badShstr[62] = 0x7f // e_shstrndx past the last section
	bomb := gzipBytes(t, make([]byte, 3<<20))
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"t.ko", good[:len(good)/2], "not a valid ELF"},
		{"t.ko", good[:40], "not a valid ELF"},
		{"t.ko", nil, "not a valid ELF"},
		{"t.ko", []byte("hello world, not an ELF file at all......................................"), "not a valid ELF"},
		{"t.ko", noModinfo.build(), "no .modinfo"},
		{"t.ko", badShstr, "t.ko"},
		{"t.ko.xz", good, "xz: "},
		{"t.ko.zst", good, "decompress zst"},
		{"t.ko.gz", good, "gzip: "},
		{"t.ko.xz", xzBytes(t, good)[:30], "t.ko.xz"},
		{"t.ko.zst", zstdBytes(t, good)[:20], "t.ko.zst"},
		{"t.ko.gz", gzipBytes(t, good)[:20], "t.ko.gz"},
		{"t.o", good, "not a module file name"},
		{"t.ko.bz2", good, "not a module file name"},
	}
	for _, c := range cases {
		_, err := ReadModinfo(c.name, c.data)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("ReadModinfo(%s, %d bytes): err = %v, want one naming the file and %q", c.name, len(c.data), err, c.want)
		}
	}
	// A decompression bomb stops at the bound, for every decompressor.
	defer func(n int64) { maxDecompressed = n }(maxDecompressed)
	maxDecompressed = 1 << 20
	for name, data := range map[string][]byte{"b.ko.gz": bomb, "b.ko.xz": xzBytes(t, make([]byte, 3<<20)), "b.ko.zst": zstdBytes(t, make([]byte, 3<<20))} {
		if _, err := ReadModinfo(name, data); err == nil || !strings.Contains(err.Error(), "exceeds") {
			t.Errorf("%s: err = %v, want a size error", name, err)
		}
	}
}

// modinfo(8) from kmod is the judge of the .modinfo reading on real modules.
func TestReadModinfoMatchesModinfoTool(t *testing.T) {
	tr := debianKernel(t)
	testutil.NeedTool(t, "modinfo")
	paths := slices.Sorted(maps.Keys(tr.files))
	// Every 97th module, plus the ones the node OS needs.
	var pick []string
	for i, p := range paths {
		if i%97 == 0 || strings.Contains(p, "virtio") || strings.Contains(p, "squashfs") || strings.Contains(p, "overlay") {
			pick = append(pick, p)
		}
	}
	for _, p := range pick {
		mi, err := ReadModinfo(p, tr.files[p])
		if err != nil {
			t.Fatal(err)
		}
		full := tr.modDir + "/" + p
		field := func(key string) []string {
			out, err := exec.Command("modinfo", "-0", "-F", key, full).Output()
			if err != nil {
				t.Fatalf("modinfo -F %s %s: %v", key, full, err)
			}
			var vals []string
			for _, v := range strings.Split(string(out), "\x00") {
				if v != "" {
					vals = append(vals, v)
				}
			}
			return vals
		}
		var raw []string
		for _, s := range mi.Softdeps {
			raw = append(raw, s.Raw)
		}
		var deps []string
		if d := field("depends"); len(d) == 1 {
			deps = strings.Split(d[0], ",")
		}
		for _, c := range []struct {
			key       string
			got, want []string
		}{
			{"alias", mi.Aliases, field("alias")},
			{"softdep", raw, field("softdep")},
			{"firmware", mi.Firmware, field("firmware")},
			{"depends", mi.Depends, deps},
			{"vermagic", []string{mi.Vermagic}, field("vermagic")},
			{"name", []string{mi.Name}, field("name")},
		} {
			if !slices.Equal(c.got, c.want) {
				t.Errorf("%s: %s = %q, modinfo says %q", p, c.key, c.got, c.want)
			}
		}
		if len(mi.Undefined) == 0 {
			t.Errorf("%s: no undefined symbols", p)
		}
	}
}

func gzipBytes(t testing.TB, data []byte) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
