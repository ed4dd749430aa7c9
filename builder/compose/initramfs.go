package compose

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/nodeforge/builder/internal/hugepage"
)

// CompressInitramfs compresses what write writes (the cpio, streamed into
// the encoder): zstd (what Talos uses) or xz with CRC32, the check the
// kernel's xz decoder always supports. sizeHint is about the input size.
func CompressInitramfs(algo string, sizeHint int, write func(io.Writer) error) ([]byte, error) {
	buf := bytes.NewBuffer(hugepage.Bytes(sizeHint + sizeHint/32 + 1<<20)[:0])
	if err := CompressInitramfsTo(buf, algo, write); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// CompressInitramfsTo is CompressInitramfs writing to out as it goes.
func CompressInitramfsTo(out io.Writer, algo string, write func(io.Writer) error) error {
	var w io.WriteCloser
	var err error
	switch algo {
	case "zstd":
		// One encoder goroutine: the bytes must not depend on the cores. The
		// fastest level: most of the archive is rootfs.sqsh, compressed already
		// (0.06% larger than the default level on the benchmark base).
		w, err = zstd.NewWriter(out, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	case "xz":
		w, err = xz.WriterConfig{CheckSum: xz.CRC32}.NewWriter(out)
	default:
		return fmt.Errorf("unknown initramfs compression %q", algo)
	}
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return w.Close()
}
