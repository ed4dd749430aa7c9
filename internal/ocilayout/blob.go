package ocilayout

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/internal/atomicfile"
)

// BlobError says which blob of which layout failed and why.
type BlobError struct {
	Dir    string
	Digest v1.Hash
	Reason string
	Err    error
}

func (e *BlobError) Error() string {
	return fmt.Sprintf("OCI image layout %s: blob %s: %s", e.Dir, e.Digest, e.Reason)
}

func (e *BlobError) Unwrap() error { return e.Err }

// ErrDamaged is wrapped by every BlobError about content that does not
// match its digest or size.
var ErrDamaged = errors.New("damaged or tampered blob")

// OpenBlob opens the blob named h, expected to be size bytes (-1: any),
// for reading. The reader fails with a *BlobError (wrapping ErrDamaged)
// when the content runs past size, ends short of it, or does not hash to h;
// the error comes with the read that finds it, so nothing downstream ever
// sees the end of a damaged blob without the error.
func (d *Dir) OpenBlob(h v1.Hash, size int64) (io.ReadCloser, error) {
	if h.Algorithm != "sha256" || len(h.Hex) != 64 {
		return nil, &BlobError{Dir: d.path, Digest: h, Reason: "only sha256 digests are supported"}
	}
	p := d.BlobPath(h)
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &BlobError{Dir: d.path, Digest: h, Reason: "missing (no file " + p + ")", Err: fs.ErrNotExist}
	}
	if err != nil {
		return nil, &BlobError{Dir: d.path, Digest: h, Reason: err.Error(), Err: err}
	}
	if !fi.Mode().IsRegular() {
		return nil, &BlobError{Dir: d.path, Digest: h, Reason: p + " is not a regular file", Err: ErrDamaged}
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, &BlobError{Dir: d.path, Digest: h, Reason: err.Error(), Err: err}
	}
	return &checkedReader{r: f, c: f, h: sha256.New(), want: h, size: size, dir: d.path}, nil
}

// checkedReader hashes what it reads and checks size and digest at EOF.
type checkedReader struct {
	r    io.Reader
	c    io.Closer
	h    hash.Hash
	want v1.Hash
	size int64
	n    int64
	dir  string
	err  error
}

func (c *checkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.h.Write(p[:n])
	if c.size >= 0 && c.n > c.size {
		c.err = &BlobError{Dir: c.dir, Digest: c.want, Reason: fmt.Sprintf("longer than the %d bytes its descriptor says", c.size), Err: ErrDamaged}
		return n, c.err
	}
	if err == io.EOF {
		if c.size >= 0 && c.n != c.size {
			c.err = &BlobError{Dir: c.dir, Digest: c.want, Reason: fmt.Sprintf("%d bytes, its descriptor says %d (truncated or damaged)", c.n, c.size), Err: ErrDamaged}
			return n, c.err
		}
		if got := hex.EncodeToString(c.h.Sum(nil)); got != c.want.Hex {
			c.err = &BlobError{Dir: c.dir, Digest: c.want, Reason: "content hashes to sha256:" + got + " (damaged or tampered)", Err: ErrDamaged}
			return n, c.err
		}
	}
	return n, err
}

func (c *checkedReader) Close() error { return c.c.Close() }

// Check reads the blob named h through and reports whether it is whole.
func (d *Dir) Check(h v1.Hash, size int64) error {
	rc, err := d.OpenBlob(h, size)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	return err
}

// WriteBlob stores the blob named h (size bytes, -1 when unknown) from r,
// unless a whole copy is there already. The content is hashed as it is
// written to a temporary file beside its final name, synced, and renamed
// only when it matches h and size, so a full disk, a kill or a wrong
// source never leaves a blob under a name its content does not have. A
// damaged copy already there is replaced. It reports whether it wrote.
func (d *Dir) WriteBlob(h v1.Hash, size int64, r io.Reader) (bool, error) {
	if d.Check(h, size) == nil {
		// Named again, the blob is young again: Prune spares it until the
		// entry naming it is written (best effort: a blob in a read-only
		// layout is whole all the same).
		now := time.Now()
		_ = os.Chtimes(d.BlobPath(h), now, now)
		return false, nil
	}
	dir := filepath.Join(d.path, "blobs", h.Algorithm)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	hh := sha256.New()
	var n int64
	err := atomicfile.WriteFrom(filepath.Join(dir, h.Hex), 0o644, func(w io.Writer) error {
		var err error
		src := r
		if size >= 0 {
			src = io.LimitReader(r, size+1)
		}
		n, err = io.Copy(io.MultiWriter(w, hh), src)
		if err != nil {
			return err
		}
		if size >= 0 && n != size {
			return &BlobError{Dir: d.path, Digest: h, Reason: fmt.Sprintf("the source gave %d bytes, its descriptor says %d", n, size), Err: ErrDamaged}
		}
		if got := hex.EncodeToString(hh.Sum(nil)); got != h.Hex {
			return &BlobError{Dir: d.path, Digest: h, Reason: "the source's content hashes to sha256:" + got, Err: ErrDamaged}
		}
		return nil
	})
	if err != nil {
		var be *BlobError
		if errors.As(err, &be) {
			return false, err
		}
		return false, &BlobError{Dir: d.path, Digest: h, Reason: "writing: " + err.Error(), Err: err}
	}
	return true, nil
}

// HashedBlob is a layer whose blob is bytes in memory that the layer's
// maker hashed to make its digest: WriteImage stores them without hashing
// them again (a release's boot assets and installer layers are hundreds of
// megabytes, hashed once already).
type HashedBlob interface {
	HashedBlob() []byte
}

// HashedFile is a layer whose blob is a file that the layer's maker
// hashed as it wrote it, and nobody writes to any more (a build's boot
// assets and installer layer, on the layout's file system): the blob
// becomes a hard link to it, or, where no link can be made, a copy
// checked as WriteBlob checks one.
type HashedFile interface {
	HashedFile() string
}

// writeHashedFile is WriteBlob for a file known to hash to h.
func (d *Dir) writeHashedFile(h v1.Hash, size int64, file string) (bool, error) {
	if _, err := os.Lstat(d.BlobPath(h)); os.IsNotExist(err) {
		if err := os.MkdirAll(filepath.Join(d.path, "blobs", h.Algorithm), 0o755); err != nil {
			return false, err
		}
		if linkSynced(file, d.BlobPath(h), size) == nil {
			return true, nil
		}
	}
	f, err := os.Open(file)
	if err != nil {
		return false, err
	}
	defer f.Close()
	return d.WriteBlob(h, size, f)
}

// writeHashed is WriteBlob for bytes known to hash to h.
func (d *Dir) writeHashed(h v1.Hash, size int64, b []byte) (bool, error) {
	if int64(len(b)) != size {
		return false, &BlobError{Dir: d.path, Digest: h, Reason: fmt.Sprintf("the source gave %d bytes, its descriptor says %d", len(b), size), Err: ErrDamaged}
	}
	if _, err := os.Lstat(d.BlobPath(h)); err == nil {
		// Something is there: WriteBlob checks it and replaces it if
		// damaged.
		return d.WriteBlobBytes(h, b)
	}
	dir := filepath.Join(d.path, "blobs", h.Algorithm)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	if err := atomicfile.Write(filepath.Join(dir, h.Hex), b, 0o644); err != nil {
		return false, &BlobError{Dir: d.path, Digest: h, Reason: "writing: " + err.Error(), Err: err}
	}
	return true, nil
}

// linkSynced makes to a hard link to from, a regular file of size bytes
// and a blob's mode, once from's content is on disk (as atomicfile would
// leave a blob). A link appears whole or not at all; on any failure
// (another file system, no hard links) the caller writes a copy.
func linkSynced(from, to string, size int64) error {
	f, err := os.Open(from)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Size() != size || fi.Mode().Perm() != 0o644 {
		return fmt.Errorf("%s is not a file of %d bytes, mode 0644", from, size)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return os.Link(from, to)
}

// WriteBlobBytes stores b under its digest h.
func (d *Dir) WriteBlobBytes(h v1.Hash, b []byte) (bool, error) {
	return d.WriteBlob(h, int64(len(b)), bytes.NewReader(b))
}
