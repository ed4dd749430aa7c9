// Package atomicfile writes files so that a reader, a crash or a full disk
// never sees half of one: the content goes to a temporary file in the same
// directory, is synced, given its mode (whatever the umask) and renamed
// over the final name. A failure removes the temporary file and leaves
// whatever was at the final name untouched.
package atomicfile

import (
	"io"
	"os"
	"path/filepath"
	"strings"
)

// TempPrefix starts the name of every temporary file this package makes,
// so a sweep after a kill can recognise them (see Sweep).
const TempPrefix = ".tmp-"

// Write writes data to path atomically with mode perm.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteFrom(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFrom writes what fill writes to path atomically with mode perm. When
// fill fails, nothing changes at path.
func WriteFrom(path string, perm os.FileMode, fill func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, TempPrefix+base+"-*")
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
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
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

// Sweep removes the temporary files WriteFrom left in dir when a process
// was killed while writing. Call it only while no other writer uses dir.
func Sweep(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), TempPrefix) && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !os.IsNotExist(err) {
				return err
			}
		}
	}
	return nil
}
