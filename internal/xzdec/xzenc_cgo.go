//go:build cgo

package xzdec

/*
#cgo LDFLAGS: -lpthread
#include "xzenc.h"
*/
import "C"

import (
	"fmt"
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
