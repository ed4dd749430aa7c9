package xzdec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/ulikunitz/xz/lzma"

	"github.com/nodeforge/builder/internal/testutil"
)

// decoder is one implementation under test.
type decoder struct {
	name string
	open func(io.Reader, Format) (io.ReadCloser, error)
	pure bool // ulikunitz/xz: LZMA2 is the only filter it decodes
}

// decoders are NewReader and, in cgo builds, the pure Go decoder as well.
func decoders() []decoder {
	ds := []decoder{{name: "NewReader", open: NewReader, pure: !haveCgo}}
	if haveCgo {
		ds = append(ds, decoder{name: "pure", pure: true,
			open: func(r io.Reader, f Format) (io.ReadCloser, error) {
				return newPureReader(r, f, memLimit), nil
			}})
	}
	return ds
}

// xzTool runs the real xz on stdin, failing the test if it fails.
func xzTool(t testing.TB, stdin []byte, args ...string) []byte {
	t.Helper()
	out, err := runXZ(t, stdin, args...)
	if err != nil {
		t.Fatalf("xz %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// runXZ runs the real xz on stdin. It skips the test without xz, or fails
// it in CI.
func runXZ(t testing.TB, stdin []byte, args ...string) ([]byte, error) {
	t.Helper()
	return runXZPath(testutil.NeedTool(t, "xz"), stdin, args...)
}

// runXZPath runs the xz at path on stdin.
func runXZPath(path string, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.Command(path, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// textData is n bytes of compressible but not trivial data: lines of
// words and numbers, runs of structured binary and some noise.
func textData(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	words := strings.Fields("the xz format stores blocks of lzma2 data with a check " +
		"package builder func return error nil index stream footer padding " +
		"kernel module squashfs rootfs signature release version")
	var b bytes.Buffer
	for b.Len() < n {
		switch rng.IntN(8) {
		case 0: // structured binary: a table of growing integers
			v := rng.Uint32()
			for range 16 + rng.IntN(64) {
				v += uint32(rng.IntN(300))
				b.Write(binary.LittleEndian.AppendUint32(nil, v))
			}
		case 1: // noise
			for range 8 + rng.IntN(56) {
				b.WriteByte(byte(rng.Uint32()))
			}
		default:
			for range 4 + rng.IntN(12) {
				b.WriteString(words[rng.IntN(len(words))])
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%d\n", rng.IntN(100000))
		}
	}
	return b.Bytes()[:n]
}

// randomData is n incompressible bytes.
func randomData(n int, seed uint64) []byte {
	b := make([]byte, n)
	rng := rand.New(rand.NewPCG(seed, 2))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// binaryData is n bytes of real machine code: the test binary itself.
func binaryData(t testing.TB, n int) []byte {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < n {
		t.Fatalf("%s has %d bytes, want %d", exe, len(b), n)
	}
	return b[:n]
}

// decodeAll decodes in with d, reading into buffers of readSize bytes
// (all at once if 0).
func decodeAll(d decoder, in io.Reader, f Format, readSize int) ([]byte, error) {
	r, err := d.open(in, f)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if readSize == 0 {
		return io.ReadAll(r)
	}
	var out []byte
	buf := make([]byte, readSize)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

type roundTrip struct {
	name   string
	data   []byte
	args   []string // xz options
	format Format
	// pureErr is the error of ulikunitz/xz, which decodes no BCJ or
	// Delta filter; nil if it decodes the stream.
	pureErr error
}

func roundTrips(t *testing.T) []roundTrip {
	text := textData(256<<10, 1)
	bin := binaryData(t, 256<<10)
	var rts []roundTrip
	for _, p := range []string{"-0", "-1", "-6", "-9", "-9e"} {
		rts = append(rts, roundTrip{name: "preset" + p, data: text, args: []string{p}})
	}
	for _, c := range []string{"crc32", "crc64", "sha256", "none"} {
		rts = append(rts, roundTrip{name: "check-" + c, data: text, args: []string{"-1", "--check=" + c}})
	}
	for _, f := range []string{"--x86", "--arm", "--armthumb", "--arm64", "--powerpc", "--ia64", "--sparc"} {
		rts = append(rts, roundTrip{name: "bcj" + f[1:], data: bin,
			args: []string{f, "--lzma2=preset=6"}, pureErr: errOptions})
	}
	rts = append(rts,
		roundTrip{name: "delta", data: textData(64<<10, 7),
			args: []string{"--delta=dist=4", "--lzma2=preset=1"}, pureErr: errOptions},
		roundTrip{name: "x86-delta-chain", data: bin,
			args: []string{"--x86", "--delta=dist=2", "--lzma2=preset=1"}, pureErr: errOptions},
		roundTrip{name: "blocks", data: text, args: []string{"-1", "--block-size=16KiB"}},
		// Multithreaded xz writes the Compressed Size in Block Headers.
		roundTrip{name: "threaded", data: text, args: []string{"-1", "-T2", "--block-size=40000"}},
		roundTrip{name: "incompressible", data: randomData(200<<10, 3), args: []string{"-6"}},
		roundTrip{name: "empty", data: nil, args: []string{"-6"}},
		roundTrip{name: "lzma", data: text, args: []string{"--format=lzma", "-6"}, format: LZMA},
		roundTrip{name: "lzma-lc0lp2", data: bin, args: []string{"--format=lzma", "--lzma1=preset=1,lc=0,lp=2,pb=2"}, format: LZMA},
		roundTrip{name: "lzma-empty", data: nil, args: []string{"--format=lzma"}, format: LZMA},
	)
	return rts
}

func TestRoundTrip(t *testing.T) {
	testutil.Slow(t)
	// Every decoder against the real xz, 23 streams read four ways: the
	// decoders start no goroutines, and TestConcurrentReaders runs them
	// side by side under -race.
	testutil.NoRace(t)
	for _, rt := range roundTrips(t) {
		t.Run(rt.name, func(t *testing.T) {
			comp := xzTool(t, rt.data, append([]string{"-z", "-c"}, rt.args...)...)
			// The real xz judges its own output first.
			if got := xzTool(t, comp, "-d", "-c", "--format="+rt.format.String()); !bytes.Equal(got, rt.data) {
				t.Fatal("xz -d doesn't give the input back")
			}
			for _, d := range decoders() {
				for _, mode := range []string{"bulk", "onebyte"} {
					t.Run(d.name+"/"+mode, func(t *testing.T) {
						var in io.Reader = bytes.NewReader(comp)
						readSize := 0
						if mode == "onebyte" {
							in, readSize = iotest.OneByteReader(in), 1
						}
						got, err := decodeAll(d, in, rt.format, readSize)
						if d.pure && rt.pureErr != nil {
							if !errors.Is(err, rt.pureErr) {
								t.Fatalf("err = %v, want %v", err, rt.pureErr)
							}
							return
						}
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(got, rt.data) {
							t.Fatalf("decoded %d bytes, differ from the %d input bytes", len(got), len(rt.data))
						}
					})
				}
			}
		})
	}
}

// TestReaders feeds the compressed data through the readers of
// testing/iotest and reads with odd buffer sizes.
func TestReaders(t *testing.T) {
	data := textData(300<<10, 11)
	for _, format := range []Format{XZ, LZMA} {
		comp := xzTool(t, data, "-z", "-c", "-3", "--format="+format.String())
		wrap := map[string]func(io.Reader) io.Reader{
			"half":     iotest.HalfReader,
			"dataerr":  iotest.DataErrReader,
			"timeout":  func(r io.Reader) io.Reader { return &retryTimeout{r: iotest.TimeoutReader(r)} },
			"emptyish": func(r io.Reader) io.Reader { return &emptyReads{r: r} },
		}
		for name, w := range wrap {
			for _, d := range decoders() {
				for _, size := range []int{7, 4096, 100000} {
					t.Run(fmt.Sprintf("%s/%s/%s/%d", format, name, d.name, size), func(t *testing.T) {
						got, err := decodeAll(d, w(bytes.NewReader(comp)), format, size)
						if err != nil {
							t.Fatal(err)
						}
						if !bytes.Equal(got, data) {
							t.Fatal("output differs")
						}
					})
				}
			}
		}
	}
}

// retryTimeout retries the one read that iotest.TimeoutReader fails.
type retryTimeout struct{ r io.Reader }

func (r *retryTimeout) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err == iotest.ErrTimeout {
		return r.r.Read(p)
	}
	return n, err
}

// emptyReads returns (0, nil) before every read with data.
type emptyReads struct {
	r    io.Reader
	flip bool
}

func (e *emptyReads) Read(p []byte) (int, error) {
	if e.flip = !e.flip; e.flip {
		return 0, nil
	}
	return e.r.Read(p)
}

func TestMultistream(t *testing.T) {
	a, b := textData(100<<10, 21), textData(50<<10, 22)
	xa := xzTool(t, a, "-z", "-c", "-6", "--check=crc64")
	xb := xzTool(t, b, "-z", "-c", "-1", "--check=sha256")
	xe := xzTool(t, nil, "-z", "-c")
	la := xzTool(t, a, "-z", "-c", "--format=lzma")
	zeros := func(n int) []byte { return make([]byte, n) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	cases := []struct {
		name   string
		in     []byte
		format Format
		want   []byte // nil: an error
	}{
		{"two", cat(xa, xb), XZ, cat(a, b)},
		{"three-with-empty", cat(xa, xe, xb), XZ, cat(a, b)},
		{"padding", cat(xa, zeros(4), xb, zeros(8)), XZ, cat(a, b)},
		{"padding-not-4", cat(xa, zeros(3)), XZ, nil},
		{"padding-first", cat(zeros(4), xa), XZ, nil},
		{"trailing-garbage", cat(xa, []byte("this is no xz stream at all")), XZ, nil},
		{"trailing-short-garbage", cat(xa, []byte("xy")), XZ, nil},
		{"trailing-stream-start", cat(xa, xb[:20]), XZ, nil},
		{"lzma-trailing-garbage", cat(la, []byte("garbage")), LZMA, nil},
		{"lzma-two", cat(la, la), LZMA, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Like xz -d.
			xzOut, xzErr := runXZ(t, c.in, "-d", "-c", "--format="+c.format.String())
			if c.want == nil && xzErr == nil {
				t.Fatal("xz -d accepts it")
			}
			if c.want != nil && (xzErr != nil || !bytes.Equal(xzOut, c.want)) {
				t.Fatalf("xz -d: %v", xzErr)
			}
			for _, d := range decoders() {
				got, err := decodeAll(d, bytes.NewReader(c.in), c.format, 0)
				if c.want == nil {
					if err == nil {
						t.Errorf("%s: no error", d.name)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s: %v", d.name, err)
				} else if !bytes.Equal(got, c.want) {
					t.Errorf("%s: output differs", d.name)
				}
			}
		})
	}
}

// checkOffset returns where the Check of the only Block of a single-stream
// .xz file starts, and its size.
func checkOffset(t *testing.T, x []byte) (int, int) {
	t.Helper()
	footer := x[len(x)-12:]
	backward := (int(binary.LittleEndian.Uint32(footer[4:8])) + 1) * 4
	size := int(checkSize(footer[9] & 0x0F))
	return len(x) - 12 - backward - size, size
}

func TestErrors(t *testing.T) {
	data := textData(200<<10, 31)
	x := xzTool(t, data, "-z", "-c", "-6")
	l := xzTool(t, data, "-z", "-c", "--format=lzma")
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[i] ^= 0x55
		return b
	}
	checkAt, checkLen := checkOffset(t, x)
	if checkLen != 8 {
		t.Fatalf("check size %d, want 8 (CRC64)", checkLen)
	}
	// An LZMA2 dictionary of 4 GiB in the Block Header.
	hugeDict := bytes.Clone(x)
	hs := (int(hugeDict[12]) + 1) * 4
	if hugeDict[13] != 0 || hugeDict[14] != 0x21 || hugeDict[15] != 1 {
		t.Fatalf("unexpected Block Header % x", hugeDict[12:12+hs])
	}
	hugeDict[16] = 40
	binary.LittleEndian.PutUint32(hugeDict[12+hs-4:], crc32.ChecksumIEEE(hugeDict[12:12+hs-4]))

	// .lzma header: lc=3 lp=0 pb=2, a 4 GiB dictionary, unknown size.
	lzmaHuge := append([]byte{0x5D, 0xFF, 0xFF, 0xFF, 0xFF}, bytes.Repeat([]byte{0xFF}, 8)...)
	lzmaHuge = append(lzmaHuge, l[13:100]...)

	cases := []struct {
		name   string
		in     []byte
		format Format
		want   []error // any of them
		xzOK   bool    // xz -d accepts it
	}{
		{"flip-middle", flip(x, len(x)/2), XZ, []error{errCorrupt, errCheck}, false},
		{"flip-check", flip(x, checkAt+3), XZ, []error{errCheck}, false},
		{"flip-header", flip(x, 8), XZ, []error{errCorrupt}, false},
		{"truncated-half", x[:len(x)/2], XZ, []error{errTruncated}, false},
		{"truncated-footer", x[:len(x)-1], XZ, []error{errTruncated}, false},
		{"truncated-header", x[:5], XZ, []error{errTruncated}, false},
		{"garbage", []byte("this is not an xz stream, just text"), XZ, []error{errNotXZ}, false},
		{"huge-dict", hugeDict, XZ, []error{errMemLimit}, false},
		{"lzma-flip-middle", flip(l, len(l)/2), LZMA, []error{errCorrupt}, false},
		{"lzma-truncated", l[:len(l)/2], LZMA, []error{errTruncated}, false},
		{"lzma-truncated-header", l[:7], LZMA, []error{errTruncated}, false},
		{"lzma-garbage", []byte("\xffthis is no lzma stream"), LZMA, []error{errNotLZMA}, false},
		{"lzma-huge-dict", lzmaHuge, LZMA, []error{errMemLimit}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// xz -d judges the input first. Its own limit is larger
			// than ours, so give it ours.
			_, xzErr := runXZ(t, c.in, "-d", "-c", "--memlimit=1GiB", "--format="+c.format.String())
			if (xzErr == nil) != c.xzOK {
				t.Fatalf("xz -d: %v", xzErr)
			}
			for _, d := range decoders() {
				r, err := d.open(bytes.NewReader(c.in), c.format)
				if err != nil {
					t.Fatal(err)
				}
				_, err = io.Copy(io.Discard, r)
				t.Logf("%s: %v", d.name, err)
				if !isAny(err, c.want) {
					t.Errorf("%s: err = %v, want %v", d.name, err, c.want)
					r.Close()
					continue
				}
				// The error sticks.
				if n, err2 := r.Read(make([]byte, 10)); n != 0 || err2 != err {
					t.Errorf("%s: read after the error: %d, %v", d.name, n, err2)
				}
				if errors.Is(err, errMemLimit) && !strings.Contains(err.Error(), "limit is 1024 MiB") {
					t.Errorf("%s: %v doesn't name the limit", d.name, err)
				}
				if err := r.Close(); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// TestMemLimit checks the limit on a stream xz -9 wrote (65 MiB): fine
// with the default limit, refused with a lower one.
func TestMemLimit(t *testing.T) {
	data := textData(64<<10, 41)
	x := xzTool(t, data, "-z", "-c", "-9")
	l := xzTool(t, data, "-z", "-c", "-9", "--format=lzma")
	for _, f := range []Format{XZ, LZMA} {
		in := x
		if f == LZMA {
			in = l
		}
		readers := map[string]func() io.ReadCloser{
			"pure": func() io.ReadCloser { return newPureReader(bytes.NewReader(in), f, 32<<20) },
		}
		if haveCgo {
			readers["NewReader"] = func() io.ReadCloser {
				r, err := newReader(bytes.NewReader(in), f, 32<<20, false)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
		}
		for name, open := range readers {
			r := open()
			_, err := io.Copy(io.Discard, r)
			r.Close()
			if !errors.Is(err, errMemLimit) || !strings.Contains(err.Error(), "needs 65 MiB, the limit is 32 MiB") {
				t.Errorf("%s %s: err = %v", f, name, err)
			}
		}
	}
}

// TestLZMAKnownSize decodes .lzma streams that store the uncompressed
// size and have no end marker, which xz never writes but other encoders
// (here ulikunitz/xz) do.
func TestLZMAKnownSize(t *testing.T) {
	data := textData(150<<10, 71)
	var enc bytes.Buffer
	w, err := lzma.WriterConfig{SizeInHeader: true, Size: int64(len(data))}.NewWriter(&enc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	in := enc.Bytes()
	if got := binary.LittleEndian.Uint64(in[5:13]); got != uint64(len(data)) {
		t.Fatalf("header size %d", got)
	}
	if got := xzTool(t, in, "-d", "-c", "--format=lzma"); !bytes.Equal(got, data) {
		t.Fatal("xz -d doesn't decode it")
	}
	for _, d := range decoders() {
		for _, size := range []int{0, 1, 777} {
			got, err := decodeAll(d, bytes.NewReader(in), LZMA, size)
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("%s/%d: %d bytes, %v", d.name, size, len(got), err)
			}
		}
		trailing := append(bytes.Clone(in), 0)
		if _, err := decodeAll(d, bytes.NewReader(trailing), LZMA, 0); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: trailing byte: %v", d.name, err)
		}
	}
	if _, err := runXZ(t, append(bytes.Clone(in), 0), "-d", "-c", "--format=lzma"); err == nil {
		t.Error("xz -d accepts a trailing byte")
	}
}

var errBoom = errors.New("boom")

// failingReader returns its data, then err.
type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	if len(f.data) == 0 {
		return n, f.err // data and the error together
	}
	return n, nil
}

func TestSourceError(t *testing.T) {
	data := textData(100<<10, 51)
	x := xzTool(t, data, "-z", "-c", "-6")
	for _, d := range decoders() {
		for _, f := range []Format{XZ, LZMA} {
			in := x
			if f == LZMA {
				in = xzTool(t, data, "-z", "-c", "--format=lzma")
			}
			got, err := decodeAll(d, &failingReader{data: in[:len(in)/2], err: errBoom}, f, 0)
			if !errors.Is(err, errBoom) {
				t.Errorf("%s %s: err = %v, want %v", d.name, f, err, errBoom)
			}
			// ulikunitz/xz drops the output it decoded before an
			// error, so only liblzma is sure to give some.
			if (!d.pure && len(got) == 0) || !bytes.HasPrefix(data, got) {
				t.Errorf("%s %s: %d bytes before the error, not a prefix of the data", d.name, f, len(got))
			}
		}
	}
}

func TestCloseAndReadEdgeCases(t *testing.T) {
	x := xzTool(t, []byte("hello, world\n"), "-z", "-c")
	for _, d := range decoders() {
		r, err := d.open(bytes.NewReader(x), XZ)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := r.Read(nil); n != 0 || err != nil {
			t.Errorf("%s: Read(nil) = %d, %v", d.name, n, err)
		}
		buf := make([]byte, 5)
		if n, err := r.Read(buf); n != 5 || err != nil || string(buf) != "hello" {
			t.Errorf("%s: Read = %d, %v, %q", d.name, n, err, buf[:n])
		}
		if err := r.Close(); err != nil {
			t.Error(err)
		}
		if err := r.Close(); err != nil {
			t.Errorf("%s: second Close: %v", d.name, err)
		}
		if _, err := r.Read(buf); !errors.Is(err, errClosed) {
			t.Errorf("%s: Read after Close: %v", d.name, err)
		}
	}
	if _, err := NewReader(bytes.NewReader(x), Format(7)); err == nil {
		t.Error("NewReader accepts Format(7)")
	}
}

// TestConcurrentReaders decodes in parallel goroutines (for -race).
func TestConcurrentReaders(t *testing.T) {
	data := textData(200<<10, 61)
	x := xzTool(t, data, "-z", "-c", "-6")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			d := decoders()[i%len(decoders())]
			got, err := decodeAll(d, bytes.NewReader(x), XZ, 1000+i)
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("%s: %v", d.name, err)
			}
		})
	}
	wg.Wait()
}

// TestUncheckedReader: a wrong Check (SHA-256, as rpm writes) fails
// NewReader; NewUncheckedReader, with liblzma, decodes the data; a broken
// header fails both.
func TestUncheckedReader(t *testing.T) {
	data := textData(300<<10, 7)
	x := xzTool(t, data, "-z", "-c", "-6", "--check=sha256")
	at, n := checkOffset(t, x)
	if n != 32 {
		t.Fatalf("check size %d, want 32 (SHA-256)", n)
	}
	bad := bytes.Clone(x)
	bad[at+5] ^= 1
	if _, err := io.ReadAll(mustOpen(t, NewReader, bad)); !errors.Is(err, errCheck) {
		t.Errorf("NewReader: %v, want %v", err, errCheck)
	}
	got, err := io.ReadAll(mustOpen(t, NewUncheckedReader, bad))
	switch {
	case !haveCgo:
		if !errors.Is(err, errCheck) {
			t.Errorf("pure NewUncheckedReader: %v, want %v (it always checks)", err, errCheck)
		}
	case err != nil || !bytes.Equal(got, data):
		t.Errorf("NewUncheckedReader: %v, %d bytes of %d", err, len(got), len(data))
	}
	if got, err := io.ReadAll(mustOpen(t, NewUncheckedReader, x)); err != nil || !bytes.Equal(got, data) {
		t.Errorf("NewUncheckedReader, good stream: %v", err)
	}
	head := bytes.Clone(bad)
	head[8] ^= 0x55
	if _, err := io.ReadAll(mustOpen(t, NewUncheckedReader, head)); !errors.Is(err, errCorrupt) {
		t.Errorf("NewUncheckedReader, broken Stream Header: %v, want %v", err, errCorrupt)
	}
	if _, err := NewUncheckedReader(bytes.NewReader(x), Format(9)); err == nil {
		t.Error("an unknown format was accepted")
	}
}

func mustOpen(t *testing.T, open func(io.Reader, Format) (io.ReadCloser, error), b []byte) io.Reader {
	t.Helper()
	r, err := open(bytes.NewReader(b), XZ)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
