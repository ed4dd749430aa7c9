package sqfs

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// mapCache is a block cache in a map that counts the bytes it hands out.
type mapCache struct {
	mu    sync.Mutex
	m     map[[32]byte][]byte
	got   *atomic.Int64
	onGet func()
}

func (c *mapCache) Get(k [32]byte) ([]byte, bool) {
	c.mu.Lock()
	b, ok := c.m[k]
	c.mu.Unlock()
	if ok && c.got != nil {
		c.got.Add(int64(len(b)))
		c.onGet()
	}
	return b, ok
}

func (c *mapCache) Put(k [32]byte, b []byte) {
	c.mu.Lock()
	c.m[k] = b
	c.mu.Unlock()
}

// slowFile is an in-memory file that takes its time over each write.
type slowFile struct {
	buf     []byte
	pos     int64
	written atomic.Int64
}

func (f *slowFile) Write(p []byte) (int, error) {
	time.Sleep(5 * time.Millisecond)
	if end := f.pos + int64(len(p)); end > int64(len(f.buf)) {
		f.buf = append(f.buf, make([]byte, end-int64(len(f.buf)))...)
	}
	copy(f.buf[f.pos:], p)
	f.pos += int64(len(p))
	f.written.Add(int64(len(p)))
	return len(p), nil
}

func (f *slowFile) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		f.pos = off
	case io.SeekCurrent:
		f.pos += off
	default:
		return 0, fmt.Errorf("whence %d", whence)
	}
	return f.pos, nil
}

// Blocks taken from the cache faster than the image is written do not
// pile up in memory: what was handed out but not yet written stays within
// aheadBytes (and the writer's 1 MiB buffer), and the image is the same.
func TestBlocksAheadAreBounded(t *testing.T) {
	defer func(b int) { aheadBytes = b }(aheadBytes)
	aheadBytes = 256 << 10
	r := rand.New(rand.NewPCG(5, 6))
	es := []Entry{dir("/", 0o755, 0, 0)}
	for i := range 12 {
		data := make([]byte, 1<<20+i*4096)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		es = append(es, file(fmt.Sprintf("/f%02d", i), 0o644, data))
	}
	cache := &mapCache{m: map[[32]byte][]byte{}}
	o := Options{Cache: cache, Workers: 4}
	want := imageBytes(t, es, o) // fills the cache

	var got atomic.Int64
	f := &slowFile{}
	var maxAhead atomic.Int64
	cache.got, cache.onGet = &got, func() {
		if d := got.Load() - f.written.Load(); d > maxAhead.Load() {
			maxAhead.Store(d)
		}
	}
	if err := Write(f, es, o); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.buf, want) {
		t.Fatal("the image written slowly from the cache differs")
	}
	t.Logf("image %d bytes, at most %d handed out ahead of the writes", len(want), maxAhead.Load())
	if limit := int64(aheadBytes + 1<<20 + 8*defaultBlockSize); maxAhead.Load() > limit {
		t.Errorf("%d bytes handed out ahead of the writes, want at most %d", maxAhead.Load(), limit)
	}
}
