package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodeforge/builder/pkgbase/repo"
)

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

// flakyServer serves /pkg.rpm; the first request is cut after half the
// bytes, later ones honour Range.
func flakyServer(t *testing.T, data []byte) (*httptest.Server, *int32, *int32) {
	var calls, ranged int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := atomic.AddInt32(&calls, 1)
		if r.URL.Path != "/pkg.rpm" {
			http.NotFound(w, r)
			return
		}
		if n == 1 {
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			w.Write(data[:len(data)/2])
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close()
			return
		}
		if r.Header.Get("Range") != "" {
			atomic.AddInt32(&ranged, 1)
		}
		http.ServeContent(w, r, "pkg.rpm", time.Unix(0, 0), strings.NewReader(string(data)))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls, &ranged
}

func newCache(t *testing.T) *Cache {
	return &Cache{Dir: t.TempDir(), Backoff: time.Millisecond}
}

func src(t *testing.T, url string) repo.Source {
	s, err := repo.NewSource(url, repo.SourceOptions{Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFetchResumesAfterInterruption(t *testing.T) {
	data := payload(1 << 20)
	srv, _, ranged := flakyServer(t, data)
	c := newCache(t)
	paths, err := c.Fetch(context.Background(), []Want{{Name: "pkg", Source: src(t, srv.URL), Location: "pkg.rpm", Size: int64(len(data)), Algo: "sha256", Hash: sum(data)}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(paths[0])
	if sum(got) != sum(data) {
		t.Fatal("cached content differs")
	}
	if atomic.LoadInt32(ranged) == 0 {
		t.Error("the second attempt did not resume with a Range request")
	}
	// A second fetch is served from the cache.
	if _, err := c.Fetch(context.Background(), []Want{{Name: "pkg", Source: src(t, "http://127.0.0.1:1"), Location: "pkg.rpm", Size: int64(len(data)), Algo: "sha256", Hash: sum(data)}}); err != nil {
		t.Errorf("cached fetch: %v", err)
	}
}

func TestFetchRefusesMismatch(t *testing.T) {
	data := payload(4096)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pkg.rpm"), data, 0o644)
	c := newCache(t)
	bad := sum(append([]byte{1}, data...))
	_, err := c.Fetch(context.Background(), []Want{{Name: "pkg-1.0", Source: src(t, dir), Location: "pkg.rpm", Size: int64(len(data)), Algo: "sha256", Hash: bad}})
	if err == nil || !strings.Contains(err.Error(), "differs from the index") || !strings.Contains(err.Error(), "pkg-1.0") {
		t.Fatalf("hash mismatch: %v", err)
	}
	_, err = c.Fetch(context.Background(), []Want{{Name: "pkg-1.0", Source: src(t, dir), Location: "pkg.rpm", Size: int64(len(data)) - 1, Algo: "sha256", Hash: sum(data)}})
	if err == nil || !strings.Contains(err.Error(), "size differs") {
		t.Fatalf("size mismatch: %v", err)
	}
	// Nothing entered the cache.
	ents, _ := os.ReadDir(filepath.Join(c.Dir, "sha256"))
	if len(ents) != 0 {
		t.Errorf("cache holds %d files after refused downloads", len(ents))
	}
	part, _ := os.ReadDir(filepath.Join(c.Dir, "partial"))
	if len(part) != 0 {
		t.Errorf("partial files left: %d", len(part))
	}
}

func TestFetchNotFoundNoRetry(t *testing.T) {
	var calls int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		atomic.AddInt32(&calls, 1)
		http.NotFound(w, r)
	}))
	defer srv.Close()
	c := newCache(t)
	_, err := c.Fetch(context.Background(), []Want{{Name: "gone", Source: src(t, srv.URL), Location: "gone.rpm", Size: 10, Algo: "sha256", Hash: sum(nil)}})
	if err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("want not-found error, got %v", err)
	}
	if calls != 1 {
		t.Errorf("404 was retried: %d calls", calls)
	}
}

func TestFetchConcurrent(t *testing.T) {
	dir := t.TempDir()
	var wants []Want
	for i := 0; i < 20; i++ {
		d := payload(1000 + i)
		name := fmt.Sprintf("p%d.rpm", i)
		os.WriteFile(filepath.Join(dir, name), d, 0o644)
		wants = append(wants, Want{Name: name, Source: src(t, dir), Location: name, Size: int64(len(d)), Algo: "sha256", Hash: sum(d)})
	}
	c := newCache(t)
	c.Workers = 4
	var events int32
	c.Progress = func(Event) { atomic.AddInt32(&events, 1) }
	paths, err := c.Fetch(context.Background(), wants)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range paths {
		if p != c.Path("sha256", wants[i].Hash) {
			t.Errorf("path %d: %s", i, p)
		}
	}
	if events == 0 {
		t.Error("no progress events")
	}
}

// A cached file whose bytes changed after it entered is never used: it is
// removed, named, and fetched again.
func TestDamagedEntryIsFetchedAgain(t *testing.T) {
	data := payload(64 << 10)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pkg.rpm"), data, 0o644)
	var events []Event
	c := &Cache{Dir: t.TempDir(), Progress: func(ev Event) { events = append(events, ev) }}
	w := Want{Name: "pkg-1-1", Source: src(t, dir), Location: "pkg.rpm", Size: int64(len(data)), Algo: "sha256", Hash: sum(data)}
	paths, err := c.Fetch(context.Background(), []Want{w})
	if err != nil {
		t.Fatal(err)
	}
	// Flip one byte, keeping the size.
	b, _ := os.ReadFile(paths[0])
	b[100] ^= 1
	os.WriteFile(paths[0], b, 0o644)
	events = nil
	if paths, err = c.Fetch(context.Background(), []Want{w}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(paths[0]); sum(got) != sum(data) {
		t.Fatal("the damaged entry was used")
	}
	var damaged, done bool
	for _, ev := range events {
		damaged = damaged || ev.Kind == "damaged" && ev.Name == "pkg-1-1" && strings.Contains(ev.Err.Error(), paths[0])
		done = done || ev.Kind == "done"
	}
	if !damaged || !done {
		t.Errorf("events %+v: want the damaged entry named, then fetched again", events)
	}
}

// Two caches on one directory (two processes) fetching the same files at
// once: both succeed, each file is downloaded once at a time.
func TestConcurrentFetchersShareOneCache(t *testing.T) {
	var files [][]byte
	var wants []Want
	dir := t.TempDir()
	for i := range 8 {
		data := payload(256<<10 + i)
		files = append(files, data)
		name := fmt.Sprintf("p%d.rpm", i)
		os.WriteFile(filepath.Join(dir, name), data, 0o644)
		wants = append(wants, Want{Name: name, Source: src(t, dir), Location: name, Size: int64(len(data)), Algo: "sha256", Hash: sum(data)})
	}
	shared := t.TempDir()
	for round := range 5 {
		errs := make(chan error, 2)
		for range 2 {
			go func() {
				c := &Cache{Dir: shared, Workers: 4}
				_, err := c.Fetch(context.Background(), wants)
				errs <- err
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		os.RemoveAll(filepath.Join(shared, "sha256"))
	}
}
