package xzdec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
)

// EncodeOptions say how Encode compresses.
type EncodeOptions struct {
	// Preset is xz's -0 ... -9 (6 is xz's default).
	Preset int
	// BlockSize is the uncompressed size of each Block (the last may be
	// shorter): 0 is xz's own default for the preset, three times its
	// dictionary (24 MiB at -6), what `xz -T2 -6` uses.
	BlockSize int
	// Threads is how many Blocks are compressed at once (0: 1). It
	// changes no byte of the output.
	Threads int
	// SpillDir is where a Block compressed ahead of its turn waits to be
	// written (in a file removed as it is made), as EncodeTo's output
	// must be written in order; "" keeps such Blocks in memory.
	SpillDir string
}

// LiblzmaVersion is the version of the vendored liblzma (upstream/).
const LiblzmaVersion = "5.4.1"

// ErrNoEncoder is what Encode returns in a build without cgo, which has
// no xz encoder of its own: callers fall back to another encoder (whose
// bytes differ) or refuse.
var ErrNoEncoder = errors.New("xz: this program was built without cgo and has no liblzma encoder")

var (
	errStopped    = errors.New("xz: stopped")
	errShortInput = errors.New("xz: the input ended before its size")
)

// presetDict is the dictionary size of each preset (liblzma's
// lzma_lzma_preset), which the default block size is three times.
var presetDict = [10]int{256 << 10, 1 << 20, 2 << 20, 4 << 20, 4 << 20, 8 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20}

// Encode compresses data as one .xz Stream (CRC64 checks) of independent
// Blocks of o.BlockSize bytes, o.Threads at a time (see EncodeTo): the
// bytes depend on data, the preset and the block size only, and are
// those `xz -T2 --block-size=N -P` (xz-utils 5.4.1) writes.
func Encode(data []byte, o EncodeOptions) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(encodeBound(len(data), max(o.BlockSize, 1<<20)))
	o.SpillDir = ""
	if err := EncodeTo(&b, bytes.NewReader(data), int64(len(data)), o); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// blockInfo is a compressed Block: its header, and its sizes for the
// Index.
type blockInfo struct {
	header                 []byte
	unpadded, uncompressed uint64
}

// EncodeTo writes to w the Stream Encode makes of the size bytes of src.
// Each of o.Threads goroutines runs one liblzma Block encoder (as a
// worker thread of liblzma's lzma_stream_encoder_mt, whose Blocks,
// Index and Stream these are byte for byte) over the Blocks it takes,
// reading its input a chunk at a time: memory is the threads' encoders
// (94 MiB each at -6), not their Blocks, whose output waits in
// o.SpillDir. On an error nothing more is written to w and every
// goroutine has ended; without cgo it returns ErrNoEncoder.
func EncodeTo(w io.Writer, src io.ReaderAt, size int64, o EncodeOptions) error {
	if o.Preset < 0 || o.Preset > 9 {
		return fmt.Errorf("xz: preset %d (0 to 9)", o.Preset)
	}
	if o.BlockSize < 0 || o.Threads < 0 || size < 0 {
		return fmt.Errorf("xz: block size %d, threads %d, size %d", o.BlockSize, o.Threads, size)
	}
	if !CanEncode {
		return ErrNoEncoder
	}
	if o.BlockSize == 0 {
		o.BlockSize = max(3*presetDict[o.Preset], 1<<20)
	}
	bs := int64(o.BlockSize)
	blocks := int((size + bs - 1) / bs)
	// More threads than Blocks would only allocate encoders.
	threads := min(max(o.Threads, 1), max(blocks, 1), 64)
	encoders := make([]*blockEncoder, 0, threads)
	defer func() {
		for _, e := range encoders {
			e.end()
		}
	}()
	for range threads {
		e, err := newBlockEncoder(o.Preset)
		if err != nil {
			return err
		}
		encoders = append(encoders, e)
	}
	type result struct {
		info blockInfo
		body *spill
		err  error
	}
	results := make([]chan result, blocks)
	for k := range results {
		results[k] = make(chan result, 1)
	}
	var next atomic.Int64
	var failed atomic.Bool
	stop := failed.Load
	// Blocks done but not yet written are at most twice the threads.
	ahead := make(chan struct{}, 2*threads)
	var wg sync.WaitGroup
	for _, e := range encoders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				ahead <- struct{}{}
				k := next.Add(1) - 1
				if k >= int64(blocks) {
					return
				}
				body, err := newSpill(o.SpillDir)
				var info blockInfo
				if err == nil {
					n := min(bs, size-k*bs)
					info, err = e.encode(io.NewSectionReader(src, k*bs, n), n, o.BlockSize, body, stop)
				}
				if err != nil {
					body.close()
					body = nil
				}
				results[k] <- result{info, body, err}
			}
		}()
	}
	err := func() error {
		if _, err := w.Write(streamHeader()); err != nil {
			return err
		}
		infos := make([]blockInfo, blocks)
		for k := range blocks {
			r := <-results[k]
			if r.err != nil {
				if errors.Is(r.err, errShortInput) {
					return fmt.Errorf("xz: the input ended before its %d bytes", size)
				}
				return r.err
			}
			infos[k] = r.info
			err := r.body.writeTo(w, r.info.header)
			r.body.close()
			<-ahead
			if err != nil {
				return err
			}
		}
		tail, err := streamTail(infos)
		if err == nil {
			_, err = w.Write(tail)
		}
		return err
	}()
	// Let every goroutine see the end (one waiting for room gets it),
	// then free what they left.
	failed.Store(true)
	go func() {
		for range ahead {
		}
	}()
	wg.Wait()
	close(ahead)
	for _, c := range results {
		select {
		case r := <-c:
			r.body.close()
		default:
		}
	}
	return err
}

// spill holds a Block's data until its turn: in a file of its
// directory, removed as soon as it is made, or in memory.
type spill struct {
	f   *os.File
	mem bytes.Buffer
}

func newSpill(dir string) (*spill, error) {
	if dir == "" {
		return &spill{}, nil
	}
	f, err := os.CreateTemp(dir, "xz-block-*")
	if err != nil {
		return nil, fmt.Errorf("xz: a Block's spill file: %w", err)
	}
	// Nothing is left behind, whatever happens after.
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("xz: a Block's spill file: %w", err)
	}
	return &spill{f: f}, nil
}

func (s *spill) Write(p []byte) (int, error) {
	if s.f != nil {
		return s.f.Write(p)
	}
	return s.mem.Write(p)
}

// writeTo writes header, then the Block's data, to w.
func (s *spill) writeTo(w io.Writer, header []byte) error {
	if _, err := w.Write(header); err != nil {
		return err
	}
	if s.f == nil {
		_, err := s.mem.WriteTo(w)
		return err
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err := io.Copy(w, s.f)
	return err
}

func (s *spill) close() {
	if s != nil && s.f != nil {
		s.f.Close()
	}
}

// encodeBound is room for the Stream of n bytes: LZMA2 stores what it
// cannot compress in chunks of 64 KiB behind 3-byte headers, each Block
// adds a header, padding and a check, and the Index grows by Block.
func encodeBound(n, blockSize int) int {
	return n + n/1024 + (n/blockSize+2)*1024 + 64<<10
}
