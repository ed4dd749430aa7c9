package factory

import (
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nodeforge/builder/internal/blobcache"
)

// TestLayerCacheFiles: an image is written once (concurrent asks wait
// for the one write), read back from its file, written again when the
// file holds other bytes (a whole entry of the store: only the SHA-256
// kept in memory tells) or was removed, and a failed write keeps nothing.
func TestLayerCacheFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "layers")
	d, err := blobcache.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := newLayerCache(d)
	var mu sync.Mutex
	writes := 0
	write := func() ([]byte, error) {
		mu.Lock()
		writes++
		mu.Unlock()
		return []byte("squashfs image"), nil
	}
	k1, k2 := sha256.Sum256([]byte("k1")), sha256.Sum256([]byte("k2"))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b, err := c.Layer(k1, write); err != nil || string(b) != "squashfs image" {
				t.Errorf("Layer: %q, %v", b, err)
			}
		}()
	}
	wg.Wait()
	if b, err := c.Layer(k1, write); err != nil || string(b) != "squashfs image" || writes != 1 {
		t.Fatalf("kept image: %q, %v, %d writes (want 1)", b, err, writes)
	}
	d.Put(k1, []byte("squashfs imagf"))
	if b, err := c.Layer(k1, write); err != nil || string(b) != "squashfs image" || writes != 2 {
		t.Errorf("changed file: %q, %v, %d writes (want it written again)", b, err, writes)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Layer(k1, write); err != nil || string(b) != "squashfs image" || writes != 3 {
		t.Errorf("removed file: %q, %v, %d writes (want it written again)", b, err, writes)
	}
	boom := errors.New("boom")
	if _, err := c.Layer(k2, func() ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("a failed write: %v", err)
	}
	if d.Has(k2) {
		t.Error("a failed write left an entry")
	}
}
