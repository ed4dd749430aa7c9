package kernel

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadModinfo feeds arbitrary bytes under each module suffix: errors
// are fine, panics and runaway memory are not. Seeds are small synthetic
// modules (testdata/fuzz/FuzzReadModinfo).
func FuzzReadModinfo(f *testing.F) {
	exts := []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"}
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		name := "fuzz" + exts[int(kind)%len(exts)]
		mi, err := ReadModinfo(name, data)
		if err != nil {
			if !strings.Contains(err.Error(), name) {
				t.Errorf("error does not name the file: %v", err)
			}
			return
		}
		// What depmod would index must be usable as index keys or lines.
		for _, s := range mi.Undefined {
			if s == "" {
				t.Error("empty undefined symbol")
			}
		}
	})
}

// TestWriteFuzzSeeds regenerates the committed seed corpus when
// NODEFORGE_WRITE_FUZZ_SEEDS=1; otherwise it checks the seeds parse.
func TestWriteFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReadModinfo")
	sample := sampleModule()
	elf32 := sampleModule()
	elf32.is64, elf32.bigEndian = false, true
	ksym := testModule{is64: true, modinfo: []string{"license=GPL"}, ksymstrs: []string{"alpha", "beta"},
		syms: []testSym{{name: "needed", info: 0x10}}}
	seeds := []struct {
		name string
		kind uint8
		data []byte
	}{
		{"elf64le", 0, sample.build()},
		{"elf32be", 0, elf32.build()},
		{"ksymtab-strings", 0, ksym.build()},
		{"no-modinfo", 0, testModule{is64: true, noSymtab: true}.build()},
		{"xz", 1, xzBytes(t, exporter("x", []string{"a"}, "b").build())},
		{"zstd", 2, zstdBytes(t, exporter("z", []string{"a"}, "b").build())},
		{"gzip", 3, gzipBytes(t, exporter("g", []string{"a"}, "b").build())},
	}
	if os.Getenv("NODEFORGE_WRITE_FUZZ_SEEDS") == "1" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, s := range seeds {
			body := fmt.Sprintf("go test fuzz v1\nuint8(%d)\n[]byte(%q)\n", s.kind, s.data)
			if err := os.WriteFile(filepath.Join(dir, s.name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range seeds {
		if _, err := os.Stat(filepath.Join(dir, s.name)); err != nil {
			t.Errorf("seed %s missing (run with NODEFORGE_WRITE_FUZZ_SEEDS=1): %v", s.name, err)
		}
	}
}

// FuzzDepmodTextInputs feeds arbitrary modules.order, modules.builtin and
// modules.builtin.modinfo to Depmod over two small modules.
func FuzzDepmodTextInputs(f *testing.F) {
	files := map[string][]byte{
		"kernel/a/a.ko":    exporter("a", nil, "a_sym").build(),
		"kernel/b/b-x.ko":  exporter("b-x", []string{"a_sym"}).build(),
		"extra/c.ko":       exporter("c", []string{"a_sym"}).build(),
		"kernel/d/d.ko.gz": gzipBytes(f, exporter("d", nil).build()),
	}
	f.Add([]byte("kernel/b/b-x.ko\nkernel/a/a.ko\n"), []byte("kernel/fs/ext4.ko\n"), []byte("ext4.alias=fs-ext4\x00"))
	f.Add([]byte("kernel/a/a.ko"), []byte("x\x00y\n9\n"), []byte("a.alias=[x-y]\x00b.license=GPL\x00.alias=\x00"))
	f.Fuzz(func(t *testing.T, order, builtin, modinfo []byte) {
		out, err := Depmod(Input{KernelVersion: "6.1.0", Files: files, Order: order, Builtin: builtin, BuiltinModinfo: modinfo})
		if err != nil {
			return // non-ASCII index keys are refused
		}
		if !bytes.HasPrefix(out["modules.dep"], []byte("kernel/")) && !bytes.HasPrefix(out["modules.dep"], []byte("extra/")) {
			t.Errorf("modules.dep = %q", out["modules.dep"])
		}
		if got := bytes.Count(out["modules.dep"], []byte("\n")); got != len(files) {
			t.Errorf("modules.dep has %d lines, want %d", got, len(files))
		}
	})
}
