package factory

import (
	"crypto/sha256"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/nodeforge/builder/internal/blobcache"
)

// layerCache is the factory's compose.LayerCache: the squashfs images of
// the extensions (and module indexes) its compositions wrote, kept in a
// blobcache.Dir of its scratch space, so that a new schematic sharing
// extensions with earlier ones does not compress them again and memory
// holds none between builds. The store's check finds damage; beyond it
// each image's SHA-256 is kept in memory when written and checked when
// read, so a file changed on disk is written again, never put in media.
// The directory goes with the scratch space; what it holds is bounded by
// the extensions of the releases served.
type layerCache struct {
	dir     *blobcache.Dir
	flights singleflight.Group
	mu      sync.Mutex
	sums    map[[32]byte][sha256.Size]byte // key -> the image's SHA-256
}

func newLayerCache(dir *blobcache.Dir) *layerCache {
	return &layerCache{dir: dir, sums: map[[32]byte][sha256.Size]byte{}}
}

// Layer returns the image kept under key, or makes it. One build per key
// runs at once; others wait for it.
func (c *layerCache) Layer(key [32]byte, build func() ([]byte, error)) ([]byte, error) {
	if b, ok := c.read(key); ok {
		return b, nil
	}
	v, err, _ := c.flights.Do(string(key[:]), func() (any, error) {
		if b, ok := c.read(key); ok {
			return b, nil
		}
		return c.keep(key, build)
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// read is the image kept under key when it is there with the bytes written.
func (c *layerCache) read(key [32]byte) ([]byte, bool) {
	c.mu.Lock()
	sum, ok := c.sums[key]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	b, ok := c.dir.Get(key)
	if !ok || sha256.Sum256(b) != sum {
		return nil, false
	}
	return b, true
}

// keep makes the image, keeps it under key and returns it (not kept, the
// next schematic builds it again).
func (c *layerCache) keep(key [32]byte, build func() ([]byte, error)) ([]byte, error) {
	b, err := build()
	if err != nil {
		return nil, err
	}
	c.dir.Put(key, b)
	c.mu.Lock()
	c.sums[key] = sha256.Sum256(b)
	c.mu.Unlock()
	return b, nil
}
