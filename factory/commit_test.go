package factory

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/oci"
)

// gatedStore holds every tagged write until open is closed.
type gatedStore struct {
	oci.Store
	open chan struct{}
}

func (g *gatedStore) WriteImage(ctx context.Context, repo, tag string, img v1.Image) error {
	if tag != "" {
		<-g.open
	}
	return g.Store.WriteImage(ctx, repo, tag, img)
}

// TestServedWhileCached: an artifact just built is served while its cache
// entry is written: all of it but its last byte at once, the last byte
// once the entry is there; a request meanwhile gets the same file, not a
// second build; a stop waits for the entry.
func TestServedWhileCached(t *testing.T) {
	ctx := context.Background()
	s, _ := trustService(t, 1<<16)
	gate := &gatedStore{Store: s.o.Cache, open: make(chan struct{})}
	s.o.Cache = gate
	s.cache.st = gate
	sch, id := addSchematic(t, s, "{}")
	rel := s.Release("1.0")
	a, _ := ParseArtifact("metal-amd64.iso")
	art, err := s.Compose(ctx, rel, sch, a, "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	want := artifactBytes(a.FileName("x86_64"), id, 1<<16)
	rc, err := art.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, len(want))
	n, _ := io.ReadAtLeast(rc, head, len(want)-1)
	if n != len(want)-1 || !bytes.Equal(head[:n], want[:n]) {
		t.Fatalf("before the entry is written: %d bytes, want all but the last (%d)", n, len(want)-1)
	}
	last := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(rc)
		last <- b
	}()
	select {
	case b := <-last:
		t.Fatalf("the last byte (%q) left before the cache entry was written", b)
	case <-time.After(100 * time.Millisecond):
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if err := s.WaitBuilds(wctx); err == nil {
		t.Error("WaitBuilds returned while the entry was still being written")
	}
	cancel()
	again, err := s.Compose(ctx, rel, sch, a, "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	if again != art || s.Stats().Builds != 1 {
		t.Errorf("a request while the entry is written: %+v, the same artifact %v", s.Stats(), again == art)
	}
	close(gate.open)
	if b := <-last; !bytes.Equal(b, want[len(want)-1:]) {
		t.Errorf("last byte %q", b)
	}
	if err := s.WaitBuilds(ctx); err != nil {
		t.Fatal(err)
	}
	key := cacheKey(rel, id, a.FileName("x86_64"), "test")
	if _, err := s.o.Cache.Head(ctx, RepoArtifacts, key); err != nil {
		t.Errorf("no cache entry once the artifact was read: %v", err)
	}
	cached, err := s.Compose(ctx, rel, sch, a, "x86_64")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := cached.Bytes(ctx); err != nil || !bytes.Equal(b, want) || s.Stats().Builds != 1 {
		t.Errorf("from the cache: %d bytes, %v, %+v", len(b), err, s.Stats())
	}
}

// failingStore refuses every tagged write.
type failingStore struct{ oci.Store }

func (failingStore) WriteImage(context.Context, string, string, v1.Image) error {
	return errors.New("disk full")
}

// TestWarmWaitsForTheEntry: warm reports an artifact built once its cache
// entry is written (a request's is written while it is served, and the
// warm command exits once it reports), stopped or not, and fails when
// writing it fails.
func TestWarmWaitsForTheEntry(t *testing.T) {
	ctx := context.Background()
	s, _ := trustService(t, 1<<16)
	gate := &gatedStore{Store: s.o.Cache, open: make(chan struct{})}
	s.o.Cache, s.cache.st = gate, gate
	openGate := sync.OnceFunc(func() { close(gate.open) })
	defer openGate() // on a failure too: the test's end waits for the entry
	_, id := addSchematic(t, s, "{}")
	type result struct {
		rep *WarmReport
		err error
	}
	warmed := make(chan result, 1)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		rep, err := s.Warm(wctx, WarmOptions{Version: "1.0", Schematics: []string{id}, Artifacts: []string{"iso"}})
		warmed <- result{rep, err}
	}()
	for s.Stats().Builds == 0 { // built: its entry is being written
		select {
		case r := <-warmed:
			t.Fatalf("warm returned before the entry was written: %+v %v", r.rep, r.err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	stop() // warm stopped: what is built is still cached
	select {
	case r := <-warmed:
		t.Fatalf("warm returned before the entry was written: %+v %v", r.rep, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	openGate()
	r := <-warmed
	if r.err != nil || r.rep.Built != 1 {
		t.Fatalf("warm: %+v %v", r.rep, r.err)
	}
	a, _ := ParseArtifact("metal-amd64.iso")
	if _, err := gate.Head(ctx, RepoArtifacts, cacheKey(s.Release("1.0"), id, a.FileName("x86_64"), "test")); err != nil {
		t.Errorf("no cache entry once warm reported it built: %v", err)
	}

	s, _ = trustService(t, 1<<16)
	failing := failingStore{s.o.Cache}
	_, id = addSchematic(t, s, "{}") // before the store fails: schematics are tagged too
	s.o.Cache, s.cache.st = failing, failing
	rep, err := s.Warm(ctx, WarmOptions{Version: "1.0", Schematics: []string{id}, Artifacts: []string{"iso"}})
	if err == nil || !strings.Contains(err.Error(), "warming metal-x86_64.iso of schematic "+id) || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("warm whose entry cannot be written: %+v %v", rep, err)
	}
}
