package xzdec

import (
	"errors"
	"fmt"
	"io"
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
}

// LiblzmaVersion is the version of the vendored liblzma (upstream/).
const LiblzmaVersion = "5.4.1"

// ErrNoEncoder is what Encode returns in a build without cgo, which has
// no xz encoder of its own: callers fall back to another encoder (whose
// bytes differ) or refuse.
var ErrNoEncoder = errors.New("xz: this program was built without cgo and has no liblzma encoder")

// presetDict is the dictionary size of each preset (liblzma's
// lzma_lzma_preset), which the default block size is three times.
var presetDict = [10]int{256 << 10, 1 << 20, 2 << 20, 4 << 20, 4 << 20, 8 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20}

// Encode compresses data as one .xz Stream (CRC64 checks) of independent
// Blocks of o.BlockSize bytes, compressed on o.Threads threads by
// liblzma's threaded encoder (lzma_stream_encoder_mt): the bytes depend
// on data, the preset and the block size only, not on the threads, and
// are those `xz -T2 --block-size=N -P` (xz-utils 5.4.1) writes.
func Encode(data []byte, o EncodeOptions) ([]byte, error) {
	if o.Preset < 0 || o.Preset > 9 {
		return nil, fmt.Errorf("xz: preset %d (0 to 9)", o.Preset)
	}
	if o.BlockSize < 0 || o.Threads < 0 {
		return nil, fmt.Errorf("xz: block size %d, threads %d", o.BlockSize, o.Threads)
	}
	if o.BlockSize == 0 {
		o.BlockSize = max(3*presetDict[o.Preset], 1<<20)
	}
	// More threads than Blocks would only allocate encoders.
	blocks := max(1, (len(data)+o.BlockSize-1)/o.BlockSize)
	o.Threads = min(max(o.Threads, 1), blocks, 64)
	return encode(data, o)
}

// Encoder writes the Stream Encode makes of what is written to it, as
// it comes: the bytes are Encode's of the whole input, and neither the
// input nor the Stream is ever whole in memory (liblzma holds
// o.Threads Blocks in and out). Close writes the Stream's end and frees
// the encoder; an Encoder that is not closed leaks its threads.
type Encoder struct {
	e      *encoder
	closed bool
}

// NewEncoder starts a Stream written to w (see Encode); size, when known
// (else 0), bounds the threads by the Blocks it makes. Without cgo it
// returns ErrNoEncoder.
func NewEncoder(w io.Writer, size int64, o EncodeOptions) (*Encoder, error) {
	if o.Preset < 0 || o.Preset > 9 {
		return nil, fmt.Errorf("xz: preset %d (0 to 9)", o.Preset)
	}
	if o.BlockSize < 0 || o.Threads < 0 || size < 0 {
		return nil, fmt.Errorf("xz: block size %d, threads %d, size %d", o.BlockSize, o.Threads, size)
	}
	if o.BlockSize == 0 {
		o.BlockSize = max(3*presetDict[o.Preset], 1<<20)
	}
	o.Threads = min(max(o.Threads, 1), 64)
	if size > 0 {
		o.Threads = min(o.Threads, int(max(1, (size+int64(o.BlockSize)-1)/int64(o.BlockSize))))
	}
	return newEncoder(w, o)
}

// Write compresses p; the first error of liblzma or of w is every later
// call's.
func (x *Encoder) Write(p []byte) (int, error) {
	if x.closed {
		return 0, errors.New("xz: write to a closed encoder")
	}
	if err := x.e.code(p, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close ends the Stream and frees the encoder.
func (x *Encoder) Close() error {
	if x.closed {
		return nil
	}
	x.closed = true
	defer x.e.end()
	return x.e.code(nil, true)
}

// encodeBound is room for the Stream of n bytes: LZMA2 stores what it
// cannot compress in chunks of 64 KiB behind 3-byte headers, each Block
// adds a header, padding and a check, and the Index grows by Block.
func encodeBound(n, blockSize int) int {
	return n + n/1024 + (n/blockSize+2)*1024 + 64<<10
}
