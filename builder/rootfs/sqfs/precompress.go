package sqfs

import (
	"errors"
	"sync"
)

// Precompressor compresses the whole data blocks of files into the cache
// before the image is written, so that a core waiting for the tree (while
// packages are being laid, say) already does the writer's work. It puts
// exactly what Write would put under the same keys (fileBlockKey), so the
// image is the same whether a block came from here, from an earlier build
// or from Write itself.
//
// Files smaller than a block go into fragment blocks, which depend on
// their neighbours: those are left to Write.
type Precompressor struct {
	o     Options
	c     *codec
	mu    sync.Mutex
	cond  *sync.Cond
	queue []job
	stop  bool
	wg    sync.WaitGroup
}

// NewPrecompressor starts workers goroutines compressing into opts.Cache,
// which must be set, with the options Write will be given.
func NewPrecompressor(opts Options, workers int) (*Precompressor, error) {
	if opts.Cache == nil {
		return nil, errors.New("sqfs: precompressing needs a cache")
	}
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	c, err := newCodec(o.Compressor, o.Level, o.BlockSize)
	if err != nil {
		return nil, err
	}
	p := &Precompressor{o: o, c: c}
	p.cond = sync.NewCond(&p.mu)
	for range max(workers, 1) {
		comp, err := c.newCompressor()
		if err != nil {
			p.Stop()
			return nil, err
		}
		p.wg.Add(1)
		go p.work(comp)
	}
	return p, nil
}

// Add queues the blocks of a file whose sha256 is digest. data must not
// change afterwards.
func (p *Precompressor) Add(data []byte, digest [32]byte) {
	bs := p.o.BlockSize
	if len(data) < bs || digest == ([32]byte{}) {
		return
	}
	d := &digest
	p.mu.Lock()
	for off := 0; off < len(data); off += bs {
		p.queue = append(p.queue, job{data: data[off:min(off+bs, len(data))], digest: d, index: off / bs})
	}
	p.mu.Unlock()
	p.cond.Broadcast()
}

// Stop drops what is still queued and returns when the blocks being
// compressed are in the cache.
func (p *Precompressor) Stop() {
	p.mu.Lock()
	p.stop, p.queue = true, nil
	p.mu.Unlock()
	p.cond.Broadcast()
	p.wg.Wait()
}

func (p *Precompressor) work(comp compressor) {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		for len(p.queue) == 0 && !p.stop {
			p.cond.Wait()
		}
		if p.stop {
			p.mu.Unlock()
			return
		}
		j := p.queue[0]
		p.queue = p.queue[1:]
		p.mu.Unlock()

		if isZero(j.data) {
			continue // sparse: Write stores nothing
		}
		key := fileBlockKey(p.c.tag, j.digest, j.index)
		if h, ok := p.o.Cache.(interface{ Has([32]byte) bool }); ok && h.Has(key) {
			continue
		}
		out, err := comp.compress(j.data)
		if err != nil {
			continue // Write will meet the error itself
		}
		if out == nil {
			out = j.data // stored uncompressed, as Write does
		}
		p.o.Cache.Put(key, out)
	}
}
