package kernel

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// syntheticTree is a small tree of made-up modules covering dependencies,
// aliases, softdeps, device names and odd spellings depmod has rules for.
func syntheticTree() map[string][]byte {
	a := exporter("a", nil, "a_sym", "shared_sym")
	b := exporter("b", []string{"a_sym", "printk"}, "b_sym")
	b.modinfo = append(b.modinfo, "alias=fs-b", "alias=char-major-10-200", "alias=devname:bdev",
		"softdep=pre: a post: d", "alias=pci:v0000[0-9A-F]*d*", "alias=bad]bracket", "alias=bad[bracket")
	c := exporter("c-dash", []string{"b_sym", "a_sym", ".shared_sym"})
	c.modinfo = append(c.modinfo, "alias=devname:cdev", "alias=block-major-+8-  3x")
	d := exporter("d", nil)
	d.modinfo = append(d.modinfo, "alias=devname:nomajor", "alias=char-major-x-1", "alias=long-"+strings.Repeat("q", 5000))
	// A module outside modules.order that takes shared_sym over from a.
	e := exporter("e", nil, "shared_sym", "e_only")
	return map[string][]byte{
		"kernel/a/a.ko":          a.build(),
		"kernel/b/b.ko":          b.build(),
		"kernel/c/c-dash.ko":     c.build(),
		"kernel/d/d.ko":          d.build(),
		"extra/e.ko":             e.build(),
		"kernel/build/x.ko":      []byte("skipped: depmod never enters build/"),
		"source/y.ko":            []byte("skipped: nor source/"),
		"kernel/a/notes.txt":     []byte("not a module"),
		"kernel/a/.ko":           []byte("too short to be a module name"),
		"weird/Z-ïnfo.dir/x1.ko": exporter("x1", []string{"e_only"}).build(),
	}
}

const syntheticOrder = "kernel/d/d.ko\nkernel/c/c-dash.ko\nkernel/b/b.ko\nkernel/a/a.ko\nkernel/gone/gone.ko\nkernel/a/a.ko\n"

func TestDepmodSynthetic(t *testing.T) {
	in := Input{KernelVersion: "6.1.0-test", Files: syntheticTree(), Order: []byte(syntheticOrder),
		Builtin: []byte("kernel/fs/ext4/ext4.ko\nkernel/lib/crc-t10dif.ko\n")}
	out, err := Depmod(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(OutputFiles) {
		t.Fatalf("got %d files", len(out))
	}
	dep := string(out["modules.dep"])
	for _, want := range []string{
		"kernel/d/d.ko:\n",
		"kernel/c/c-dash.ko: extra/e.ko kernel/b/b.ko kernel/a/a.ko\n",
		"kernel/b/b.ko: kernel/a/a.ko\n",
		"weird/Z-ïnfo.dir/x1.ko: extra/e.ko\n",
	} {
		if !strings.Contains(dep, want) {
			t.Errorf("modules.dep lacks %q:\n%s", want, dep)
		}
	}
	if strings.Contains(dep, "build/") || strings.Contains(dep, "source/") {
		t.Errorf("modules.dep names skipped directories:\n%s", dep)
	}
	if !strings.HasPrefix(dep, "kernel/d/d.ko:\nkernel/c/c-dash.ko:") {
		t.Errorf("modules.dep does not follow modules.order:\n%s", dep)
	}
	lookups := []struct {
		file, key string
		want      []indexValue
	}{
		{"modules.dep.bin", "c_dash", []indexValue{{1, "kernel/c/c-dash.ko: extra/e.ko kernel/b/b.ko kernel/a/a.ko"}}},
		{"modules.alias.bin", "fs_b", []indexValue{{2, "b"}}},
		{"modules.alias.bin", "pci:v0000[0-9A-F]*d*", []indexValue{{2, "b"}}},
		{"modules.symbols.bin", "symbol:shared_sym", []indexValue{{5, "e"}}}, // unlisted modules follow in hash order
		{"modules.symbols.bin", "symbol:a_sym", []indexValue{{3, "a"}}},
		{"modules.builtin.bin", "crc_t10dif", []indexValue{{0, ""}}},
	}
	for _, l := range lookups {
		got, err := indexGet(out[l.file], l.key)
		if err != nil || !slices.Equal(got, l.want) {
			t.Errorf("%s[%q] = %v, %v; want %v", l.file, l.key, got, err, l.want)
		}
	}
	if got := string(out["modules.devname"]); got != "# Device nodes to trigger on-demand module loading.\nc_dash cdev b8:3\nb bdev c10:200\n" {
		t.Errorf("modules.devname =\n%s", got)
	}
	if got := string(out["modules.softdep"]); !strings.Contains(got, "softdep b pre: a post: d\n") {
		t.Errorf("modules.softdep =\n%s", got)
	}
	// Same input, same bytes, whatever the map order.
	for i := 0; i < 3; i++ {
		again, err := Depmod(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range OutputFiles {
			if !bytes.Equal(again[name], out[name]) {
				t.Fatalf("%s differs between runs", name)
			}
		}
	}
}

// Real depmod judges the synthetic tree and odd builtin and order files.
func TestDepmodMatchesDebianSynthetic(t *testing.T) {
	testutil.NeedTool(t, "depmod")
	long := strings.Repeat("k", 5000)
	builtin := "kernel/fs/ext4/ext4.ko\nnodot\n9starts-with-digit.ko\n\nkernel/x/" + long + ".ko\nkernel/crlf/crlf.ko\r\nemb\x00edded.ko\nkernel/dash-ed/my-mod.ko\nkernel/trailing/"
	modinfo := "ext4.alias=fs-ext4\x00ext4.license=GPL\x00noalias\x00crc32c_generic.alias=crypto-crc32c\x00" +
		"x.alias=pci:v[0-9]*d-[a-b]\x00bad.alias=un]matched\x00empty.alias=\x00" + long + ".alias=long\x00" +
		"y.alias=" + long + "\x00z.alias=last-no-nul"
	for name, in := range map[string]Input{
		"ordered":  {Files: syntheticTree(), Order: []byte(syntheticOrder), Builtin: []byte(builtin), BuiltinModinfo: []byte(modinfo)},
		"no order": {Files: syntheticTree()},
		"odd order": {Files: syntheticTree(), Order: []byte("kernel/a/a.ko\n" + long + "\nkernel/b/b.ko\n\x00kernel/c/c-dash.ko\n"),
			Builtin: []byte{}, BuiltinModinfo: []byte{}},
	} {
		t.Run(name, func(t *testing.T) {
			in.KernelVersion = "6.1.0-test"
			ours, err := Depmod(in)
			if err != nil {
				t.Fatal(err)
			}
			_, theirs := runDebianDepmod(t, in)
			compareOutputs(t, ours, theirs)
		})
	}
}

func TestDepmodErrors(t *testing.T) {
	mod := func(name string, needs []string, exports ...string) []byte {
		return exporter(name, needs, exports...).build()
	}
	cases := []struct {
		name  string
		files map[string][]byte
		want  []string
	}{
		{"cycle", map[string][]byte{
			"k/x.ko": mod("x", []string{"y_sym"}, "x_sym"), "k/y.ko": mod("y", []string{"x_sym"}, "y_sym"), "k/z.ko": mod("z", nil)},
			[]string{"cycle", "k/x.ko", "k/y.ko"}},
		{"self", map[string][]byte{"k/s.ko": mod("s", []string{"s_sym"}, "s_sym")}, []string{"cycle", "k/s.ko"}},
		{"duplicate", map[string][]byte{"k/dup.ko": mod("dup", nil), "extra/dup.ko.xz": xzBytes(t, mod("dup", nil))},
			[]string{"dup", "k/dup.ko", "extra/dup.ko.xz"}},
		{"duplicate in updates", map[string][]byte{"updates/a/dup.ko": mod("dup", nil), "updates/b/dup.ko": mod("dup", nil)},
			[]string{"updates/a/dup.ko", "updates/b/dup.ko"}},
		{"corrupt", map[string][]byte{"k/ok.ko": mod("ok", nil), "k/bad.ko.zst": []byte("garbage")}, []string{"k/bad.ko.zst"}},
		{"absolute", map[string][]byte{"/lib/modules/x.ko": mod("x", nil)}, []string{"/lib/modules/x.ko"}},
		{"escape", map[string][]byte{"../x.ko": mod("x", nil)}, []string{"../x.ko"}},
		{"unclean", map[string][]byte{"k//x.ko": mod("x", nil)}, []string{"k//x.ko"}},
		{"empty name", map[string][]byte{"k/.x.ko": mod("x", nil)}, []string{"k/.x.ko", "empty module name"}},
	}
	for _, c := range cases {
		_, err := Depmod(Input{KernelVersion: "6.1.0", Files: c.files})
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, w)
			}
		}
	}
	// updates/ wins over the same module elsewhere, whichever sorts first.
	out, err := Depmod(Input{Files: map[string][]byte{"kernel/dup.ko": mod("dup", nil), "updates/dup.ko": mod("dup", nil)}})
	if err != nil || string(out["modules.dep"]) != "updates/dup.ko:\n" {
		t.Errorf("updates override: %q, %v", out["modules.dep"], err)
	}
}

func TestDepmodEmpty(t *testing.T) {
	out, err := Depmod(Input{KernelVersion: "6.1.0"})
	if err != nil {
		t.Fatal(err)
	}
	empty, _ := newIndex().bytes()
	want := map[string]string{
		"modules.dep": "", "modules.dep.bin": string(empty),
		"modules.alias": "# Aliases extracted from modules themselves.\n", "modules.alias.bin": string(empty),
		"modules.softdep": "# Soft dependencies extracted from modules themselves.\n",
		"modules.symbols": "# Aliases for symbols, used by symbol_request().\n", "modules.symbols.bin": string(empty),
		"modules.builtin.bin": "", "modules.builtin.alias.bin": "", "modules.devname": "",
	}
	for name, w := range want {
		if got, ok := out[name]; !ok || string(got) != w {
			t.Errorf("%s = %q (present %v), want %q", name, got, ok, w)
		}
	}
}
