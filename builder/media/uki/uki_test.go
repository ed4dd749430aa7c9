package uki

import (
	"bytes"
	"debug/pe"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/pechecksum"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/testbase"
)

// TestBuild: the UKI made from Debian's systemd-stub holds every section
// at an aligned address after the stub's, with its bytes, as Go's
// debug/pe and binutils' objdump read it; the stub's own bytes are
// unchanged but for the header fields; two builds are identical; and the
// checksum function gives what the stub's linker wrote.
func TestBuild(t *testing.T) {
	stub := testbase.EFIForTest(t, "linuxx64.efi.stub")
	if stub == nil {
		return
	}
	// The checksum as the stub's linker computed it.
	stubPE, err := pe.NewFile(bytes.NewReader(stub))
	if err != nil {
		t.Fatal(err)
	}
	opt := stubPE.OptionalHeader.(*pe.OptionalHeader64)
	h, err := parseHeaders(stub)
	if err != nil {
		t.Fatal(err)
	}
	if got := pechecksum.Of(stub, h.optional+64); got != opt.CheckSum {
		t.Errorf("checksum of the stub: %#x, its header says %#x", got, opt.CheckSum)
	}

	kernel := bytes.Repeat([]byte("kernel"), 100000)
	secs := Sections([]byte("ID=nodeforge\n"), []byte("console=ttyS0"), []byte("6.1.0-test"), []byte("initrd bytes"), kernel)
	uki, err := Build(stub, secs)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Build(stub, secs)
	if !bytes.Equal(uki, again) {
		t.Error("two builds differ")
	}
	// Laid out, the image writes Build's bytes, of the size it says.
	im, err := Layout(stub, secs)
	if err != nil {
		t.Fatal(err)
	}
	var written bytes.Buffer
	if n, err := im.WriteTo(&written); err != nil || n != im.Size() || !bytes.Equal(written.Bytes(), uki) {
		t.Errorf("Layout wrote %d bytes (%v), size %d, Build's %d: equal %t", n, err, im.Size(), len(uki), bytes.Equal(written.Bytes(), uki))
	}
	// Sections read where they are (Body; .osrel of an odd size) make the
	// same image.
	bodies := slices.Clone(secs)
	for i := range bodies {
		if bodies[i].Name != ".cmdline" {
			bodies[i].Body, bodies[i].Data = bytes.NewReader(bodies[i].Data), nil
		}
	}
	if im, err := Layout(stub, bodies); err != nil || !bytes.Equal(im.Bytes(), uki) {
		t.Errorf("with bodies: %v", err)
	}
	f, err := pe.NewFile(bytes.NewReader(uki))
	if err != nil {
		t.Fatalf("debug/pe: %v", err)
	}
	o := f.OptionalHeader.(*pe.OptionalHeader64)
	prevEnd := uint32(0)
	for _, s := range f.Sections[:len(stubPE.Sections)] {
		prevEnd = max(prevEnd, s.VirtualAddress+s.VirtualSize)
	}
	for i, want := range secs {
		s := f.Sections[len(stubPE.Sections)+i]
		data, err := s.Data()
		if err != nil {
			t.Fatal(err)
		}
		if s.Name != want.Name || !bytes.Equal(data[:s.VirtualSize], want.Data) {
			t.Errorf("section %d: %s, %d bytes; want %s", i, s.Name, s.VirtualSize, want.Name)
		}
		if s.VirtualAddress%o.SectionAlignment != 0 || s.VirtualAddress < prevEnd || s.Offset%o.FileAlignment != 0 {
			t.Errorf("%s at %#x (file %#x), after %#x", s.Name, s.VirtualAddress, s.Offset, prevEnd)
		}
		prevEnd = s.VirtualAddress + s.VirtualSize
	}
	if o.SizeOfImage < prevEnd || f.FileHeader.TimeDateStamp != 0 {
		t.Errorf("SizeOfImage %#x for sections up to %#x; time stamp %d", o.SizeOfImage, prevEnd, f.FileHeader.TimeDateStamp)
	}
	if got := pechecksum.Of(uki, h.optional+64); got != o.CheckSum {
		t.Errorf("the UKI's checksum field %#x, its bytes sum to %#x", o.CheckSum, got)
	}
	// Outside the header fields Build sets, the stub's headers and
	// sections are kept; its COFF symbol table is left out.
	kept := bytes.Clone(uki[:h.rawEnd])
	for _, off := range []int{h.coff + 2, h.coff + 4, h.coff + 8, h.coff + 12, h.optional + 56, h.optional + 64} {
		copy(kept[off:off+4], stub[off:off+4])
	}
	copy(kept[h.tableOffset+h.sections*sectionHdrSize:h.sizeOfHeaders], stub[h.tableOffset+h.sections*sectionHdrSize:h.sizeOfHeaders])
	if !bytes.Equal(kept, stub[:h.rawEnd]) {
		t.Error("the stub's bytes changed beyond its headers")
	}
	if f.FileHeader.PointerToSymbolTable != 0 || f.FileHeader.NumberOfSymbols != 0 {
		t.Errorf("the symbol table is still named: %+v", f.FileHeader)
	}

	// binutils' judge: objdump lists the sections.
	path := filepath.Join(t.TempDir(), "nodeforge.efi")
	os.WriteFile(path, uki, 0o644)
	out, err := exec.Command(testutil.NeedTool(t, "objdump"), "-h", path).CombinedOutput()
	if err != nil {
		t.Fatalf("objdump: %v\n%s", err, out)
	}
	for _, name := range []string{".text", ".sbat", ".sdmagic", ".osrel", ".cmdline", ".uname", ".initrd", ".linux"} {
		if !strings.Contains(string(out), " "+name+" ") {
			t.Errorf("objdump -h lists no %s:\n%s", name, out)
		}
	}
}

// TestBuildRefuses: what is not a stub to build on is refused, naming why.
func TestBuildRefuses(t *testing.T) {
	if _, err := Build([]byte("not a PE"), nil); err == nil || !strings.Contains(err.Error(), "not a PE image") {
		t.Errorf("not a PE: %v", err)
	}
	stub := testbase.EFIForTest(t, "linuxx64.efi.stub")
	if stub == nil {
		return
	}
	if _, err := Build(stub, []Section{{Name: ".sdmagic", Data: []byte("x")}}); err == nil || !strings.Contains(err.Error(), "already has a section .sdmagic") {
		t.Errorf("a section of the stub's name: %v", err)
	}
	if _, err := Build(stub, []Section{{Name: ".toolongname", Data: nil}}); err == nil {
		t.Error("a section name of 12 bytes was taken")
	}
	many := make([]Section, 30)
	for i := range many {
		many[i] = Section{Name: ".s" + string(rune('a'+i%26)) + string(rune('a'+i/26))}
	}
	if _, err := Build(stub, many); err == nil || !strings.Contains(err.Error(), "no room in the stub's headers") {
		t.Errorf("30 sections: %v", err)
	}
	signed := bytes.Clone(stub)
	h, _ := parseHeaders(stub)
	binary.LittleEndian.PutUint32(signed[h.optional+112+8*4+4:], 16)
	if _, err := Build(signed, nil); err == nil || !strings.Contains(err.Error(), "the stub is signed") {
		t.Errorf("a signed stub: %v", err)
	}
}
