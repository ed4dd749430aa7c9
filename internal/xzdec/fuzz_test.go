package xzdec

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// fuzzOutputLimit bounds what one input may decode to.
const fuzzOutputLimit = 1 << 20

// fuzzMemLimit keeps the decoders' dictionaries small while fuzzing.
const fuzzMemLimit = 64 << 20

// FuzzNewReader decodes arbitrary input as .xz or .lzma with NewReader
// and, in cgo builds, with the pure Go decoder too: neither may crash or
// hang, and when both succeed they must agree. The seed corpus is in
// testdata/fuzz/FuzzNewReader.
func FuzzNewReader(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, lzmaFormat bool) {
		format := XZ
		if lzmaFormat {
			format = LZMA
		}
		r, err := newReader(bytes.NewReader(data), format, fuzzMemLimit, false)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fuzzDecode(t, r)
		if !haveCgo {
			return
		}
		pureGot, pureErr := fuzzDecode(t, newPureReader(bytes.NewReader(data), format, fuzzMemLimit))
		if err == nil && pureErr == nil && !bytes.Equal(got, pureGot) {
			t.Fatalf("liblzma and ulikunitz/xz decode to different data (%d and %d bytes)", len(got), len(pureGot))
		}
	})
}

// fuzzDecode reads at most fuzzOutputLimit bytes with odd buffer sizes,
// then checks that the error sticks and closes r.
func fuzzDecode(t *testing.T, r io.ReadCloser) ([]byte, error) {
	defer r.Close()
	var out []byte
	buf := make([]byte, 3000)
	var err error
	for len(out) < fuzzOutputLimit {
		var n int
		n, err = r.Read(buf[:min(len(buf), fuzzOutputLimit-len(out), 1+len(out)%len(buf))])
		out = append(out, buf[:n]...)
		if err != nil {
			break
		}
	}
	if err == io.EOF {
		err = nil
	} else if err != nil {
		if n, err2 := r.Read(buf); n != 0 || err2 != err {
			t.Fatalf("after %v, Read returns %d, %v", err, n, err2)
		}
		if errors.Is(err, errClosed) {
			t.Fatal(err)
		}
	}
	return out, err
}
