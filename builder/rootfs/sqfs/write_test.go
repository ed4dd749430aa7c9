package sqfs

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

func imageBytes(t testing.TB, es []Entry, o Options) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, es, o); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// streamedBytes writes the image into a file after a 5-byte prefix and
// returns the image's bytes.
func streamedBytes(t testing.TB, es []Entry, o Options) []byte {
	t.Helper()
	f, err := os.Create(t.TempDir() + "/image")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("head:")
	if err := Write(f, es, o); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(":tail"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("head:")) || !bytes.HasSuffix(b, []byte(":tail")) {
		t.Fatal("the file around the image was changed")
	}
	return b[5 : len(b)-5]
}

// TestStreamFails: a file that stops taking bytes midway gives its error,
// and the workers stop.
func TestStreamFails(t *testing.T) {
	f, err := os.Create(t.TempDir() + "/image")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = Write(&failingFile{File: f, left: 200 << 10}, fixture(), Options{Workers: 3})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("got %v, want the writer's error", err)
	}
}

// failingFile takes left bytes, then fails every write.
type failingFile struct {
	*os.File
	left int
}

func (f *failingFile) Write(b []byte) (int, error) {
	if len(b) > f.left {
		return 0, fmt.Errorf("disk full")
	}
	f.left -= len(b)
	return f.File.Write(b)
}

// TestReproducible: the bytes depend on the entries and options only, not
// on the number of workers or the order of the entries.
func TestReproducible(t *testing.T) {
	es := fixture()
	for _, comp := range compressors() {
		t.Run(comp, func(t *testing.T) {
			if comp != "zstd" {
				// Pure-Go xz and gzip: their four images took 100 s and
				// 30 to 55 s under -race. The workers are zstd's beside
				// them; TestWorkersPerCompressor runs each compressor's
				// workers in parallel under -race.
				testutil.NoRace(t)
			}
			a := judgedBytes(t, comp) // one worker, mkfs time 42
			b := imageBytes(t, es, Options{Compressor: comp, Workers: 8, MkfsTime: 42})
			shuffled := append([]Entry(nil), es...)
			rand.New(rand.NewPCG(7, 7)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			c := imageBytes(t, shuffled, Options{Compressor: comp, Workers: 3, MkfsTime: 42})
			if !bytes.Equal(a, b) || !bytes.Equal(a, c) {
				t.Fatalf("images differ: %d, %d, %d bytes", len(a), len(b), len(c))
			}
			// Into a file, blocks stream out and the superblock comes
			// last; the image may start anywhere in the file.
			if f := streamedBytes(t, es, Options{Compressor: comp, Workers: 2, MkfsTime: 42}); !bytes.Equal(a, f) {
				t.Fatalf("the image streamed into a file differs: %d bytes, %d in memory", len(f), len(a))
			}
			// And into a Buffer, which seeks.
			var m Buffer
			if err := Write(&m, es, Options{Compressor: comp, Workers: 2, MkfsTime: 42}); err != nil || !bytes.Equal(a, m.Bytes()) {
				t.Fatalf("into a Buffer: %v, %d bytes, %d in a bytes.Buffer", err, len(m.Bytes()), len(a))
			}
			if len(a)%devBlockSize != 0 {
				t.Errorf("image of %d bytes is not padded to 4 KiB", len(a))
			}
			if got := binary.LittleEndian.Uint32(a[8:]); got != 42 {
				t.Errorf("mkfs_time %d", got)
			}
		})
	}
}

// TestWorkersPerCompressor: blocks compressed by several workers at once
// give the bytes one worker gives, with each compressor, on a small tree
// (TestReproducible's xz and gzip cases, on the whole fixture, run
// without the race detector).
func TestWorkersPerCompressor(t *testing.T) {
	es := []Entry{
		dir("/", 0o755, 0, 0),
		file("/big", 0o644, content(400, 6*defaultBlockSize+1000)),
		file("/small", 0o644, content(401, 3000)),
		file("/random", 0o644, randomBytes(402, 5000)),
	}
	for _, comp := range compressors() {
		t.Run(comp, func(t *testing.T) {
			a := imageBytes(t, es, Options{Compressor: comp, Workers: 1})
			if b := imageBytes(t, es, Options{Compressor: comp, Workers: 4}); !bytes.Equal(a, b) {
				t.Fatalf("images differ: %d bytes with one worker, %d with four", len(a), len(b))
			}
		})
	}
}

// TestListing decodes directory listings and checks the invariants the
// kernel relies on: at most 256 entries a header, one inode block a
// header, deltas in 16 bits, names sorted, index entries at headers.
func TestListing(t *testing.T) {
	var children []*node
	for i := range 3000 {
		name := fmt.Sprintf("n%05d-%s", i, strings.Repeat("y", i%90))
		// Inode blocks change every 100 entries; a far inode number every 700.
		num := uint32(10 + i)
		if i%700 == 699 {
			num = 100000
		}
		children = append(children, &node{name: name, ino: &inode{num: num, typ: typeFile, ref: uint64(i/100*3000)<<16 | uint64(i%100*40)}})
	}
	b, index := listing(nil, children)
	if len(index) < len(b)/metaSize-1 {
		t.Errorf("%d index entries for a listing of %d bytes", len(index), len(b))
	}
	headers := map[int]string{}
	var names []string
	for off := 0; off < len(b); {
		count := int(binary.LittleEndian.Uint32(b[off:])) + 1
		block := binary.LittleEndian.Uint32(b[off+4:])
		base := int32(binary.LittleEndian.Uint32(b[off+8:]))
		if count > maxDirRun {
			t.Fatalf("header at %d: %d entries", off, count)
		}
		hdr := off
		off += dirHeaderSize
		for k := range count {
			inoOff := binary.LittleEndian.Uint16(b[off:])
			delta := int16(binary.LittleEndian.Uint16(b[off+2:]))
			n := int(binary.LittleEndian.Uint16(b[off+6:])) + 1
			name := string(b[off+8 : off+8+n])
			if k == 0 {
				headers[hdr] = name
			}
			c := children[len(names)]
			if c.name != name || uint32(base+int32(delta)) != c.ino.num || uint64(block)<<16|uint64(inoOff) != c.ino.ref {
				t.Fatalf("entry %d (%s) decodes wrong", len(names), name)
			}
			names = append(names, name)
			off += dirEntrySize + n
		}
	}
	if len(names) != len(children) {
		t.Fatalf("%d names decoded", len(names))
	}
	for _, ix := range index {
		if headers[int(ix.pos)] != ix.name {
			t.Errorf("index entry at %d (%s) is not at a header", ix.pos, ix.name)
		}
	}
}

func TestErrors(t *testing.T) {
	root := dir("/", 0o755, 0, 0)
	cases := []struct {
		name string
		es   []Entry
		want string
	}{
		{"no root", []Entry{file("/a", 0o644, nil)}, "root directory"},
		{"missing parent", []Entry{root, file("/a/b", 0o644, nil)}, "/a/b: parent directory /a"},
		{"parent not dir", []Entry{root, file("/a", 0o644, nil), file("/a/b", 0o644, nil)}, "parent /a is not a directory"},
		{"duplicate", []Entry{root, file("/a", 0o644, nil), file("/a", 0o644, nil)}, "/a: listed twice"},
		{"relative", []Entry{root, file("a", 0o644, nil)}, "not absolute"},
		{"unclean", []Entry{root, file("/a/../b", 0o644, nil)}, "not absolute and clean"},
		{"no type", []Entry{root, {Path: "/a", Mode: 0o644}}, "no file type"},
		{"long name", []Entry{root, file("/"+strings.Repeat("x", 257), 0o644, nil)}, "squashfs allows 256"},
		{"xattr namespace", []Entry{root, {Path: "/a", Mode: sIFREG, Xattrs: map[string][]byte{"system.posix_acl_access": nil}}}, "only user., trusted. and security."},
		{"link to nowhere", []Entry{root, {Path: "/a", HardlinkTo: "/b"}}, "/a: hard link to /b"},
		{"link to dir", []Entry{root, dir("/d", 0o755, 0, 0), {Path: "/a", HardlinkTo: "/d"}}, "hard link to directory"},
		{"link cycle", []Entry{root, {Path: "/a", HardlinkTo: "/b"}, {Path: "/b", HardlinkTo: "/a"}}, "cycle"},
		{"empty symlink", []Entry{root, {Path: "/l", Mode: sIFLNK | 0o777}}, "empty target"},
		{"data on dir", []Entry{root, {Path: "/d", Mode: sIFDIR, Data: []byte("x")}}, "has data"},
		{"mtime", []Entry{root, {Path: "/a", Mode: sIFREG, Mtime: -1}}, "mtime"},
	}
	for _, c := range cases {
		err := Write(&bytes.Buffer{}, c.es, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
	for _, o := range []Options{{Compressor: "lz4"}, {BlockSize: 3000}, {Compressor: "gzip", Level: 10}, {Compressor: "zstd", Level: 23}} {
		if err := Write(&bytes.Buffer{}, []Entry{root}, o); err == nil {
			t.Errorf("%+v: accepted", o)
		}
	}
}

// TestOnlyRoot: the smallest image, without fragments or xattrs.
func TestOnlyRoot(t *testing.T) {
	needTool(t, "unsquashfs")
	img := writeImage(t, []Entry{dir("/", 0o700, 5, 6)}, Options{})
	out := string(run(t, "unsquashfs", "-lln", img))
	if !strings.Contains(out, "drwx------ 5/6") {
		t.Errorf("listing:\n%s", out)
	}
}

// TestFixtureCoverage: the fixture exercises uncompressed data and
// fragment blocks, sparse blocks, shared (duplicate) data, extended
// inodes and a directory index.
func TestFixtureCoverage(t *testing.T) {
	tr, err := buildTree(fixture())
	if err != nil {
		t.Fatal(err)
	}
	o, _ := Options{}.normalize()
	c, _ := newCodec("zstd", 0, o.BlockSize)
	d, err := writeData(tr, o, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	var rawData, rawFrag, sparse int
	for _, j := range d.jobs {
		switch {
		case j.size == 0:
			sparse++
		case j.size&blockRawFlag != 0 && j.frag:
			rawFrag++
		case j.size&blockRawFlag != 0:
			rawData++
		}
	}
	shared := map[*fileLayout]int{}
	for _, in := range tr.files {
		shared[in.file]++
	}
	dups := 0
	for _, n := range shared {
		if n > 1 {
			dups++
		}
	}
	t.Logf("%d jobs, %d fragment blocks: %d raw data, %d raw fragment, %d sparse blocks, %d shared layouts", len(d.jobs), len(d.frags), rawData, rawFrag, sparse, dups)
	if rawData == 0 || rawFrag == 0 || sparse == 0 || dups < 2 {
		t.Error("the fixture does not exercise every kind of block")
	}
	comp, _ := c.newCompressor()
	img, err := assemble(tr, d, o, c, comp)
	if err != nil {
		t.Fatal(err)
	}
	_ = img
	huge := tr.root.children[0]
	for _, n := range tr.root.children {
		if n.name == "huge" {
			huge = n
		}
	}
	_, index := listing(nil, huge.children)
	if len(index) < 20 {
		t.Errorf("/huge has %d index entries", len(index))
	}
}

// rawCompressor never compresses, so every metadata block is stored
// uncompressed.
type rawCompressor struct{}

func (rawCompressor) compress([]byte) ([]byte, error) { return nil, nil }

// TestUncompressedMetadata: metadata blocks stored uncompressed (the
// 0x8000 flag) are read by unsquashfs and the kernel.
func TestUncompressedMetadata(t *testing.T) {
	needTool(t, "unsquashfs")
	es := fixture()
	tr, err := buildTree(es)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := Options{}.normalize()
	c, _ := newCodec("zstd", 0, o.BlockSize)
	d, err := writeData(tr, o, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	img, err := assemble(tr, d, o, c, rawCompressor{})
	if err != nil {
		t.Fatal(err)
	}
	p := t.TempDir() + "/raw.sqfs"
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := img.writeTo(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	wants := expectations(es)
	if os.Geteuid() == 0 {
		dst := t.TempDir() + "/root"
		run(t, "unsquashfs", "-q", "-n", "-d", dst, p)
		compareTree(t, dst, wants, false)
		mnt := t.TempDir()
		if out, err := exec.Command("mount", "-o", "loop,ro", "-t", "squashfs", p, mnt).CombinedOutput(); err != nil {
			t.Logf("cannot loop-mount here: %v: %s", err, out)
			return
		}
		defer exec.Command("umount", mnt).Run()
		compareTree(t, mnt, wants, true)
	} else {
		run(t, "unsquashfs", "-lln", p)
	}
}

// Buffer writes as a file does: at the offset, past the end extending
// with zeros, and refuses a seek before the start.
func TestBuffer(t *testing.T) {
	var m Buffer
	m.Write([]byte("abcdef"))
	if _, err := m.Seek(2, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	m.Write([]byte("XY"))
	if off, _ := m.Seek(3, io.SeekEnd); off != 9 {
		t.Fatalf("SeekEnd: %d", off)
	}
	m.Write([]byte("Z"))
	if off, _ := m.Seek(-4, io.SeekCurrent); off != 6 {
		t.Fatalf("SeekCurrent: %d", off)
	}
	m.Write([]byte("12345"))
	if want := "abXYef12345"; string(m.Bytes()) != want {
		t.Errorf("%q, want %q", m.Bytes(), want)
	}
	// Across chunks.
	big := make([]byte, 2*memChunk+10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	m.Seek(3, io.SeekStart)
	m.Write(big)
	if got := m.Bytes(); len(got) != len(big)+3 || !bytes.Equal(got[3:], big) || string(got[:3]) != "abX" {
		t.Errorf("a write across chunks: %d bytes", len(got))
	}
	if _, err := m.Seek(-1, io.SeekStart); err == nil {
		t.Error("a seek before the start was accepted")
	}
	if _, err := m.Seek(0, 7); err == nil {
		t.Error("a bad whence was accepted")
	}
}
