package sqfs

import "sync"

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

// A build uses internal/blobcache.Dir: one file per block in a directory.

// Held is a BlockCache in memory for the images of one composition: a
// Precompressor puts blocks in while the trees are still being read,
// and Write takes each out (Get removes it: an image asks for a block
// once). Once sealed, Put keeps nothing more, so the blocks Write
// compresses itself are not held a second time.
type Held struct {
	mu     sync.Mutex
	blocks map[[32]byte][]byte
	sealed bool
}

// NewHeld returns an empty Held.
func NewHeld() *Held { return &Held{blocks: map[[32]byte][]byte{}} }

// Get takes the block out.
func (h *Held) Get(key [32]byte) ([]byte, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.blocks[key]
	delete(h.blocks, key)
	return b, ok
}

// Put keeps the block, until sealed.
func (h *Held) Put(key [32]byte, compressed []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.sealed {
		h.blocks[key] = compressed
	}
}

// Has says whether the block is held (the Precompressor skips it).
func (h *Held) Has(key [32]byte) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.blocks[key]
	return ok
}

// Seal ends the Puts: what is held stays until taken.
func (h *Held) Seal() {
	h.mu.Lock()
	h.sealed = true
	h.mu.Unlock()
}
