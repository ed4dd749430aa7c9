// Package ocilayout reads and writes OCI image layouts on disk so that a fault
// never loses or corrupts what they hold: every blob read is checked
// against its digest and size as it streams, every file is written to a
// temporary name in its directory, synced and renamed (mode 0644 whatever
// the umask), a blob already present is kept only when its content matches
// its name, and index.json is changed under an exclusive lock, so
// concurrent writers wait for each other instead of losing entries.
//
// go-containerregistry's layout package writes index.json, configs and
// manifests in place and reads blobs unchecked; this package replaces it
// wherever the builder keeps something a user relies on.
package ocilayout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/internal/direntries"
	"github.com/nodeforge/builder/internal/flock"
)

const (
	// IndexFile and LayoutFile are the layout's two fixed files.
	IndexFile  = "index.json"
	LayoutFile = "oci-layout"
	// layoutVersion is the content of oci-layout.
	layoutVersion = `{"imageLayoutVersion":"1.0.0"}`
	// maxIndexSize bounds index.json and every manifest read into memory.
	maxIndexSize = 64 << 20
)

// Dir is an OCI image layout directory.
type Dir struct {
	path string
}

// Path is the layout's directory.
func (d *Dir) Path() string { return d.path }

// Open opens an existing layout for reading. A missing directory, a
// directory that is not a layout and an unreadable index.json are errors
// that name the path; nothing is created.
func Open(path string) (*Dir, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such directory, so no OCI image layout there: %w", path, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is a file, not an OCI image layout (a directory with oci-layout, index.json and blobs/)", path)
	}
	d := &Dir{path: path}
	if _, err := os.Stat(filepath.Join(path, LayoutFile)); err != nil {
		return nil, fmt.Errorf("%s is not an OCI image layout: it has no %s file", path, LayoutFile)
	}
	if _, err := d.Index(); err != nil {
		return nil, err
	}
	return d, nil
}

// Create opens the layout at path for writing, making it when the
// directory is missing or empty. Anything else at path (a file, a
// directory holding other things) is refused with a message naming what is
// there: a layout is never written over someone's files. The temporary
// files of writers that were killed are removed (a live writer's are
// locked and stay: see atomicfile.Sweep).
func Create(path string) (*Dir, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(path, 0o755); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	case !fi.IsDir():
		return nil, fmt.Errorf("%s is a file: an OCI image layout needs an empty or missing directory", path)
	}
	if _, err := os.Stat(filepath.Join(path, LayoutFile)); err == nil {
		return openSwept(path)
	}
	// Creators take turns (another process may be making this layout
	// right now), then look again.
	l, err := flock.Acquire(context.Background(), path, true, nil)
	if err != nil {
		return nil, err
	}
	defer l.Release()
	if _, err := os.Stat(filepath.Join(path, LayoutFile)); err == nil {
		return openSwept(path)
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	// What a creation cut short leaves (blobs/, index.json, temporary
	// files) is taken up again; anything else is someone's.
	foreign := slices.DeleteFunc(ents, func(e fs.DirEntry) bool {
		return e.Name() == "blobs" || e.Name() == IndexFile || strings.HasPrefix(e.Name(), atomicfile.TempPrefix)
	})
	if len(foreign) > 0 {
		return nil, fmt.Errorf("%s holds %s and is not an OCI image layout (no %s): refusing to write a layout there; give an empty or missing directory", path, direntries.Describe(foreign), LayoutFile)
	}
	if err := os.MkdirAll(filepath.Join(path, "blobs", "sha256"), 0o755); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(filepath.Join(path, IndexFile), emptyIndex(), 0o644); err != nil {
		return nil, err
	}
	// oci-layout last: a directory with it is a layout.
	if err := atomicfile.Write(filepath.Join(path, LayoutFile), []byte(layoutVersion), 0o644); err != nil {
		return nil, err
	}
	return openSwept(path)
}

// openSwept opens the layout at path and removes what killed writers left.
func openSwept(path string) (*Dir, error) {
	d, err := Open(path)
	if err != nil {
		return nil, err
	}
	for _, dir := range []string{path, filepath.Join(path, "blobs", "sha256")} {
		if err := atomicfile.Sweep(dir); err != nil {
			return nil, fmt.Errorf("OCI image layout %s: removing leftovers: %w", path, err)
		}
	}
	return d, nil
}

func emptyIndex() []byte {
	b, _ := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{}})
	return b
}

// Index reads index.json. It is replaced only by rename, so a reader never
// sees a half-written one.
func (d *Dir) Index() (*v1.IndexManifest, error) {
	p := filepath.Join(d.path, IndexFile)
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("OCI image layout %s: %w", d.path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxIndexSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if len(b) > maxIndexSize {
		return nil, fmt.Errorf("%s: larger than %d MiB: not an index", p, maxIndexSize>>20)
	}
	var m v1.IndexManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s is not a valid OCI index (%v): the layout is damaged; restore index.json from a backup or write the layout anew", p, err)
	}
	if m.SchemaVersion != 2 {
		return nil, fmt.Errorf("%s: schemaVersion %d, want 2: not an OCI index", p, m.SchemaVersion)
	}
	return &m, nil
}

// Update changes index.json under an exclusive lock: fn gets the index as
// it is on disk now (another process may have changed it since it was last
// read) and changes it in place; the result replaces index.json atomically
// after every blob written so far is on disk.
func (d *Dir) Update(ctx context.Context, fn func(*v1.IndexManifest) error) error {
	return d.locked(ctx, func() error { return d.update(fn) })
}

// locked runs fn holding the index lock. The blobs directory carries it:
// the layout directory's own lock is taken while the layout is created,
// and index.json itself is replaced by rename, so a lock on it would be
// lost.
func (d *Dir) locked(ctx context.Context, fn func() error) error {
	l, err := flock.Acquire(ctx, filepath.Join(d.path, "blobs"), true, nil)
	if err != nil {
		return fmt.Errorf("OCI image layout %s: %w", d.path, err)
	}
	defer l.Release()
	return fn()
}

func (d *Dir) update(fn func(*v1.IndexManifest) error) error {
	m, err := d.Index()
	if err != nil {
		return err
	}
	if m.Manifests == nil {
		m.Manifests = []v1.Descriptor{}
	}
	if err := fn(m); err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	// The blobs the new entries name must be durable before the index
	// that names them.
	if err := atomicfile.SyncDir(filepath.Join(d.path, "blobs", "sha256")); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(d.path, IndexFile), b, 0o644); err != nil {
		return fmt.Errorf("OCI image layout %s: writing %s: %w", d.path, IndexFile, err)
	}
	return nil
}

// Put adds desc to index.json, replacing the entries match selects.
func (d *Dir) Put(ctx context.Context, desc v1.Descriptor, match func(v1.Descriptor) bool) error {
	return d.Update(ctx, func(m *v1.IndexManifest) error {
		m.Manifests = slices.DeleteFunc(m.Manifests, match)
		m.Manifests = append(m.Manifests, desc)
		return nil
	})
}

// BlobPath is where the blob named h lives.
func (d *Dir) BlobPath(h v1.Hash) string {
	return filepath.Join(d.path, "blobs", h.Algorithm, h.Hex)
}

// ReadBlob reads a whole blob (a manifest, a config) of at most max bytes,
// checking size and digest.
func (d *Dir) ReadBlob(desc v1.Descriptor, max int64) ([]byte, error) {
	if desc.Size > max {
		return nil, &BlobError{Dir: d.path, Digest: desc.Digest, Reason: fmt.Sprintf("%d bytes, more than the %d a %s may have", desc.Size, max, kindOf(desc.MediaType))}
	}
	rc, err := d.OpenBlob(desc.Digest, desc.Size)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	var b bytes.Buffer
	if _, err := io.Copy(&b, io.LimitReader(rc, max+1)); err != nil {
		return nil, err
	}
	if int64(b.Len()) > max {
		return nil, &BlobError{Dir: d.path, Digest: desc.Digest, Reason: fmt.Sprintf("more than the %d bytes a %s may have", max, kindOf(desc.MediaType)), Err: ErrDamaged}
	}
	return b.Bytes(), nil
}

func kindOf(mt types.MediaType) string {
	switch {
	case mt.IsIndex():
		return "index"
	case mt.IsImage():
		return "manifest"
	}
	return "blob"
}
