//go:build !cgo

package sqfs

import (
	"bytes"
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// zstdModule is the zstd implementation of a build without cgo:
// klauspost's pure-Go encoder. Its images are valid but 5-9% larger than
// libzstd's, and the bytes differ from a cgo build's (the cache key and the
// build report name the library, and builder/compressors refuses such a
// builder for releases).
const zstdModule = "github.com/klauspost/compress"

type zstdComp struct {
	enc     *zstd.Encoder
	scratch []byte
}

func newZstdCompressor(level, blockSize int) (compressor, error) {
	// The kernel decompresses with a window of max(block size, 8 KiB):
	// the encoder's window must not be larger. No frame checksum:
	// mksquashfs writes none either, and it costs 4 bytes a block.
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(false),
		zstd.WithWindowSize(blockSize),
	)
	if err != nil {
		return nil, fmt.Errorf("sqfs: zstd: %w", err)
	}
	return &zstdComp{enc: enc}, nil
}

func (z *zstdComp) compress(src []byte) ([]byte, error) {
	z.scratch = z.enc.EncodeAll(src, z.scratch[:0])
	if len(z.scratch) >= len(src) {
		return nil, nil
	}
	// A copy of the exact size: blocks are held until the image is written.
	return bytes.Clone(z.scratch), nil
}
