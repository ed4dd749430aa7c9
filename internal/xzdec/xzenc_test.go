package xzdec

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// encodeInput is n bytes of text with incompressible stretches, as a
// disk image holds compressed files beside text and zeros.
func encodeInput(n int) []byte {
	data := textData(n, 7)
	rng := rand.New(rand.NewPCG(3, 4))
	for off := n / 3; off < n; off += n / 3 {
		end := min(off+n/10, n)
		for i := off; i < end; i++ {
			data[i] = byte(rng.Uint32())
		}
	}
	return data
}

// TestEncode: liblzma's threaded encoder writes one .xz Stream that the
// real xz tests and decodes, of the Blocks asked for; the bytes do not
// depend on the threads, and are those xz 5.4.1 itself writes with the
// same block size (when the host's xz is that version); this package
// decodes them too. Without cgo, Encode says it has no encoder.
func TestEncode(t *testing.T) {
	// Six Blocks of 64 KiB (the last one short): as many Blocks as six
	// threads take, for a tenth of the bytes 512 KiB Blocks took.
	data := encodeInput(5<<16 + 12345)
	o := EncodeOptions{Preset: 6, BlockSize: 64 << 10, Threads: 1}
	one, err := Encode(data, o)
	if !CanEncode {
		if !errors.Is(err, ErrNoEncoder) {
			t.Fatalf("without cgo: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, threads := range []int{2, 6} {
		o.Threads = threads
		other, err := Encode(data, o)
		if err != nil || !bytes.Equal(one, other) {
			t.Errorf("%d threads: %v, %d bytes against 1 thread's %d (equal: %t)", threads, err, len(other), len(one), bytes.Equal(one, other))
		}
	}
	xzTool(t, one, "-t")
	if back := xzTool(t, one, "-dc"); !bytes.Equal(back, data) {
		t.Errorf("xz -d gives %d bytes, not the input's %d", len(back), len(data))
	}
	list := xzList(t, one)
	if !strings.Contains(list, "\nblocks\t6\t") && !strings.Contains(list, "totals\t1\t6\t") {
		t.Errorf("xz -lv: not one stream of 6 blocks:\n%s", list)
	}
	if !strings.Contains(list, "CRC64") {
		t.Errorf("xz -lv: no CRC64:\n%s", list)
	}
	r, err := NewReader(bytes.NewReader(one), XZ)
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(back, data) {
		t.Errorf("NewReader: %v, %d bytes", err, len(back))
	}
	if v, err := runXZ(t, nil, "--version"); err == nil && strings.Contains(string(v), "liblzma "+LiblzmaVersion+"\n") {
		if ref := xzTool(t, data, "-c", "-6", "-T2", "--block-size=64KiB"); !bytes.Equal(ref, one) {
			t.Errorf("xz %s -T2 --block-size=64KiB writes %d bytes, Encode %d: not the same", LiblzmaVersion, len(ref), len(one))
		}
	} else {
		t.Logf("the host's xz is not %s: its bytes are not compared (%s)", LiblzmaVersion, strings.TrimSpace(string(v)))
	}
}

// TestEncodeEdges: empty input is a valid empty Stream; the default block
// size is three times the preset's dictionary (one Block for 1 MiB at
// -6); a preset past 9 is refused.
func TestEncodeEdges(t *testing.T) {
	if !CanEncode {
		t.Skip("no encoder without cgo")
	}
	for _, data := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte{0}, 1<<20)} {
		c, err := Encode(data, EncodeOptions{Preset: 6, Threads: 4})
		if err != nil {
			t.Fatal(err)
		}
		if back := xzTool(t, c, "-dc"); !bytes.Equal(back, data) {
			t.Errorf("%d bytes: xz -d gives %d", len(data), len(back))
		}
		if len(data) > 0 && !strings.Contains(xzList(t, c), "totals\t1\t1\t") {
			t.Errorf("%d bytes: not one Block:\n%s", len(data), xzList(t, c))
		}
	}
	if _, err := Encode([]byte("x"), EncodeOptions{Preset: 10}); err == nil || !strings.Contains(err.Error(), "preset 10") {
		t.Errorf("preset 10: %v", err)
	}
}

// xzList is xz --robot -lv of c (xz lists files only).
func xzList(t *testing.T, c []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.xz")
	if err := os.WriteFile(p, c, 0o644); err != nil {
		t.Fatal(err)
	}
	return string(xzTool(t, nil, "--robot", "-lv", p))
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// failReader fails every read past its first n bytes.
type failReader struct {
	r io.ReaderAt
	n int64
}

func (f failReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.n {
		return 0, errors.New("read error")
	}
	return f.r.ReadAt(p, off)
}

// TestEncodeTo: the Stream written as it comes is Encode's, its Blocks
// waiting in a spill directory or in memory, on one thread or several;
// the spill directory is left empty; empty input is Encode's empty
// Stream; the writer's error, a reader's error and input shorter than
// its size are EncodeTo's, and leave no goroutine or spill file behind;
// at Block boundaries and on incompressible data the bytes are xz
// 5.4.1's (when the host's xz is that version).
// Without cgo EncodeTo says it has no encoder.
func TestEncodeTo(t *testing.T) {
	data := encodeInput(5<<16 + 12345)
	o := EncodeOptions{Preset: 6, BlockSize: 64 << 10, Threads: 2}
	if !CanEncode {
		if err := EncodeTo(io.Discard, bytes.NewReader(data), int64(len(data)), o); !errors.Is(err, ErrNoEncoder) {
			t.Fatalf("without cgo: %v", err)
		}
		return
	}
	want, err := Encode(data, o)
	if err != nil {
		t.Fatal(err)
	}
	spill := t.TempDir()
	for _, c := range []struct {
		threads int
		dir     string
	}{{1, spill}, {2, spill}, {3, ""}, {8, spill}} {
		var got bytes.Buffer
		o.Threads, o.SpillDir = c.threads, c.dir
		if err := EncodeTo(&got, bytes.NewReader(data), int64(len(data)), o); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%d threads, spill %q: %d bytes, not Encode's %d", c.threads, c.dir, got.Len(), len(want))
		}
	}
	o.Threads, o.SpillDir = 2, spill
	var empty bytes.Buffer
	if err := EncodeTo(&empty, bytes.NewReader(nil), 0, o); err != nil {
		t.Fatal(err)
	}
	if want, _ := Encode(nil, o); !bytes.Equal(empty.Bytes(), want) {
		t.Errorf("empty: %x, want %x", empty.Bytes(), want)
	}
	for _, c := range []struct {
		name string
		w    io.Writer
		r    io.ReaderAt
		size int64
		want string
	}{
		{"a failing writer", failWriter{}, bytes.NewReader(data), int64(len(data)), "disk full"},
		{"a failing reader", io.Discard, failReader{bytes.NewReader(data), 3 << 16}, int64(len(data)), "read error"},
		{"short input", io.Discard, bytes.NewReader(data), int64(len(data)) + 1, "ended before its"},
	} {
		if err := EncodeTo(c.w, c.r, c.size, o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// Block boundaries: exactly two Blocks, one byte past them, one
	// incompressible Block; xz 5.4.1 writes the same bytes.
	if v, err := runXZ(t, nil, "--version"); err == nil && strings.Contains(string(v), "liblzma "+LiblzmaVersion+"\n") {
		random := make([]byte, 64<<10)
		rng := rand.New(rand.NewPCG(7, 8))
		for i := range random {
			random[i] = byte(rng.Uint32())
		}
		for _, in := range [][]byte{data[:2*64<<10], data[:2*64<<10+1], random} {
			var got bytes.Buffer
			if err := EncodeTo(&got, bytes.NewReader(in), int64(len(in)), o); err != nil {
				t.Fatal(err)
			}
			if ref := xzTool(t, in, "-c", "-6", "-T2", "--block-size=64KiB"); !bytes.Equal(ref, got.Bytes()) {
				t.Errorf("%d bytes: xz writes %d bytes, EncodeTo %d: not the same", len(in), len(ref), got.Len())
			}
		}
	}
	if left, _ := os.ReadDir(spill); len(left) > 0 {
		t.Errorf("spill directory: %d files left", len(left))
	}
	if err := EncodeTo(io.Discard, bytes.NewReader(nil), 0, EncodeOptions{Preset: 10}); err == nil {
		t.Error("preset 10 accepted")
	}
}
