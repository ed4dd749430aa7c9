package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/demobase/demotest"
	"github.com/nodeforge/builder/pkgbase/locker"
)

// demoSpec is the demo base's spec, in a new directory.
func demoSpec(t *testing.T) *specs.Spec {
	t.Helper()
	_, s := demotest.Spec(t)
	return s
}

type logged []string

func (l *logged) logf(format string, args ...any) { *l = append(*l, fmt.Sprintf(format, args...)) }

// TestReadOrCreateLock: without a lock the spec is locked and the lock
// written where asked (the locker logging through logf too); the next call reads those bytes and locks nothing;
// with relock, a lock of the spec as it is now is kept, and one made
// before the spec was edited is made again.
func TestReadOrCreateLock(t *testing.T) {
	ctx := context.Background()
	s := demoSpec(t)
	lo := locker.Options{Cache: &cache.Cache{Dir: t.TempDir()}}
	path := filepath.Join(t.TempDir(), "elsewhere.lock.json")

	var log logged
	in, err := ReadOrCreateLock(ctx, s, path, lo, false, log.logf)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) == 0 || !strings.Contains(log[0], "no lock at "+path) {
		t.Errorf("log %q, want it to say there was no lock", log)
	}
	written, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(written) != string(in.LockBytes) || in.LockPath != path || in.Spec != s || len(in.Lock.Architectures) == 0 {
		t.Errorf("inputs %s (%d architectures) are not the lock written to %s", in.LockPath, len(in.Lock.Architectures), path)
	}

	log = nil
	again, err := ReadOrCreateLock(ctx, s, path, lo, true, log.logf)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 0 || string(again.LockBytes) != string(written) {
		t.Errorf("a second call locked again (log %q) or read other bytes", log)
	}

	// The spec edited: its bytes are no longer those the lock pins.
	s.Raw = append(s.Raw, "\n# edited\n"...)
	log = nil
	if _, err := ReadOrCreateLock(ctx, s, path, lo, false, log.logf); err != nil || len(log) != 0 {
		t.Errorf("without relock, a stale lock is read as it is (the build refuses it): %v %q", err, log)
	}
	relocked, err := ReadOrCreateLock(ctx, s, path, lo, true, log.logf)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) == 0 || !strings.Contains(log[0], "not the spec's as it is now") {
		t.Errorf("log %q, want it to say the lock is stale", log)
	}
	if string(relocked.LockBytes) == string(written) {
		t.Error("relocking an edited spec wrote the same lock")
	}
}

// TestReadLock: a missing lock is fs.ErrNotExist (ReadOrCreateLock's cue
// to lock), a damaged one an error naming the file, and the default path
// is the spec's.
func TestReadLock(t *testing.T) {
	s := demoSpec(t)
	if _, err := ReadLock(s, ""); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), s.LockPath()) {
		t.Errorf("no lock: %v, want fs.ErrNotExist naming %s", err, s.LockPath())
	}
	bad := filepath.Join(t.TempDir(), "bad.lock.json")
	if err := os.WriteFile(bad, []byte(`{"lockVersion": 2, "architectures": `), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadLock(s, bad)
	if err == nil || errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), bad) {
		t.Errorf("damaged lock: %v, want an error naming %s", err, bad)
	}
	// ReadOrCreateLock does not lock over a damaged lock.
	if _, err := ReadOrCreateLock(context.Background(), s, bad, locker.Options{}, false, func(string, ...any) {}); err == nil {
		t.Error("ReadOrCreateLock locked over a damaged lock")
	}
}
