package factory

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/release"
)

// TestCatalogSpellings: a version tagged 1.0 and v1.0 (in one store, or
// two) is one release: listed once, found by either spelling, and the
// other tag is not opened again (a retry finds nothing left to serve).
func TestCatalogSpellings(t *testing.T) {
	ctx := context.Background()
	st, err := oci.CreateLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"1.0", "v1.0"} {
		// Not a release: opening it fails, which the test would see.
		if err := st.WriteImage(ctx, release.RepoLock, tag, empty.Image); err != nil {
			t.Fatal(err)
		}
	}
	cache, err := oci.CreateLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := newServer(ServerOptions{Cache: cache, Releases: []ReleaseStore{{Store: st}, {Store: st}}})
	if err != nil {
		t.Fatal(err)
	}
	rel := &Release{Version: "v1.0"}
	s.serve(rel, &Release{Version: "1.0"})
	if c := s.served(); len(c.versions) != 1 || len(s.Listed()) != 1 {
		t.Fatalf("serve of 1.0 and v1.0: %v", c.versions)
	}
	s.serve(rel)
	c := s.served()
	c.failures = []failure{{store: 0, cause: errors.New("unreachable")}, {store: 1, cause: errors.New("unreachable")}}
	next := s.load(ctx, c)
	if !slices.Equal(next.versions, []string{"1.0"}) || len(next.failures) != 0 {
		t.Errorf("load: versions %v, failures %v", next.versions, next.failures)
	}
	for _, v := range []string{"1.0", "v1.0"} {
		if next.find(v) != rel {
			t.Errorf("find(%s): %v", v, next.find(v))
		}
	}
	if got := next.talosVersions(); !slices.Equal(got, []string{"v1.0"}) {
		t.Errorf("talosVersions: %v", got)
	}
}

// TestReadyNeedsTools: without xorriso on PATH the factory is not ready,
// /readyz naming the tool, its package and the media that need it; with
// it (any executable of that name), ready.
func TestReadyNeedsTools(t *testing.T) {
	f := newAccessFactory(t, ServerOptions{})
	t.Setenv("PATH", t.TempDir())
	resp, body := f.do(t, "GET", "/readyz", "")
	if resp.StatusCode != 503 || body != "not ready: a tool is missing (serving v1.0)\ntool xorriso (Debian's xorriso), needed for .iso media: not on PATH\n" {
		t.Errorf("without xorriso: %d %q", resp.StatusCode, body)
	}
	// A request that needs it is told so (503), not a 500.
	f.buildFn = func(context.Context, *Release, *schematic.Schematic, Artifact, string) ([]byte, error) {
		return nil, fmt.Errorf("the ISO needs xorriso: %w", &exec.Error{Name: "xorriso", Err: exec.ErrNotFound})
	}
	if resp, body := f.do(t, "GET", "/image/"+f.id+"/1.0/metal-amd64.iso", ""); resp.StatusCode != 503 || !strings.Contains(body, "metal-amd64.iso: a tool it needs is not installed") {
		t.Errorf("an ISO without xorriso: %d %q", resp.StatusCode, body)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "xorriso"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	if resp, body := f.do(t, "GET", "/readyz", ""); resp.StatusCode != 200 || body != "ready: v1.0\n" {
		t.Errorf("with xorriso: %d %q", resp.StatusCode, body)
	}
}
