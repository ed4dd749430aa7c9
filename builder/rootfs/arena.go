package rootfs

import (
	"sync"

	"github.com/nodeforge/builder/internal/hugepage"
)

// contentArena hands out the laid files' contents (AddRPMs: every payload
// decompressed, 570 MB for the real base) from slabs backed by huge pages
// (internal/hugepage), which fault in 2 MiB at a time. A slab lives as
// long as any file cut from it: the tree keeps them all until the build
// is done with it.
type contentArena struct {
	mu   sync.Mutex
	slab []byte
}

// arenaSlab is a slab's size; a file of an eighth of it or more gets its
// own buffer.
const arenaSlab = 32 << 20

// alloc is make([]byte, n) from the arena (a nil arena: make).
func (a *contentArena) alloc(n int64) []byte {
	if a == nil {
		return make([]byte, n)
	}
	if n >= arenaSlab/8 {
		return hugepage.Bytes(int(n))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if int64(len(a.slab)) < n {
		a.slab = hugepage.Bytes(arenaSlab)
	}
	b := a.slab[:n:n]
	a.slab = a.slab[n:]
	return b
}
