package factory

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// HoldBack is how much of a blob's end a verifiedReader keeps until the
// whole blob has matched its digest.
const HoldBack = 64 << 10

// ErrDamaged is wrapped by a verifiedReader's error when a blob's bytes
// do not match its descriptor.
var ErrDamaged = errors.New("damaged or tampered")

// verifiedReader passes a blob's bytes on as they are read, but holds
// back its last bytes until all of it has been read and matched its size
// and digest: a reader never receives the whole of a damaged blob, so a
// client sees a cut transfer, never a complete wrong file.
type verifiedReader struct {
	r    io.Reader
	want v1.Descriptor
	h    hash.Hash
	read int64  // bytes read from r
	tail []byte // the held-back end, once verified
	err  error
}

func newVerifiedReader(r io.Reader, want v1.Descriptor) *verifiedReader {
	return &verifiedReader{r: r, want: want, h: sha256.New()}
}

func (v *verifiedReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if len(v.tail) > 0 || v.read >= v.want.Size-min(v.want.Size, HoldBack) {
		if v.tail == nil {
			if v.err = v.finish(); v.err != nil {
				return 0, v.err
			}
		}
		if len(v.tail) == 0 {
			v.err = io.EOF
			return 0, io.EOF
		}
		n := copy(p, v.tail)
		v.tail = v.tail[n:]
		return n, nil
	}
	if rest := v.want.Size - HoldBack - v.read; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.read += int64(n)
	if err == io.EOF {
		v.err = v.wrongSize(fmt.Sprint(v.read))
		return n, v.err
	}
	if err != nil {
		v.err = fmt.Errorf("blob %s: %w", v.want.Digest, err)
	}
	return n, v.err
}

// finish reads the held-back end and checks the whole blob.
func (v *verifiedReader) finish() error {
	tail := make([]byte, v.want.Size-v.read)
	n, err := io.ReadFull(v.r, tail)
	v.h.Write(tail[:n])
	v.read += int64(n)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return fmt.Errorf("blob %s: %w", v.want.Digest, err)
	}
	if n < len(tail) {
		return v.wrongSize(fmt.Sprint(v.read))
	}
	// Nothing may follow: a longer blob is as wrong as a shorter one.
	var extra [1]byte
	if m, _ := io.ReadFull(v.r, extra[:]); m > 0 {
		return v.wrongSize(fmt.Sprint("more than ", v.read))
	}
	if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want.Digest.Hex {
		return fmt.Errorf("blob %s: its bytes hash to sha256:%s: %w", v.want.Digest, got, ErrDamaged)
	}
	v.tail = tail
	if len(tail) == 0 {
		v.tail = []byte{}
	}
	return nil
}

func (v *verifiedReader) wrongSize(got string) error {
	return fmt.Errorf("blob %s: %s bytes where %d were expected: %w", v.want.Digest, got, v.want.Size, ErrDamaged)
}

// verifiedReadCloser is a verifiedReader that closes what it reads.
type verifiedReadCloser struct {
	*verifiedReader
	io.Closer
}

// Verified wraps an opened blob in a verifiedReader.
func Verified(rc io.ReadCloser, want v1.Descriptor) io.ReadCloser {
	return verifiedReadCloser{newVerifiedReader(rc, want), rc}
}
