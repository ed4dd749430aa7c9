//go:build cgo

package xzdec

/*
#cgo LDFLAGS: -lpthread
#include "xzenc.h"
*/
import "C"

import (
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

func encode(data []byte, o EncodeOptions) ([]byte, error) {
	out := make([]byte, encodeBound(len(data), o.BlockSize))
	var in *C.uint8_t
	if len(data) > 0 {
		in = (*C.uint8_t)(unsafe.Pointer(&data[0]))
	}
	var n C.size_t
	// data and out are Go memory that C uses during the call only (they
	// hold no Go pointers): see xzenc.h.
	ret := C.xzenc_encode(in, C.size_t(len(data)), (*C.uint8_t)(unsafe.Pointer(&out[0])), C.size_t(len(out)), &n,
		C.uint32_t(o.Preset), C.uint64_t(o.BlockSize), C.uint32_t(o.Threads))
	if ret != 0 {
		return nil, fmt.Errorf("xz: liblzma's encoder failed (lzma_ret %d) on %d bytes", int(ret), len(data))
	}
	return out[:n:n], nil
}

// encoder is liblzma's threaded encoder, given its input in pieces.
type encoder struct {
	strm unsafe.Pointer // C memory: xzenc_new's
	w    io.Writer
	out  []byte
	err  error
}

func newEncoder(w io.Writer, o EncodeOptions) (*Encoder, error) {
	var ret C.int
	strm := C.xzenc_new(C.uint32_t(o.Preset), C.uint64_t(o.BlockSize), C.uint32_t(o.Threads), &ret)
	if strm == nil {
		return nil, fmt.Errorf("xz: liblzma's encoder refused to start (lzma_ret %d)", int(ret))
	}
	e := &encoder{strm: strm, w: w, out: make([]byte, 1<<20)}
	return &Encoder{e: e}, nil
}

// code runs liblzma on p (all of it, or with finish to the Stream's end),
// writing what comes out to w.
func (e *encoder) code(p []byte, finish bool) error {
	if e.err != nil {
		return e.err
	}
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
		ret := C.xzenc_code(e.strm, in, C.size_t(len(p)), &used, (*C.uint8_t)(unsafe.Pointer(&e.out[0])), C.size_t(len(e.out)), &n, fin)
		p = p[used:]
		if n > 0 {
			if _, err := e.w.Write(e.out[:n]); err != nil {
				e.err = err
				return err
			}
		}
		switch {
		case ret == 1 && finish: // LZMA_STREAM_END
			return nil
		case ret != 0:
			e.err = fmt.Errorf("xz: liblzma's encoder failed (lzma_ret %d)", int(ret))
			return e.err
		case !finish && len(p) == 0:
			return nil
		}
	}
}

func (e *encoder) end() {
	if e.strm != nil {
		C.xzenc_end(e.strm)
		e.strm = nil
	}
}
