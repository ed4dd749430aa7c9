// Package blobcache stores immutable blobs by a 32-byte key in a directory,
// for the build's step caches (compressed squashfs blocks, laid packages,
// file contents). A damaged entry is detected cheaply (CRC-32C) and is a
// miss; writes are atomic, so a crash or a concurrent build never leaves a
// partial entry under a key.
package blobcache

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/internal/hugepage"
)

// Dir is a store of blobs by 32-byte key (a sha256) in a directory: one
// file per blob, named by the key in hex under a subdirectory of its first
// two hex digits, written to a temporary name and renamed. Each file ends
// with a CRC-32C of the blob and a marker; a file that fails the check is
// a miss. It is safe for concurrent use.
//
// Nothing is ever evicted: remove the directory to reclaim space.
type Dir struct {
	dir string
}

var (
	marker     = []byte("sqc1")
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

const trailer = 8

// Open opens (creating it if needed) a cache directory, removing what
// killed writers left in it.
func Open(dir string) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("blob cache: %w", err)
	}
	subs, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("blob cache: %w", err)
	}
	for _, s := range subs {
		if s.IsDir() {
			if err := atomicfile.Sweep(filepath.Join(dir, s.Name())); err != nil {
				return nil, fmt.Errorf("blob cache: %w", err)
			}
		}
	}
	return &Dir{dir: dir}, nil
}

func (c *Dir) path(key [32]byte) string {
	h := hex.EncodeToString(key[:])
	return filepath.Join(c.dir, h[:2], h)
}

// Get returns the blob stored under key; a missing or damaged entry is a miss.
func (c *Dir) Get(key [32]byte) ([]byte, bool) {
	// Large entries (a laid package's files) fill fresh memory.
	b, err := hugepage.ReadFile(c.path(key))
	if err != nil || len(b) <= trailer {
		return nil, false
	}
	n := len(b) - trailer
	if !bytes.Equal(b[n+4:], marker) ||
		binary.LittleEndian.Uint32(b[n:]) != crc32.Checksum(b[:n], castagnoli) {
		return nil, false
	}
	return b[:n:n], true
}

// Put stores a blob under key; it must not be modified afterwards.
// Failures are ignored: a cache that cannot be written only costs time.
func (c *Dir) Put(key [32]byte, blob []byte) { c.PutParts(key, blob) }

// PutParts stores the concatenation of parts under key, without making it.
func (c *Dir) PutParts(key [32]byte, parts ...[]byte) {
	// Callers put after a miss, so an entry already there is damaged:
	// replace it.
	p := c.path(key)
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	f, err := atomicfile.CreateTemp(dir, "blob")
	if err != nil {
		return
	}
	var sum uint32
	var werr error
	for _, b := range parts {
		sum = crc32.Update(sum, castagnoli, b)
		if _, err := f.Write(b); err != nil && werr == nil {
			werr = err
		}
	}
	var tr [trailer]byte
	binary.LittleEndian.PutUint32(tr[:], sum)
	copy(tr[4:], marker)
	_, err2 := f.Write(tr[:])
	// Renamed while open, so still locked against a concurrent sweep.
	if werr != nil || err2 != nil || os.Rename(f.Name(), p) != nil {
		os.Remove(f.Name())
	}
	f.Close()
}

// Has reports whether an entry exists under key, without reading or
// checking it (Get still may miss on a damaged entry).
func (c *Dir) Has(key [32]byte) bool {
	_, err := os.Stat(c.path(key))
	return err == nil
}
