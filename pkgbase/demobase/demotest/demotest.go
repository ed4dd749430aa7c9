// Package demotest gives tests the demo package base, locked.
package demotest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/demobase"
	"github.com/nodeforge/builder/pkgbase/locker"
)

// Spec writes the demo base into a new directory and loads its spec: the
// base's directory and the spec.
func Spec(t testing.TB) (string, *specs.Spec) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo")
	if err := demobase.Write(dir); err != nil {
		t.Fatal(err)
	}
	s, err := specs.Load(filepath.Join(dir, demobase.SpecFile))
	if err != nil {
		t.Fatal(err)
	}
	return dir, s
}

// Locked writes the demo base into a new directory and locks its spec
// (the lock is not written): the base's directory, the lock and the
// options it was made with (a new package cache).
func Locked(t testing.TB) (string, *lock.Lock, locker.Options) {
	t.Helper()
	dir, s := Spec(t)
	opts := locker.Options{Cache: &cache.Cache{Dir: t.TempDir()}}
	l, err := locker.Create(context.Background(), s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return dir, l, opts
}
