package blobcache

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func key(i int) [32]byte { return sha256.Sum256([]byte(fmt.Sprint(i))) }

func TestPacks(t *testing.T) {
	dir := t.TempDir()
	p, err := OpenPacks(dir)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 200; i += 4 {
				p.Put(key(i), []byte(fmt.Sprintf("blob %d", i)))
			}
		}()
	}
	wg.Wait()
	if b, ok := p.Get(key(7)); !ok || string(b) != "blob 7" {
		t.Fatalf("pending get: %q %v", b, ok)
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	p.Put(key(500), []byte("second pack"))
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	p.Close()

	p, err = OpenPacks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if blobs, packs := p.Stats(); blobs != 201 || packs != 2 {
		t.Fatalf("reopened: %d blobs in %d packs", blobs, packs)
	}
	for _, i := range []int{0, 99, 199} {
		if b, ok := p.Get(key(i)); !ok || string(b) != fmt.Sprintf("blob %d", i) {
			t.Errorf("get %d: %q %v", i, b, ok)
		}
	}
	if !p.Has(key(500)) || p.Has(key(1000)) {
		t.Error("Has")
	}
	p.Close()

	// The same blobs make the same pack: one name, whatever the Put order.
	other := t.TempDir()
	q, _ := OpenPacks(other)
	for i := 199; i >= 0; i-- {
		q.Put(key(i), []byte(fmt.Sprintf("blob %d", i)))
	}
	q.Flush()
	q.Close()
	a, _ := filepath.Glob(filepath.Join(dir, "*.pack"))
	b, _ := filepath.Glob(filepath.Join(other, "*.pack"))
	if len(b) != 1 || (filepath.Base(a[0]) != filepath.Base(b[0]) && filepath.Base(a[1]) != filepath.Base(b[0])) {
		t.Errorf("packs of the same blobs: %v and %v", a, b)
	}

	// A flipped blob byte is a miss; a damaged index hides its pack.
	data, _ := os.ReadFile(b[0])
	data[0] ^= 1
	os.WriteFile(b[0], data, 0o644)
	q, _ = OpenPacks(other)
	misses := 0
	for i := range 200 {
		if _, ok := q.Get(key(i)); !ok {
			misses++
		}
	}
	q.Close()
	if misses != 1 {
		t.Errorf("%d misses after one flipped byte, want 1", misses)
	}
	data[len(data)-30] ^= 1
	os.WriteFile(b[0], data, 0o644)
	q, _ = OpenPacks(other)
	if blobs, packs := q.Stats(); blobs != 0 || packs != 0 {
		t.Errorf("damaged index: %d blobs in %d packs", blobs, packs)
	}
	q.Close()
	os.WriteFile(b[0], []byte("short"), 0o644)
	if q, err = OpenPacks(other); err != nil {
		t.Errorf("a short pack is not an error: %v", err)
	}
	q.Close()
}

// TestPacksFlushWhenFull: pending blobs past the bound are written as a
// pack by Put itself, and stay readable.
func TestPacksFlushWhenFull(t *testing.T) {
	defer func(n int) { flushAt = n }(flushAt)
	flushAt = 100
	dir := t.TempDir()
	p, err := OpenPacks(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 30 {
		p.Put(key(i), []byte(fmt.Sprintf("blob number %d", i))) // 14-15 bytes
	}
	if _, packs := p.Stats(); packs != 3 {
		t.Fatalf("%d packs written by Put, want 3 (past 100 bytes each time)", packs)
	}
	if p.bytes == 0 || len(p.pending) == 0 {
		t.Fatal("the blobs after the last pack are not pending")
	}
	for i := range 30 {
		if b, ok := p.Get(key(i)); !ok || string(b) != fmt.Sprintf("blob number %d", i) {
			t.Fatalf("get %d: %q %v", i, b, ok)
		}
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	if blobs, packs := p.Stats(); blobs != 30 || packs != 4 {
		t.Fatalf("%d blobs in %d packs", blobs, packs)
	}
}
