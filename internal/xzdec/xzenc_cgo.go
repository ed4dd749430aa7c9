//go:build cgo

package xzdec

/*
#include "xzenc.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"io"
	"unsafe"
)

// CanEncode says whether Encode works in this build: with cgo, liblzma's
// encoder.
const CanEncode = true

// EncoderModule names the encoder of this build, as builder/compressors
// records it.
const EncoderModule = "liblzma"

// blockEncoder is one liblzma Block encoder (C memory) and the Go
// buffers it reads and writes a chunk at a time.
type blockEncoder struct {
	b       unsafe.Pointer
	in, out []byte
}

// encodeChunk is how much input and output one call of the encoder
// takes: small beside the encoder's own memory.
const encodeChunk = 256 << 10

func newBlockEncoder(preset int) (*blockEncoder, error) {
	var ret C.int
	b := C.xzblk_new(C.uint32_t(preset), &ret)
	if b == nil {
		return nil, fmt.Errorf("xz: liblzma's encoder refused to start (lzma_ret %d)", int(ret))
	}
	return &blockEncoder{b: b, in: make([]byte, encodeChunk), out: make([]byte, encodeChunk)}, nil
}

// encode compresses the n bytes of r as one Block of a Stream of
// blockSize Blocks, writing its data (not its header) to w; stop, polled
// between chunks, abandons it.
func (e *blockEncoder) encode(r io.Reader, n int64, blockSize int, w io.Writer, stop func() bool) (blockInfo, error) {
	var hs C.uint32_t
	var bound C.uint64_t
	if ret := C.xzblk_start(e.b, C.uint64_t(blockSize), &hs, &bound); ret != 0 {
		return blockInfo{}, fmt.Errorf("xz: liblzma refused a Block (lzma_ret %d)", int(ret))
	}
	var written uint64
	for left := n; ; {
		if stop() {
			return blockInfo{}, errStopped
		}
		m := min(left, int64(len(e.in)))
		if _, err := io.ReadFull(r, e.in[:m]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = errShortInput
			}
			return blockInfo{}, err
		}
		left -= m
		done, err := e.code(e.in[:m], left == 0, w, &written)
		if err != nil {
			return blockInfo{}, err
		}
		if done {
			break
		}
	}
	// The threaded encoder would store a Block past its bound as
	// uncompressed LZMA2 chunks; LZMA2 already stores any chunk it cannot
	// shrink that way, so no Block comes near it.
	if uint64(hs)+written > uint64(bound) {
		return blockInfo{}, fmt.Errorf("xz: a Block of %d bytes came to %d, past liblzma's bound %d", n, written, uint64(bound))
	}
	info := blockInfo{header: make([]byte, hs)}
	var unpadded, uncompressed C.uint64_t
	if ret := C.xzblk_header(e.b, (*C.uint8_t)(unsafe.Pointer(&info.header[0])), &unpadded, &uncompressed); ret != 0 {
		return blockInfo{}, fmt.Errorf("xz: liblzma's Block header failed (lzma_ret %d)", int(ret))
	}
	info.unpadded, info.uncompressed = uint64(unpadded), uint64(uncompressed)
	return info, nil
}

// code gives p to the encoder (all of it, or with finish to the Block's
// end), writing what comes out to w; done says the Block ended.
func (e *blockEncoder) code(p []byte, finish bool, w io.Writer, written *uint64) (done bool, err error) {
	fin := C.int(0)
	if finish {
		fin = 1
	}
	for {
		var in *C.uint8_t
		if len(p) > 0 {
			in = (*C.uint8_t)(unsafe.Pointer(&p[0]))
		}
		var used, n C.size_t
		// p and out are Go memory that C uses during the call only.
		ret := C.xzblk_code(e.b, in, C.size_t(len(p)), &used, (*C.uint8_t)(unsafe.Pointer(&e.out[0])), C.size_t(len(e.out)), &n, fin)
		p = p[used:]
		if n > 0 {
			if _, err := w.Write(e.out[:n]); err != nil {
				return false, err
			}
			*written += uint64(n)
		}
		switch {
		case ret == 1 && finish: // LZMA_STREAM_END
			return true, nil
		case ret != 0:
			return false, fmt.Errorf("xz: liblzma's encoder failed (lzma_ret %d)", int(ret))
		case !finish && len(p) == 0:
			return false, nil
		}
	}
}

func (e *blockEncoder) end() { C.xzblk_end(e.b) }

// streamHeader is the Stream Header (CRC64 checks).
func streamHeader() []byte {
	h := make([]byte, 12)
	C.xzs_header((*C.uint8_t)(unsafe.Pointer(&h[0])))
	return h
}

// streamTail is the Index of blocks and the Stream Footer.
func streamTail(blocks []blockInfo) ([]byte, error) {
	unpadded := make([]C.uint64_t, len(blocks)+1)
	uncompressed := make([]C.uint64_t, len(blocks)+1)
	for i, b := range blocks {
		unpadded[i], uncompressed[i] = C.uint64_t(b.unpadded), C.uint64_t(b.uncompressed)
	}
	// An Index record is at most two 9-byte numbers.
	out := make([]byte, 64+18*len(blocks))
	var n C.size_t
	ret := C.xzs_tail(&unpadded[0], &uncompressed[0], C.size_t(len(blocks)), (*C.uint8_t)(unsafe.Pointer(&out[0])), C.size_t(len(out)), &n)
	if ret != 0 {
		return nil, fmt.Errorf("xz: liblzma's Index failed (lzma_ret %d)", int(ret))
	}
	return out[:n], nil
}
