//go:build cgo

package xzdec

/*
#cgo CFLAGS: -DHAVE_CONFIG_H -I${SRCDIR}
#cgo CFLAGS: -I${SRCDIR}/upstream/src/common
#cgo CFLAGS: -I${SRCDIR}/upstream/src/liblzma/api
#cgo CFLAGS: -I${SRCDIR}/upstream/src/liblzma/common
#cgo CFLAGS: -I${SRCDIR}/upstream/src/liblzma/check
#cgo CFLAGS: -I${SRCDIR}/upstream/src/liblzma/lz
#cgo CFLAGS: -I${SRCDIR}/upstream/src/liblzma/rangecoder
#cgo CFLAGS: -I${SRCDIR}/upstream/src/liblzma/lzma
#cgo CFLAGS: -I${SRCDIR}/upstream/src/liblzma/delta
#cgo CFLAGS: -I${SRCDIR}/upstream/src/liblzma/simple

#include "xzdec.h"
#include <lzma.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"unsafe"
)

func newReader(r io.Reader, f Format, limit uint64, ignoreCheck bool) (io.ReadCloser, error) {
	return newCgoReader(r, f, limit, ignoreCheck)
}

// cgoReader decodes with liblzma. Its state, including the input buffer
// that liblzma reads from, is C memory; the output goes straight from
// liblzma into the caller's slice.
type cgoReader struct {
	mu      sync.Mutex
	src     io.Reader
	format  Format
	limit   uint64
	s       *C.xzdec_state
	cleanup runtime.Cleanup

	buf     []byte // Go-side input buffer, filled by src.Read
	cin     []byte // the C input buffer (C memory)
	availIn int    // bytes of cin liblzma hasn't consumed
	srcEOF  bool   // src has returned io.EOF
	srcErr  error  // src failed; returned once the input read before it is used
	outFull bool   // the last lzma_code call filled the output: it may have more without new input

	err error // sticky: io.EOF at the end, or the error Read returned
}

func newCgoReader(r io.Reader, f Format, limit uint64, ignoreCheck bool) (*cgoReader, error) {
	ignore := C.int(0)
	if ignoreCheck {
		ignore = 1
	}
	res := C.xzdec_new(C.int(f), C.uint64_t(limit), ignore)
	if res.state == nil {
		return nil, lzmaError(res.ret, f, limit, nil)
	}
	d := &cgoReader{
		src:    r,
		format: f,
		limit:  limit,
		s:      res.state,
		buf:    make([]byte, C.XZDEC_INBUF_SIZE),
		cin:    unsafe.Slice((*byte)(unsafe.Pointer(C.xzdec_inbuf(res.state))), C.XZDEC_INBUF_SIZE),
	}
	// A safety net only: Close is the contract.
	d.cleanup = runtime.AddCleanup(d, func(s *C.xzdec_state) { C.xzdec_free(s) }, res.state)
	return d, nil
}

// Read decodes into p.
func (d *cgoReader) Read(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return 0, d.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	empty := 0
	for {
		newIn := 0
		// liblzma returns LZMA_BUF_ERROR after two calls in a row that
		// make no progress, so call it without new input only when it
		// may have output left or the input has ended.
		if d.availIn == 0 && !d.srcEOF && !d.outFull {
			if d.srcErr != nil {
				d.err = d.srcErr
				return 0, d.err
			}
			n, err := d.src.Read(d.buf)
			newIn = copy(d.cin, d.buf[:n])
			if err == io.EOF {
				d.srcEOF = true
			} else if err != nil {
				d.srcErr = err
			}
			if n == 0 && !d.srcEOF {
				if empty++; empty >= maxEmptyReads && d.srcErr == nil {
					d.err = io.ErrNoProgress
					return 0, d.err
				}
				continue
			}
		}
		finish := C.int(0)
		if d.srcEOF {
			finish = 1
		}
		res := C.xzdec_code(d.s, C.size_t(newIn), (*C.uint8_t)(unsafe.Pointer(&p[0])), C.size_t(len(p)), finish)
		n := int(res.out_n)
		d.availIn = int(res.avail_in)
		d.outFull = n == len(p)
		switch res.ret {
		case C.LZMA_OK:
			if n > 0 {
				return n, nil
			}
		case C.LZMA_STREAM_END:
			d.err = d.end()
			if n > 0 {
				return n, nil
			}
			return 0, d.err
		default:
			d.err = lzmaError(res.ret, d.format, d.limit, d.s)
			return n, d.err
		}
	}
}

// end checks what follows the end of the stream: io.EOF if nothing.
// liblzma's .xz decoder reports the end only once all the input is
// consumed, but the .lzma decoder stops at the end of the LZMA data.
func (d *cgoReader) end() error {
	if d.availIn > 0 {
		return errTrailing
	}
	for empty := 0; !d.srcEOF; {
		if d.srcErr != nil {
			return d.srcErr
		}
		n, err := d.src.Read(d.buf)
		if n > 0 {
			return errTrailing
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if empty++; empty >= maxEmptyReads {
			return io.ErrNoProgress
		}
	}
	return io.EOF
}

// Close frees the decoder. Read returns an error after Close.
func (d *cgoReader) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.s == nil {
		return nil
	}
	d.cleanup.Stop()
	C.xzdec_free(d.s)
	d.s = nil
	d.cin = nil
	d.err = errClosed
	return nil
}

// lzmaError maps a liblzma return code to an error. s, if not nil, is the
// decoder that returned it.
func lzmaError(ret C.int, f Format, limit uint64, s *C.xzdec_state) error {
	switch ret {
	case C.LZMA_DATA_ERROR:
		if f == XZ && s != nil && C.xzdec_check_failed(s) != 0 {
			return errCheck
		}
		return errCorrupt
	case C.LZMA_BUF_ERROR:
		return errTruncated
	case C.LZMA_FORMAT_ERROR:
		return notFormat(f)
	case C.LZMA_OPTIONS_ERROR:
		return errOptions
	case C.LZMA_MEMLIMIT_ERROR:
		need := uint64(0)
		if s != nil {
			need = uint64(C.xzdec_memusage(s))
		}
		return memLimitError(need, limit)
	case C.LZMA_MEM_ERROR:
		return errors.New("xz: out of memory")
	}
	return fmt.Errorf("xz: liblzma error %d", int(ret))
}
