package factory

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nodeforge/builder/internal/digest"
)

// A built file has its bytes' size and digest; its served artifact reads
// them whole, by range, and from many responses at once after its
// directory is gone; a failed write leaves nothing.
func TestBuiltFile(t *testing.T) {
	data := make([]byte, 3<<20+5)
	rand.New(rand.NewSource(1)).Read(data)
	dir := t.TempDir()
	bf, err := writeBuiltFile(dir, func(w io.Writer) error {
		for off := 0; off < len(data); off += 4096 {
			if _, err := w.Write(data[off:min(off+4096, len(data))]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if bf.desc.Digest != digest.OCI(data) || bf.desc.Size != int64(len(data)) {
		t.Fatalf("descriptor %v, want %s and %d bytes", bf.desc, digest.OCI(data), len(data))
	}
	if fi, err := os.Stat(bf.path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the file's mode: %v %v", fi.Mode(), err)
	}
	a, err := bf.served()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			rc, err := a.Open(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			defer rc.Close()
			if i%2 == 1 { // a range, as http.ServeContent asks
				if _, err := rc.(io.Seeker).Seek(int64(i)<<10, io.SeekStart); err != nil {
					t.Error(err)
					return
				}
			}
			got, err := io.ReadAll(rc)
			if want := data[(i%2)*(i<<10):]; err != nil || !bytes.Equal(got, want) {
				t.Errorf("response %d: %d bytes (%v), want %d", i, len(got), err, len(want))
			}
		})
	}
	wg.Wait()
	if a.Size() != int64(len(data)) || a.Digest() != digest.OCI(data) {
		t.Errorf("served: %d bytes, %s", a.Size(), a.Digest())
	}

	dir = t.TempDir()
	boom := errors.New("boom")
	if _, err := writeBuiltFile(dir, func(w io.Writer) error { w.Write(data); return boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v, want %v", err, boom)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
		t.Errorf("a failed write left %v", left)
	}
}
