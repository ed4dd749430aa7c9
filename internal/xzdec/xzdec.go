// Package xzdec decodes .xz streams and legacy .lzma ("lzma_alone")
// streams.
//
// With cgo it runs liblzma's own decoder, compiled from the decoder-only
// subset of the xz-utils sources vendored in upstream/ (see README.md), so
// it decodes at liblzma speed and needs no system library. Without cgo
// (CGO_ENABLED=0) the same API is served by the pure Go
// github.com/ulikunitz/xz, which is slower and decodes only the filter
// chain that xz uses by default (LZMA2 alone: no BCJ or Delta filters).
//
// Both decoders behave like xz -d: concatenated .xz streams and stream
// padding are decoded, anything else after the last stream is an error,
// and a stream that needs more than 1 GiB of decoder memory (more than
// ten times what xz -9 needs) is refused before that memory is allocated.
package xzdec

import (
	"errors"
	"fmt"
	"io"
)

// Format of a compressed stream.
type Format int

const (
	// XZ is the .xz format (one or more concatenated streams).
	XZ Format = iota
	// LZMA is the legacy .lzma format, also known as lzma_alone.
	LZMA
)

func (f Format) String() string {
	switch f {
	case XZ:
		return "xz"
	case LZMA:
		return "lzma"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// memLimit is the most memory a decoder may use: liblzma's memlimit, and
// for the pure Go decoder the largest dictionary plus pureOverhead.
// Streams that xz -9 writes need 65 MiB.
const memLimit = 1 << 30

// NewReader returns a reader of the decompressed stream r in format f.
//
// Errors in the compressed stream, including a bad header, are returned
// by Read; once Read has returned an error it returns it again on every
// call. Close frees the decoder, whose memory lives outside the Go heap
// with cgo, and must be called; it doesn't close r.
func NewReader(r io.Reader, f Format) (io.ReadCloser, error) {
	return open(r, f, false)
}

// NewUncheckedReader is NewReader for a stream whose caller verifies what
// it decodes by other means (an RPM payload, whose digest is checked as
// it is read): the decoder may skip the .xz Streams' integrity checks.
// rpm writes SHA-256 checks, which liblzma computes in software: about a
// sixth of the decoding time. Everything else is checked as by NewReader.
func NewUncheckedReader(r io.Reader, f Format) (io.ReadCloser, error) {
	return open(r, f, true)
}

func open(r io.Reader, f Format, ignoreCheck bool) (io.ReadCloser, error) {
	if f != XZ && f != LZMA {
		return nil, fmt.Errorf("xz: unknown format %d", int(f))
	}
	return newReader(r, f, memLimit, ignoreCheck)
}

// Errors returned by Read. Both decoders map their errors to these, so
// callers and tests can rely on errors.Is whichever decoder is built.
var (
	errCorrupt   = errors.New("xz: data is corrupt")
	errTruncated = errors.New("xz: unexpected end of input")
	errCheck     = errors.New("xz: check mismatch")
	errMemLimit  = errors.New("xz: memory limit exceeded")
	errOptions   = errors.New("xz: unsupported options")
	errNotXZ     = errors.New("xz: not an xz stream")
	errNotLZMA   = errors.New("xz: not an lzma stream")
	errClosed    = errors.New("xz: read after Close")
	// errTrailing is what follows the end of a .lzma stream: like xz -d,
	// refuse it.
	errTrailing = fmt.Errorf("%w (trailing data after the end of the stream)", errCorrupt)
)

// memLimitError reports a stream that needs more memory than limit.
func memLimitError(need, limit uint64) error {
	return fmt.Errorf("%w (the stream needs %d MiB, the limit is %d MiB)",
		errMemLimit, (need+(1<<20)-1)>>20, limit>>20)
}

// notFormat is the error for input that isn't a stream of format f.
func notFormat(f Format) error {
	if f == LZMA {
		return errNotLZMA
	}
	return errNotXZ
}

// inBufSize is the size of the input buffers.
const inBufSize = 64 << 10

// maxEmptyReads is how many (0, nil) reads of the source are tolerated in
// a row before Read gives up with io.ErrNoProgress, like bufio does.
const maxEmptyReads = 100
