package rpmfile

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"

	"github.com/nodeforge/builder/internal/xzdec"
)

// MaxPayloadSize bounds a decompressed payload: 64 GiB is far beyond any
// real package and stops decompression bombs from filling memory or disk.
const MaxPayloadSize = 64 << 30

// Decompress wraps a compressed payload stream. compressor is the value of
// PAYLOADCOMPRESSOR; the stream's magic bytes are checked against it, so a
// mislabelled payload fails clearly instead of producing garbage.
func Decompress(compressor string, r io.Reader) (io.ReadCloser, error) {
	return decompress(compressor, r, false)
}

// decompress is Decompress; digested says that the caller checks the
// compressed payload's digest as it reads it, which makes xz's own
// integrity checks redundant: they are skipped (xzdec.NewUncheckedReader).
func decompress(compressor string, r io.Reader, digested bool) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, _ := br.Peek(6)
	var rc io.ReadCloser
	switch compressor {
	case "gzip":
		if !bytes.HasPrefix(magic, []byte{0x1f, 0x8b}) {
			// rpm reads "gzip" payloads through zlib, which passes
			// uncompressed data through: packages built with w.ufdio
			// say gzip and store plain cpio.
			rc = io.NopCloser(br)
			break
		}
		z, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip payload: %w", err)
		}
		z.Multistream(true)
		rc = z
	case "bzip2":
		if !bytes.HasPrefix(magic, []byte("BZh")) {
			return nil, fmt.Errorf("payload says bzip2 but starts with % x", magic)
		}
		rc = io.NopCloser(bzip2.NewReader(br))
	case "xz":
		if !bytes.HasPrefix(magic, []byte{0xfd, '7', 'z', 'X', 'Z', 0}) {
			return nil, fmt.Errorf("payload says xz but starts with % x", magic)
		}
		// liblzma (cgo) decodes at twice the speed of a Go decoder; xz and
		// lzma are what ALT's packages carry.
		open := xzdec.NewReader
		if digested {
			open = xzdec.NewUncheckedReader
		}
		z, err := open(br, xzdec.XZ)
		if err != nil {
			return nil, fmt.Errorf("xz payload: %w", err)
		}
		rc = z
	case "lzma":
		z, err := xzdec.NewReader(br, xzdec.LZMA)
		if err != nil {
			return nil, fmt.Errorf("lzma payload: %w", err)
		}
		rc = z
	case "zstd":
		if !bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}) {
			return nil, fmt.Errorf("payload says zstd but starts with % x", magic)
		}
		z, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(1<<30))
		if err != nil {
			return nil, fmt.Errorf("zstd payload: %w", err)
		}
		rc = z.IOReadCloser()
	case "", "identity", "none":
		rc = io.NopCloser(br)
	default:
		return nil, fmt.Errorf("unsupported payload compressor %q", compressor)
	}
	return &limitedReadCloser{rc: rc, left: MaxPayloadSize}, nil
}

// ErrTooLarge reports a payload past MaxPayloadSize.
var ErrTooLarge = errors.New("decompressed payload exceeds the size limit")

type limitedReadCloser struct {
	rc   io.ReadCloser
	left int64
}

func (l *limitedReadCloser) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.rc.Read(p)
	l.left -= int64(n)
	return n, err
}

func (l *limitedReadCloser) Close() error { return l.rc.Close() }
