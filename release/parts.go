package release

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// epoch is the modification time of every archive entry: archives
// depend on their content only.
var epoch = time.Unix(0, 0).UTC()

// partWriter writes a stream to path, or split into path.000, path.001,
// ... of at most size bytes, each first under a temporary name; commit
// renames them all, abort removes them.
type partWriter struct {
	path  string
	size  int64
	cur   *os.File
	n     int64
	temps []string
}

func newPartWriter(path string, size int64) (*partWriter, error) {
	w := &partWriter{path: path, size: size}
	return w, w.rotate()
}

func (w *partWriter) final(i int) string {
	if w.size <= 0 {
		return w.path
	}
	return fmt.Sprintf("%s.%03d", w.path, i)
}

func (w *partWriter) rotate() error {
	if w.cur != nil {
		if err := w.cur.Close(); err != nil {
			return err
		}
	}
	f, err := os.CreateTemp(filepath.Dir(w.path), "."+filepath.Base(w.final(len(w.temps)))+".*")
	if err != nil {
		return err
	}
	w.cur, w.n = f, 0
	w.temps = append(w.temps, f.Name())
	return nil
}

func (w *partWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if w.size > 0 && w.n == w.size {
			if err := w.rotate(); err != nil {
				return written, err
			}
		}
		chunk := p
		if w.size > 0 && int64(len(chunk)) > w.size-w.n {
			chunk = chunk[:w.size-w.n]
		}
		n, err := w.cur.Write(chunk)
		written += n
		w.n += int64(n)
		if err != nil {
			return written, err
		}
		p = p[n:]
	}
	return written, nil
}

// commit closes the last part and renames every part to its final name,
// removing parts of an earlier, longer archive of the same name.
func (w *partWriter) commit() ([]string, error) {
	if err := w.cur.Close(); err != nil {
		return nil, err
	}
	w.cur = nil
	var out []string
	for i, t := range w.temps {
		if err := os.Chmod(t, 0o644); err != nil {
			return nil, err
		}
		if err := os.Rename(t, w.final(i)); err != nil {
			return nil, err
		}
		out = append(out, w.final(i))
	}
	w.temps = nil
	if w.size > 0 {
		for i := len(out); ; i++ {
			if err := os.Remove(w.final(i)); err != nil {
				break
			}
		}
	}
	return out, nil
}

func (w *partWriter) abort() {
	if w.cur != nil {
		w.cur.Close()
	}
	for _, t := range w.temps {
		os.Remove(t)
	}
}

// openParts reads path, or path.000, path.001, ... in order when path
// itself does not exist.
func openParts(path string) (io.Reader, func(), error) {
	if f, err := os.Open(path); err == nil {
		return f, func() { f.Close() }, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	var files []*os.File
	var readers []io.Reader
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for i := 0; ; i++ {
		f, err := os.Open(fmt.Sprintf("%s.%03d", path, i))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		files = append(files, f)
		readers = append(readers, f)
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("archive %s: no such file (nor %s.000, ...)", path, path)
	}
	return io.MultiReader(readers...), closeAll, nil
}
