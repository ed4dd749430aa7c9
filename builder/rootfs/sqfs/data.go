package sqfs

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
)

const (
	noFragment   = 0xffffffff
	blockRawFlag = 1 << 24 // a data or fragment block stored uncompressed
)

// fileLayout says where a regular file's data is. Identical files share
// one layout.
type fileLayout struct {
	size    uint64
	first   int // index of its first block job
	nblocks int
	frag    uint32 // fragment block index, or noFragment
	fragOff uint32

	// Known once the blocks are compressed.
	start  uint64   // image offset of the first block
	sizes  []uint32 // on-disk size words, one per block
	sparse uint64   // bytes of all-zero blocks not stored
}

// job is one data or fragment block, in image order.
type job struct {
	data []byte // a data block: part of a file's Data
	// digest and index name a data block by its file's sha256 and its
	// place in the file, when the caller gave the digest.
	digest *[32]byte
	index  int
	parts  []fragPart // a fragment block: the small files it holds
	frag   bool

	out  []byte // the bytes stored in the image
	size uint32 // on-disk size word: 0 for a sparse block
	pos  uint64 // image offset
}

// dataSection is the image's data area: blocks in order, fragment blocks
// by index.
type dataSection struct {
	jobs  []job
	frags []int // job index of each fragment block
	end   uint64
}

// writeData lays out every file's data, compresses the blocks in parallel
// (or takes them from the cache) and places them after the superblock.
// With a sink, each block is handed to it in image order as soon as it and
// every block before it are ready, and then let go: the compressed image
// is never whole in memory. Without one, the blocks stay in the jobs.
func writeData(t *tree, o Options, c *codec, sink func([]byte) error) (*dataSection, error) {
	d := plan(t, o)
	pos := uint64(superblockSize)
	err := compressAll(d.jobs, o, c, func(j *job) error {
		j.pos = pos
		pos += uint64(len(j.out))
		if sink == nil {
			return nil
		}
		err := sink(j.out)
		j.out = nil
		return err
	})
	if err != nil {
		return nil, err
	}
	d.end = pos
	for _, in := range t.files {
		f := in.file
		if f.sizes != nil || f.nblocks == 0 {
			continue // shared with an identical file, or no blocks
		}
		f.start = d.jobs[f.first].pos
		f.sizes = make([]uint32, f.nblocks)
		for k := range f.nblocks {
			j := &d.jobs[f.first+k]
			f.sizes[k] = j.size
			if j.size == 0 {
				f.sparse += uint64(len(j.data))
			}
		}
	}
	return d, nil
}

// plan decides the block jobs in image order. Files of a block or more
// are stored as whole blocks, the last one short, as mksquashfs does by
// default; smaller files go into fragment blocks. A file identical to an
// earlier one shares its blocks.
func plan(t *tree, o Options) *dataSection {
	bs := o.BlockSize
	d := &dataSection{}
	dups := findDuplicates(t.files, o.Workers)
	fp := fragPacker{blockSize: bs}
	closeFrag := func(parts []fragPart) {
		if len(parts) == 0 {
			return
		}
		idx := uint32(len(d.frags))
		for _, p := range parts {
			p.file.frag = idx
		}
		d.frags = append(d.frags, len(d.jobs))
		d.jobs = append(d.jobs, job{parts: parts, frag: true})
	}
	for i, in := range t.files {
		if first := dups[i]; first >= 0 {
			in.file = t.files[first].file
			continue
		}
		data := in.e.Data
		f := &fileLayout{size: uint64(len(data)), frag: noFragment}
		in.file = f
		switch {
		case len(data) == 0:
		case len(data) < bs:
			closeFrag(fp.add(in.e.Path, f, data))
		default:
			f.first = len(d.jobs)
			var dg *[32]byte
			if in.e.Digest != ([32]byte{}) {
				dg = &in.e.Digest
			}
			for off := 0; off < len(data); off += bs {
				d.jobs = append(d.jobs, job{data: data[off:min(off+bs, len(data))], digest: dg, index: off / bs})
			}
			f.nblocks = len(d.jobs) - f.first
		}
	}
	closeFrag(fp.flush())
	return d
}

// findDuplicates returns for each file the index of the first earlier file
// with the same content, or -1. Only files whose size occurs more than
// once are hashed.
func findDuplicates(files []*inode, workers int) []int {
	out := make([]int, len(files))
	bySize := map[int]int{}
	for _, in := range files {
		bySize[len(in.e.Data)]++
	}
	var todo []int
	for i, in := range files {
		out[i] = -1
		if n := len(in.e.Data); n > 0 && bySize[n] > 1 {
			todo = append(todo, i)
		}
	}
	sums := make([][32]byte, len(files))
	parallel(len(todo), workers, func(k int) error {
		i := todo[k]
		if sums[i] = files[i].e.Digest; sums[i] == ([32]byte{}) {
			sums[i] = sha256.Sum256(files[i].e.Data)
		}
		return nil
	})
	first := map[[32]byte]int{}
	for _, i := range todo {
		if j, ok := first[sums[i]]; ok && bytes.Equal(files[i].e.Data, files[j].e.Data) {
			out[i] = j
			continue
		}
		first[sums[i]] = i
	}
	return out
}

// compressAll fills out and size of every job and calls emit for each, in
// job order, from one goroutine. Each worker has its own compressor;
// results land in the job's slot, so the image does not depend on the
// number of workers or the scheduling.
func compressAll(jobs []job, o Options, c *codec, emit func(*job) error) error {
	workers := min(o.Workers, max(len(jobs), 1))
	comps := make([]compressor, workers)
	scratch := make([][]byte, workers)
	for w := range comps {
		cc, err := c.newCompressor()
		if err != nil {
			return err
		}
		comps[w] = cc
	}
	ready := make([]chan struct{}, len(jobs))
	for i := range ready {
		ready[i] = make(chan struct{})
	}
	var stopped atomic.Bool // emit failed: the rest is not needed
	// Workers take a token before each job and the emitter gives one back
	// after each block it emits: finished blocks waiting for their turn
	// stay under aheadBytes. A rebuild takes blocks from the cache faster
	// than the emitter writes them, and held the compressed image in
	// memory before.
	ahead := make(chan struct{}, max(2*workers, aheadBytes/max(o.BlockSize, 1)+workers))
	quit := make(chan struct{})
	var quitOnce sync.Once
	stop := func() { quitOnce.Do(func() { close(quit) }) }
	var werr error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		werr = parallelGated(len(jobs), workers, func() bool {
			select {
			case ahead <- struct{}{}:
				return true
			case <-quit:
				return false
			}
		}, func(w, i int) error {
			defer close(ready[i])
			if stopped.Load() {
				return errStopped
			}
			err := compressJob(&jobs[i], o, c, comps[w], &scratch[w])
			if err != nil {
				stop()
			}
			return err
		})
	}()
	var eerr error
	for i := range jobs {
		select {
		case <-ready[i]:
		case <-finished:
			if werr != nil {
				return werr
			}
			<-ready[i] // every job is done
		}
		if eerr = emit(&jobs[i]); eerr != nil {
			stopped.Store(true)
			stop()
			break
		}
		<-ahead
	}
	<-finished
	if eerr != nil {
		return eerr
	}
	return werr
}

// aheadBytes bounds the blocks compressed (or read from the cache) ahead
// of the one the emitter waits for (a variable for the tests).
var aheadBytes = 32 << 20

var errStopped = errors.New("sqfs: stopped")

// compressJob compresses one block, or takes it from the cache.
func compressJob(j *job, o Options, c *codec, comp compressor, scratch *[]byte) error {
	src := j.data
	if j.frag {
		buf := (*scratch)[:0]
		for _, p := range j.parts {
			buf = append(buf, p.data...)
		}
		*scratch = buf
		src = buf
	} else if isZero(src) {
		return nil // sparse: size 0, nothing stored
	}
	var key [32]byte
	if o.Cache != nil {
		if j.digest != nil {
			key = fileBlockKey(c.tag, j.digest, j.index)
		} else {
			key = blockKey(c.tag, src)
		}
		if v, ok := o.Cache.Get(key); ok && len(v) > 0 && len(v) <= len(src) {
			j.setOut(v, len(v) == len(src))
			return nil
		}
	}
	out, err := comp.compress(src)
	if err != nil {
		return err
	}
	raw := out == nil
	if raw {
		out = src
		if j.frag {
			out = bytes.Clone(src) // src is this worker's scratch
		}
	}
	j.setOut(out, raw)
	if o.Cache != nil {
		o.Cache.Put(key, out)
	}
	return nil
}

func (j *job) setOut(out []byte, raw bool) {
	j.out = out
	j.size = uint32(len(out))
	if raw {
		j.size |= blockRawFlag
	}
}

var zeroBlock [1 << 20]byte

func isZero(b []byte) bool { return bytes.Equal(b, zeroBlock[:len(b)]) }

// blockKey is the cache key of a block: its bytes and everything that
// decides how they are compressed.
func blockKey(tag string, src []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte("sqfs block v1\x00"))
	h.Write([]byte(tag))
	h.Write([]byte{0})
	h.Write(src)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// fileBlockKey is the cache key of block index of a file whose sha256 is
// digest: the same bytes as blockKey names, without reading them.
func fileBlockKey(tag string, digest *[32]byte, index int) [32]byte {
	h := sha256.New()
	h.Write([]byte("sqfs file block v1\x00"))
	h.Write([]byte(tag))
	h.Write([]byte{0})
	h.Write(digest[:])
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(index)))
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// parallel runs fn(0..n-1) on up to workers goroutines and returns the
// error of the lowest index that failed, so the message does not depend on
// scheduling either.
func parallel(n, workers int, fn func(i int) error) error {
	return parallelW(n, workers, func(_, i int) error { return fn(i) })
}

// parallelW is parallel, also telling fn which worker (0..workers-1) runs it.
func parallelW(n, workers int, fn func(w, i int) error) error {
	return parallelGated(n, workers, nil, fn)
}

// parallelGated is parallelW whose workers call gate (when not nil) before
// taking each index, so indexes are taken in the order the gate lets
// workers through; a worker that gate refuses stops.
func parallelGated(n, workers int, gate func() bool, fn func(w, i int) error) error {
	workers = max(1, min(workers, n))
	var next atomic.Int64
	var failed atomic.Bool
	type failure struct {
		i   int
		err error
	}
	fails := make([]failure, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				if gate != nil && !gate() {
					return
				}
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(w, i); err != nil {
					fails[w] = failure{i, err}
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	var first *failure
	for k := range fails {
		if f := &fails[k]; f.err != nil && (first == nil || f.i < first.i) {
			first = f
		}
	}
	if first != nil {
		return first.err
	}
	return nil
}
