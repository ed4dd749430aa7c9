package compose

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// A layer streamed into a file is NewImageLayer's, byte for byte
// and digest for digest, however the tar reaches it: in one write, in
// small pieces or in pieces of random sizes. Its Uncompressed is the tar.
func TestFileLayerIsNewImageLayer(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	// Incompressible (an initramfs) and compressible (a report) data,
	// past the hash's 1 MiB pieces.
	data := make([]byte, 5<<20+12345)
	rng.Read(data[:3<<20])
	for i := 3 << 20; i < len(data); i++ {
		data[i] = "nodeforge "[i%10]
	}
	want, err := NewImageLayer(data)
	if err != nil {
		t.Fatal(err)
	}
	wantDigest, _ := want.Digest()
	wantDiffID, _ := want.DiffID()
	wantSize, _ := want.Size()
	rc, _ := want.Compressed()
	wantBlob, _ := io.ReadAll(rc)
	pieces := map[string]func(io.Writer) error{
		"whole": func(w io.Writer) error { _, err := w.Write(data); return err },
		"4 KiB": func(w io.Writer) error {
			for off := 0; off < len(data); off += 4096 {
				if _, err := w.Write(data[off:min(off+4096, len(data))]); err != nil {
					return err
				}
			}
			return nil
		},
		"random": func(w io.Writer) error {
			for off := 0; off < len(data); {
				n := min(1+rng.Intn(3<<20), len(data)-off)
				if _, err := w.Write(data[off : off+n]); err != nil {
					return err
				}
				off += n
			}
			return nil
		},
	}
	for name, write := range pieces {
		p := filepath.Join(t.TempDir(), "layer")
		l, err := NewFileLayer(p, write)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := l.Digest()
		id, _ := l.DiffID()
		size, _ := l.Size()
		blob, err := os.ReadFile(l.HashedFile())
		if err != nil {
			t.Fatal(err)
		}
		if d != wantDigest || id != wantDiffID || size != wantSize || !bytes.Equal(blob, wantBlob) {
			t.Errorf("%s: digest %s diff ID %s size %d, want %s %s %d (same bytes: %v)", name, d, id, size, wantDigest, wantDiffID, wantSize, bytes.Equal(blob, wantBlob))
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: the file's mode: %v %v", name, fi.Mode(), err)
		}
		ur, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tar, err := io.ReadAll(ur)
		ur.Close()
		if err != nil || !bytes.Equal(tar, data) {
			t.Errorf("%s: Uncompressed is not the tar (%v)", name, err)
		}
	}
}

// A writer that fails leaves no file and says why.
func TestFileLayerError(t *testing.T) {
	p := filepath.Join(t.TempDir(), "layer")
	boom := errors.New("boom")
	if _, err := NewFileLayer(p, func(w io.Writer) error { w.Write([]byte("half a tar")); return boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v, want %v", err, boom)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("a failed layer left %s (%v)", p, err)
	}
	// An existing file is not overwritten.
	os.WriteFile(p, []byte("x"), 0o644)
	if _, err := NewFileLayer(p, func(io.Writer) error { return nil }); err == nil {
		t.Error("a layer over an existing file")
	}
}

// failAfter takes n bytes, then fails.
type failAfter struct {
	n   int
	got bytes.Buffer
}

func (f *failAfter) Write(p []byte) (int, error) {
	if f.got.Len()+len(p) > f.n {
		return 0, errors.New("disk full")
	}
	return f.got.Write(p)
}

// An asyncWriter passes every byte on in order, and its writer's first
// error is Close's.
func TestAsyncWriter(t *testing.T) {
	data := make([]byte, 3<<20+7)
	rand.New(rand.NewSource(2)).Read(data)
	var got bytes.Buffer
	a := newAsyncWriter(&got)
	a.Write(data[:5])
	a.Write(data[5:])
	if err := a.Close(); err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Errorf("Close = %v; same bytes: %v", err, bytes.Equal(got.Bytes(), data))
	}
	f := &failAfter{n: 1 << 20}
	a = newAsyncWriter(f)
	if n, err := a.Write(data); n != len(data) || err != nil {
		t.Errorf("Write = %d, %v", n, err)
	}
	if err := a.Close(); err == nil || err.Error() != "disk full" {
		t.Errorf("Close = %v, want the writer's error", err)
	}
}
