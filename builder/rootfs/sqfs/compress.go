package sqfs

import (
	"bytes"
	"fmt"
	"runtime/debug"

	"github.com/klauspost/compress/zlib"
	"github.com/ulikunitz/xz"
)

// ZstdModule is the Go module that compresses zstd blocks in this build
// of the writer: github.com/DataDog/zstd (libzstd) with cgo,
// github.com/klauspost/compress without. Their bytes differ
// (builder/compressors says which one a release is built with).
const ZstdModule = zstdModule

// Compressor ids of the superblock.
const (
	compGzip = 1
	compXZ   = 4
	compZstd = 6
)

// codec describes the image's compressor; each worker makes its own
// compressor from it, since the encoders keep state.
type codec struct {
	name      string
	id        uint16
	level     int
	blockSize int
	// tag names the compressor, its settings and the library version: it
	// is part of every cache key, so a library upgrade that changes the
	// output cannot mix old and new blocks in one image.
	tag string
}

// compressor compresses one block; it is used by one goroutine at a time.
type compressor interface {
	// compress returns the compressed form of src, or nil when that is
	// not smaller than src (the block is then stored uncompressed).
	compress(src []byte) ([]byte, error)
}

func newCodec(name string, level, blockSize int) (*codec, error) {
	c := &codec{name: name, level: level, blockSize: blockSize}
	var mod string
	switch name {
	case "zstd":
		c.id, mod = compZstd, zstdModule
		if c.level == 0 {
			c.level = 15
		}
		if c.level < 1 || c.level > 22 {
			return nil, fmt.Errorf("sqfs: zstd level %d is not from 1 to 22", level)
		}
	case "gzip":
		c.id, mod = compGzip, "github.com/klauspost/compress"
		if c.level == 0 {
			c.level = 9
		}
		if c.level < 1 || c.level > 9 {
			return nil, fmt.Errorf("sqfs: gzip level %d is not from 1 to 9", level)
		}
	case "xz":
		c.id, mod = compXZ, "github.com/ulikunitz/xz"
		if c.level != 0 {
			return nil, fmt.Errorf("sqfs: xz takes no level here (got %d)", level)
		}
	default:
		return nil, fmt.Errorf("sqfs: unknown compressor %q (zstd, xz or gzip)", name)
	}
	c.tag = fmt.Sprintf("%s level %d block %d %s@%s", name, c.level, blockSize, mod, ModuleVersion(mod))
	return c, nil
}

// ModuleVersion reports the version of a dependency compiled in, or
// "unknown" when the binary carries no build information (a test binary
// carries none); builder/compressors names its compressors with it too.
func ModuleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == path {
				if m.Replace != nil {
					return m.Replace.Path + "@" + m.Replace.Version
				}
				return m.Version
			}
		}
	}
	return "unknown"
}

func (c *codec) newCompressor() (compressor, error) {
	switch c.id {
	case compZstd:
		return newZstdCompressor(c.level, c.blockSize)
	case compGzip:
		zw, err := zlib.NewWriterLevel(nil, c.level)
		if err != nil {
			return nil, fmt.Errorf("sqfs: zlib: %w", err)
		}
		return &zlibComp{zw: zw}, nil
	case compXZ:
		// Without compressor options the kernel preallocates a dictionary
		// of the block size; a larger declared dictionary fails. xz in
		// squashfs must use CRC32 checks.
		return &xzComp{cfg: xz.WriterConfig{DictCap: c.blockSize, CheckSum: xz.CRC32}}, nil
	}
	return nil, fmt.Errorf("sqfs: no compressor %d", c.id)
}

type zlibComp struct {
	zw  *zlib.Writer
	buf bytes.Buffer
}

func (z *zlibComp) compress(src []byte) ([]byte, error) {
	z.buf.Reset()
	z.zw.Reset(&z.buf)
	if _, err := z.zw.Write(src); err != nil {
		return nil, fmt.Errorf("sqfs: zlib: %w", err)
	}
	if err := z.zw.Close(); err != nil {
		return nil, fmt.Errorf("sqfs: zlib: %w", err)
	}
	if z.buf.Len() >= len(src) {
		return nil, nil
	}
	return bytes.Clone(z.buf.Bytes()), nil
}

type xzComp struct {
	cfg xz.WriterConfig
	buf bytes.Buffer
}

func (x *xzComp) compress(src []byte) ([]byte, error) {
	x.buf.Reset()
	w, err := x.cfg.NewWriter(&x.buf)
	if err != nil {
		return nil, fmt.Errorf("sqfs: xz: %w", err)
	}
	if _, err := w.Write(src); err != nil {
		return nil, fmt.Errorf("sqfs: xz: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("sqfs: xz: %w", err)
	}
	if x.buf.Len() >= len(src) {
		return nil, nil
	}
	return bytes.Clone(x.buf.Bytes()), nil
}
