// Package atomicfile writes files so that a reader, a crash or a full disk
// never sees half of one: the content goes to a temporary file in the same
// directory, is synced, given its mode (whatever the umask) and renamed
// over the final name. A failure removes the temporary file and leaves
// whatever was at the final name untouched.
package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/nodeforge/builder/internal/flock"
)

// TempPrefix starts the name of every temporary file this package makes,
// so a sweep after a kill can recognise them (see Sweep).
const TempPrefix = ".tmp-"

// CreateTemp makes a temporary file for base in dir and locks it
// (flock(2)) for as long as it is open, so Sweep can tell a live writer's
// file from one a killed process left. A sweep may catch the file in the
// instant between its creation and its lock and remove it: then a new one
// is made.
func CreateTemp(dir, base string) (*os.File, error) {
	for {
		f, err := os.CreateTemp(dir, TempPrefix+base+"-*")
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			os.Remove(f.Name())
			return nil, err
		}
		mine, err1 := f.Stat()
		there, err2 := os.Lstat(f.Name())
		if err1 == nil && err2 == nil && os.SameFile(mine, there) {
			return f, nil
		}
		f.Close() // swept before it was locked
	}
}

// Write writes data to path atomically with mode perm.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteFrom(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFrom writes what fill writes to path atomically with mode perm. When
// fill fails, nothing changes at path.
func WriteFrom(path string, perm os.FileMode, fill func(io.Writer) error) error {
	return writeFrom(path, perm, fill, true)
}

// Replace is WriteFrom without the sync to disk: for large files whose
// durability is their caller's concern (build outputs, scratch), which
// must still appear whole or not at all.
func Replace(path string, perm os.FileMode, fill func(io.Writer) error) error {
	return writeFrom(path, perm, fill, false)
}

func writeFrom(path string, perm os.FileMode, fill func(io.Writer) error, sync bool) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := CreateTemp(dir, base)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = fill(f); err != nil {
		return err
	}
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if sync {
		if err = f.Sync(); err != nil {
			return err
		}
	}
	// Renamed while still open, so still locked: closing first would let a
	// sweep take the finished file for a dead writer's.
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	return f.Close()
}

// SyncDir flushes a directory's entries (renames and creations in it) to
// disk.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Put writes data to path atomically (mode 0644), first sweeping what a
// killed writer left beside it.
func Put(path string, data []byte) error {
	if err := Sweep(filepath.Dir(path)); err != nil {
		return err
	}
	return Write(path, data, 0o644)
}

// Sweep removes the temporary files that killed processes left in dir.
// A file whose writer is alive is locked and stays, so Sweep is safe while
// others write in dir.
func Sweep(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), TempPrefix) || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		l, ok, err := flock.TryAcquire(p, true)
		if err != nil || !ok {
			continue // gone meanwhile, or in use
		}
		err = os.Remove(p)
		l.Release()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// WriteFileAhead is os.WriteFile with the file's writeback started
// (StartWriteback): for large outputs that a layout links, and syncs,
// afterwards.
func WriteFileAhead(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		StartWriteback(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
