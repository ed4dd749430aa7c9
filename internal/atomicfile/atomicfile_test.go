package atomicfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Sweeping while others write never removes a live writer's file: every
// write lands, and what a dead writer left goes.
func TestSweepSparesLiveWriters(t *testing.T) {
	dir := t.TempDir()
	dead := filepath.Join(dir, TempPrefix+"killed-123")
	os.WriteFile(dead, []byte("partial"), 0o600)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				Sweep(dir)
			}
		}
	}()
	errs := make(chan error, 200)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				errs <- Write(filepath.Join(dir, fmt.Sprintf("f%d-%d", w, i)), []byte("content"), 0o644)
			}
		}()
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := Sweep(dir); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 200 {
		t.Errorf("%d files, want the 200 written and no leftover", len(ents))
	}
	for _, e := range ents {
		if fi, _ := e.Info(); fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v", e.Name(), fi.Mode().Perm())
		}
	}
}

// WriteFileAhead writes as os.WriteFile does, replacing what was there.
func TestWriteFileAhead(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	for _, data := range [][]byte{bytes.Repeat([]byte("x"), 3<<20), []byte("short")} {
		if err := WriteFileAhead(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes, %v; want %d", len(got), err, len(data))
		}
	}
	if err := WriteFileAhead(filepath.Join(p, "under-a-file"), nil, 0o644); err == nil {
		t.Error("a path under a file was written")
	}
}
