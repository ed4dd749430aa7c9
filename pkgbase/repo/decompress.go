package repo

import (
	"bufio"
	"compress/bzip2"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/nodeforge/builder/internal/xzdec"
)

// MaxIndexSize is the default cap on the decompressed size of one index file.
// Fedora's primary.xml is a few hundred MB; anything past 4 GiB is treated as
// a decompression bomb.
const MaxIndexSize = 4 << 30

// zstdMaxWindow caps the memory a zstd frame header may ask for.
const zstdMaxWindow = 1 << 28

// ErrTooLarge is wrapped by errors of readers that passed their size limit.
var ErrTooLarge = errors.New("size limit exceeded")

// Decompress returns a reader of r's content decompressed according to name's
// suffix (.gz, .xz, .zst, .bz2, .lzma; anything else is passed through), that
// fails past MaxIndexSize decompressed bytes. Closing it releases the
// decompressor (which may hold memory outside the Go heap: it must be
// closed) but does not close r.
func Decompress(name string, r io.Reader) (io.ReadCloser, error) {
	return DecompressLimit(name, r, MaxIndexSize)
}

// DecompressLimit is Decompress with a custom limit on the decompressed size
// (limit <= 0 means MaxIndexSize).
func DecompressLimit(name string, r io.Reader, limit int64) (io.ReadCloser, error) {
	if limit <= 0 {
		limit = MaxIndexSize
	}
	var (
		dr    io.Reader
		close func()
	)
	// Decompressors read a byte at a time; buffer the source so each byte
	// is not a system call. Reading ahead is harmless: callers drain the
	// compressed stream to check its digest anyway.
	r = bufio.NewReaderSize(r, 256<<10)
	lower := strings.ToLower(name)
	switch {
	case strings.HasSuffix(lower, ".gz"):
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%s: gzip: %w", name, err)
		}
		dr, close = z, func() { z.Close() }
	case strings.HasSuffix(lower, ".xz"):
		// liblzma (internal/xzdec): ALT's pkglists are xz, and the pure
		// Go decoder is a few times slower.
		z, err := xzdec.NewReader(r, xzdec.XZ)
		if err != nil {
			return nil, fmt.Errorf("%s: xz: %w", name, err)
		}
		dr, close = z, func() { z.Close() }
	case strings.HasSuffix(lower, ".zst"):
		z, err := zstd.NewReader(r, zstd.WithDecoderMaxWindow(zstdMaxWindow), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("%s: zstd: %w", name, err)
		}
		dr, close = z, z.Close
	case strings.HasSuffix(lower, ".bz2"):
		dr = bzip2.NewReader(r)
	case strings.HasSuffix(lower, ".lzma"):
		z, err := xzdec.NewReader(r, xzdec.LZMA)
		if err != nil {
			return nil, fmt.Errorf("%s: lzma: %w", name, err)
		}
		dr, close = z, func() { z.Close() }
	case strings.HasSuffix(lower, ".zck"):
		// dnf reads zchunk variants too, but repomd.xml always lists a
		// plain compressed one beside it.
		return nil, fmt.Errorf("%s: zchunk compression is not supported", name)
	default:
		dr = r
	}
	return &decompressReader{r: LimitReader(dr, limit, name), name: name, close: close}, nil
}

// decompressReader names the file in decompression errors and makes a
// premature end of a compressed stream an error rather than a silent EOF.
type decompressReader struct {
	r     io.Reader
	name  string
	close func()
}

func (d *decompressReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	switch {
	case err == nil, err == io.EOF:
	case errors.Is(err, ErrTooLarge):
		// LimitReader's message already names the file.
	case err == io.ErrUnexpectedEOF:
		err = fmt.Errorf("%s: truncated compressed data: %w", d.name, err)
	default:
		err = fmt.Errorf("%s: decompress: %w", d.name, err)
	}
	return n, err
}

func (d *decompressReader) Close() error {
	if d.close != nil {
		d.close()
		d.close = nil
	}
	return nil
}

// LimitReader returns a reader of r that fails with an error wrapping
// ErrTooLarge (naming name) once r yields more than limit bytes. Unlike
// io.LimitReader it never silently truncates.
func LimitReader(r io.Reader, limit int64, name string) io.Reader {
	return &limitReader{r: r, left: limit, limit: limit, name: name}
}

type limitReader struct {
	r     io.Reader
	left  int64 // bytes still allowed
	limit int64
	name  string
	err   error // sticky: the byte past the limit has been consumed
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	// Ask for one byte past the limit so reaching it exactly is not an error
	// but going past it is.
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	if int64(n) > l.left {
		n = int(l.left)
		l.left = 0
		l.err = fmt.Errorf("%s: data exceeds %d bytes: %w", l.name, l.limit, ErrTooLarge)
		return n, l.err
	}
	l.left -= int64(n)
	return n, err
}
