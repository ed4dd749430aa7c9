package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/factory"
)

// TestReadyNeedsTools: without xorriso on PATH the factory is not ready,
// /readyz naming the tool, its package and the media that need it; with
// it (any executable of that name), ready.
func TestReadyNeedsTools(t *testing.T) {
	f := newAccessFactory(t, Options{})
	t.Setenv("PATH", t.TempDir())
	resp, body := f.do(t, "GET", "/readyz", "")
	if resp.StatusCode != 503 || body != "not ready: a tool is missing (serving v1.0)\ntool xorriso (Debian's xorriso), needed for .iso media: not on PATH\n" {
		t.Errorf("without xorriso: %d %q", resp.StatusCode, body)
	}
	// A request that needs it is told so (503), not a 500.
	f.svc.BuildWith(func(context.Context, *factory.VerifiedRelease, *schematic.Schematic, factory.Artifact, string) ([]byte, error) {
		return nil, fmt.Errorf("the ISO needs xorriso: %w", &exec.Error{Name: "xorriso", Err: exec.ErrNotFound})
	})
	if resp, body := f.do(t, "GET", "/image/"+f.id+"/1.0/metal-amd64.iso", ""); resp.StatusCode != 503 || !strings.Contains(body, "metal-amd64.iso: a tool it needs is not installed") {
		t.Errorf("an ISO without xorriso: %d %q", resp.StatusCode, body)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "xorriso"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	if resp, body := f.do(t, "GET", "/readyz", ""); resp.StatusCode != 200 || body != "ready: v1.0\ntool xorriso: on PATH\n" {
		t.Errorf("with xorriso: %d %q", resp.StatusCode, body)
	}
}
