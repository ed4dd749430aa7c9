package compose

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"

	"github.com/nodeforge/builder/internal/atomicfile"
)

// FileLayer is a gzip image layer made straight into a file: the tar
// streams through sha256 (its diff ID) into gzip, whose stream goes
// through sha256 (the blob's digest) into the file. Neither is ever whole
// in memory (an installer's tar is the initramfs and the UKI, which
// embeds it again: twice the root filesystem), and the OCI layout links
// the file as the blob (ocilayout.HashedFile). Its bytes are
// NewImageLayer's for the same tar (tested).
type FileLayer struct {
	path           string
	size           int64
	diffID, digest v1.Hash
}

// NewFileLayer writes the tar that write writes as a layer into path, a
// new file of mode 0644; on an error nothing is left there.
func NewFileLayer(path string, write func(io.Writer) error) (l *FileLayer, err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			l = nil
		}
	}()
	// The mode a blob has, whatever the umask: the layout links the file.
	if err := f.Chmod(0o644); err != nil {
		return nil, err
	}
	// The tar is hashed, and the gzip stream hashed and written, on other
	// goroutines while gzip compresses: most of the stream is stored
	// blocks of compressed data, which cost gzip little more than a copy.
	tarSum, gzSum := sha256.New(), sha256.New()
	out := &countWriter{w: io.MultiWriter(f, gzSum)}
	tarW, outW := newAsyncWriter(tarSum), newAsyncWriter(out)
	bw := bufio.NewWriterSize(outW, 1<<20)
	// As NewImageLayer: no name and no time in the header.
	zw, err := gzip.NewWriterLevel(bw, gzip.DefaultCompression)
	if err == nil {
		err = write(io.MultiWriter(tarW, zw))
	}
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	terr, oerr := tarW.Close(), outW.Close()
	if err == nil {
		err = errors.Join(terr, oerr)
	}
	if err != nil {
		return nil, err
	}
	// The layout links the file and syncs it: its 300 MB go to disk now.
	atomicfile.StartWriteback(f)
	return &FileLayer{path: path, size: out.n, diffID: sha256Hash(tarSum.Sum(nil)), digest: sha256Hash(gzSum.Sum(nil))}, nil
}

func sha256Hash(sum []byte) v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum)}
}

func (l *FileLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *FileLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *FileLayer) Size() (int64, error)                { return l.size, nil }
func (l *FileLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }
func (l *FileLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }

// Uncompressed is the tar, read back from the file.
func (l *FileLayer) Uncompressed() (io.ReadCloser, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	return GunzipLayer(f)
}

// HashedFile is the file the layout links as the blob.
func (l *FileLayer) HashedFile() string { return l.path }

// countWriter counts what it passes on.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// asyncWriter passes what is written to w on another goroutine, so that
// w's work (hashing, writing a file) overlaps the writer's (compressing):
// Write copies its input into one of a few 1 MiB pieces and returns. The
// first error of w is Close's; what follows it is dropped.
type asyncWriter struct {
	w    io.Writer
	ch   chan []byte
	free chan []byte
	done chan struct{}
	err  error // w's first error, read after done
}

// asyncPieces are how many 1 MiB pieces an asyncWriter has.
const asyncPieces = 4

func newAsyncWriter(w io.Writer) *asyncWriter {
	a := &asyncWriter{w: w, ch: make(chan []byte, asyncPieces), free: make(chan []byte, asyncPieces), done: make(chan struct{})}
	for range asyncPieces {
		a.free <- make([]byte, 0, 1<<20)
	}
	go func() {
		defer close(a.done)
		for b := range a.ch {
			if a.err == nil {
				_, a.err = a.w.Write(b)
			}
			a.free <- b[:0]
		}
	}()
	return a
}

// Write reports no error: Close does.
func (a *asyncWriter) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		b := <-a.free
		n := min(len(rest), cap(b))
		a.ch <- append(b, rest[:n]...)
		rest = rest[n:]
	}
	return len(p), nil
}

// Close waits for the last bytes; no Write may follow.
func (a *asyncWriter) Close() error {
	close(a.ch)
	<-a.done
	return a.err
}
