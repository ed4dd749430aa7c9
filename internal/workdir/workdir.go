// Package workdir makes the temporary directories long operations work in
// (a build beside its output, an archive import) so that none outlives its
// process for long: each is locked while in use and removed when done, and
// the ones a killed process left are swept by the next one that makes a
// directory of the same kind in the same place.
package workdir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nodeforge/builder/internal/flock"
)

// Dir is a temporary working directory in use.
type Dir struct {
	Path string
	lock *flock.Lock
}

// New sweeps parent of abandoned directories named prefix*, then makes a
// new one (mode 0755) and locks it.
func New(parent, prefix string) (*Dir, error) {
	if err := Sweep(parent, prefix); err != nil {
		return nil, err
	}
	p, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(p, 0o755); err != nil {
		os.RemoveAll(p)
		return nil, err
	}
	l, ok, err := flock.TryAcquire(p, true)
	if err != nil || !ok {
		os.RemoveAll(p)
		if err == nil {
			err = errors.New("locked by another process")
		}
		return nil, err
	}
	return &Dir{Path: p, lock: l}, nil
}

// Close removes the directory (whatever is still in it) and unlocks it.
func (d *Dir) Close() error {
	if d == nil || d.lock == nil {
		return nil
	}
	err := os.RemoveAll(d.Path)
	d.lock.Release()
	d.lock = nil
	return err
}

// Sweep removes the directories named prefix* in parent that no live
// process holds (their owner was killed).
func Sweep(parent, prefix string) error {
	ents, err := os.ReadDir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(parent, e.Name())
		l, ok, err := flock.TryAcquire(p, true)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		if !ok {
			continue // in use
		}
		err = os.RemoveAll(p)
		l.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// Swap puts the directory at work in place of dst in one step: when dst
// exists the two are exchanged (renameat2 RENAME_EXCHANGE), so there is no
// moment without a dst and a kill leaves either the old or the new one;
// what was at dst is then at work, for Close to remove.
func Swap(work, dst string) error {
	err := unix.Renameat2(unix.AT_FDCWD, work, unix.AT_FDCWD, dst, unix.RENAME_EXCHANGE)
	switch {
	case errors.Is(err, unix.ENOENT):
		if _, serr := os.Lstat(dst); errors.Is(serr, fs.ErrNotExist) {
			return os.Rename(work, dst)
		}
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		// A filesystem without exchange: two renames, the old copy named
		// like work so a sweep finds it if a kill falls between them.
		old := work + ".old"
		if err := os.Rename(dst, old); err != nil {
			return err
		}
		if err := os.Rename(work, dst); err != nil {
			os.Rename(old, dst)
			return err
		}
		return os.Rename(old, work)
	}
	return err
}
