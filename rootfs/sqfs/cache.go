package sqfs

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
)

// BlockCache holds compressed blocks by key: sha256 over the compressor,
// its level and library version, the block size and the uncompressed
// block. The writer calls it from several goroutines at once.
//
// Get's result is used as the stored block: its length equals the
// uncompressed length when the block is stored uncompressed, and is
// smaller otherwise. Put is given the block as it is stored; it must not
// modify it.
type BlockCache interface {
	Get(key [32]byte) ([]byte, bool)
	Put(key [32]byte, compressed []byte)
}

// DirCache is a BlockCache in a directory: one file per block, named by
// the key in hex under a subdirectory of its first two hex digits, written
// to a temporary name and renamed, so a crash or a concurrent build never
// leaves a partial entry under a key. Each file ends with a CRC-32C of
// the block and a marker; a file that fails the check is a miss.
//
// Nothing is ever evicted: remove the directory to reclaim space.
type DirCache struct {
	dir string
}

var (
	dirCacheMarker = []byte("sqc1")
	castagnoli     = crc32.MakeTable(crc32.Castagnoli)
)

const dirCacheTrailer = 8

// NewDirCache opens (creating it if needed) a cache directory.
func NewDirCache(dir string) (*DirCache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sqfs: block cache: %w", err)
	}
	return &DirCache{dir: dir}, nil
}

func (c *DirCache) path(key [32]byte) string {
	h := hex.EncodeToString(key[:])
	return filepath.Join(c.dir, h[:2], h)
}

// Get returns the block stored under key.
func (c *DirCache) Get(key [32]byte) ([]byte, bool) {
	b, err := os.ReadFile(c.path(key))
	if err != nil || len(b) <= dirCacheTrailer {
		return nil, false
	}
	n := len(b) - dirCacheTrailer
	if !bytes.Equal(b[n+4:], dirCacheMarker) ||
		binary.LittleEndian.Uint32(b[n:]) != crc32.Checksum(b[:n], castagnoli) {
		return nil, false
	}
	return b[:n:n], true
}

// Put stores a block under key. Failures are ignored: a cache that cannot
// be written only costs time.
func (c *DirCache) Put(key [32]byte, compressed []byte) {
	// The writer puts only after a miss, so an entry there is damaged:
	// replace it.
	p := c.path(key)
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return
	}
	var tr [dirCacheTrailer]byte
	binary.LittleEndian.PutUint32(tr[:], crc32.Checksum(compressed, castagnoli))
	copy(tr[4:], dirCacheMarker)
	_, err1 := f.Write(compressed)
	_, err2 := f.Write(tr[:])
	err3 := f.Close()
	if err1 != nil || err2 != nil || err3 != nil || os.Rename(f.Name(), p) != nil {
		os.Remove(f.Name())
	}
}
