package factory

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sync/singleflight"
)

// layerCache is the factory's compose.LayerCache: the squashfs images of
// the extensions (and module indexes) its compositions wrote, one file
// each in a directory of its scratch space, so that a new schematic
// sharing extensions with earlier ones does not compress them again and
// memory holds none between builds. Each file's SHA-256 is kept in memory
// when written and checked when read: a file changed on disk is written
// again, never put in media. The directory goes with the scratch space;
// what it holds is bounded by the extensions of the releases served.
type layerCache struct {
	dir     string
	flights singleflight.Group
	mu      sync.Mutex
	sums    map[string][sha256.Size]byte // key -> the file's SHA-256
}

func newLayerCache(dir string) *layerCache {
	return &layerCache{dir: dir, sums: map[string][sha256.Size]byte{}}
}

// Layer returns the image kept under key (a hex digest), or writes it.
// One write per key runs at once; others wait for it.
func (c *layerCache) Layer(key string, write func(io.Writer) error) ([]byte, error) {
	if b, ok := c.read(key); ok {
		return b, nil
	}
	v, err, _ := c.flights.Do(key, func() (any, error) {
		if b, ok := c.read(key); ok {
			return b, nil
		}
		return c.write(key, write)
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// read is the file kept under key when it is there with the bytes written.
func (c *layerCache) read(key string) ([]byte, bool) {
	c.mu.Lock()
	sum, ok := c.sums[key]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	b, err := os.ReadFile(filepath.Join(c.dir, key))
	if err != nil || sha256.Sum256(b) != sum {
		return nil, false
	}
	return b, true
}

// write makes the image, keeps it under key (renamed into place whole)
// and returns it.
func (c *layerCache) write(key string, write func(io.Writer) error) ([]byte, error) {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	if err := c.keep(key, b); err != nil {
		// Not kept: the next schematic writes it again.
		return b, nil
	}
	c.mu.Lock()
	c.sums[key] = sha256.Sum256(b)
	c.mu.Unlock()
	return b, nil
}

// keep writes b to the file of key.
func (c *layerCache) keep(key string, b []byte) error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(c.dir, ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(c.dir, key)); err != nil {
		return fmt.Errorf("keeping a layer: %w", err)
	}
	return nil
}
