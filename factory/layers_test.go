package factory

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestLayerCacheFiles: an image is written once (concurrent asks wait
// for the one write), read back from its file, written again when the
// file was changed or removed, and a failed write keeps nothing.
func TestLayerCacheFiles(t *testing.T) {
	dir := t.TempDir()
	c := newLayerCache(filepath.Join(dir, "layers"))
	var mu sync.Mutex
	writes := 0
	write := func(w io.Writer) error {
		mu.Lock()
		writes++
		mu.Unlock()
		_, err := w.Write([]byte("squashfs image"))
		return err
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b, err := c.Layer("k1", write); err != nil || string(b) != "squashfs image" {
				t.Errorf("Layer: %q, %v", b, err)
			}
		}()
	}
	wg.Wait()
	if b, err := c.Layer("k1", write); err != nil || string(b) != "squashfs image" || writes != 1 {
		t.Fatalf("kept image: %q, %v, %d writes (want 1)", b, err, writes)
	}
	p := filepath.Join(dir, "layers", "k1")
	if err := os.WriteFile(p, []byte("squashfs imagf"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Layer("k1", write); err != nil || string(b) != "squashfs image" || writes != 2 {
		t.Errorf("changed file: %q, %v, %d writes (want it written again)", b, err, writes)
	}
	os.Remove(p)
	if b, err := c.Layer("k1", write); err != nil || string(b) != "squashfs image" || writes != 3 {
		t.Errorf("removed file: %q, %v, %d writes (want it written again)", b, err, writes)
	}
	boom := errors.New("boom")
	if _, err := c.Layer("k2", func(io.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("a failed write: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "layers")); len(ents) != 1 {
		t.Errorf("after a failed write the directory holds %d files, want k1 alone", len(ents))
	}
}
