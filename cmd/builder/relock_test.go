package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/builder"
	"github.com/nodeforge/builder/pipeline"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/demobase"
	"github.com/nodeforge/builder/pkgbase/locker"
)

// TestRelock: a lock made before the spec was edited is read as it is
// (the build refuses it, naming --relock), and with relock (release
// --relock) the spec is locked again over it. (Here rather than in
// pipeline, which has no test binary of its own.)
func TestRelock(t *testing.T) {
	t.Parallel() // see TestMain
	dir := filepath.Join(t.TempDir(), "demo")
	if err := demobase.Write(dir); err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "spec.yaml")
	load := func() *specs.Spec {
		t.Helper()
		s, err := specs.Load(specPath)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	lo := locker.Options{Cache: &cache.Cache{Dir: t.TempDir()}}
	quiet := func(string, ...any) {}
	first, err := pipeline.ReadOrCreateLock(context.Background(), load(), "", lo, true, quiet)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(specPath)
	if err := os.WriteFile(specPath, append(raw, "# edited\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	s := load()
	in, err := pipeline.ReadOrCreateLock(context.Background(), s, "", lo, false, quiet)
	if err != nil || string(in.LockBytes) != string(first.LockBytes) {
		t.Fatalf("without relock the lock is not read as it is: %v", err)
	}
	if err := builder.CheckLock(s, in.Lock); !errors.Is(err, builder.ErrStaleLock) {
		t.Errorf("the stale lock: %v", err)
	}
	var said []string
	in, err = pipeline.ReadOrCreateLock(context.Background(), s, "", lo, true, func(f string, _ ...any) { said = append(said, f) })
	if err != nil {
		t.Fatal(err)
	}
	if err := builder.CheckLock(s, in.Lock); err != nil || len(said) == 0 {
		t.Errorf("relocked: %v (said %q)", err, said)
	}
	if b, _ := os.ReadFile(in.LockPath); string(b) != string(in.LockBytes) || in.LockPath != first.LockPath {
		t.Errorf("the new lock is not written over the old one at %s", first.LockPath)
	}
}
