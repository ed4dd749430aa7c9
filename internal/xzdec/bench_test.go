package xzdec

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/ulikunitz/xz"

	"github.com/nodeforge/builder/internal/testutil"
)

// benchSize is how much data BenchmarkDecode decodes.
const benchSize = 64 << 20

var bench struct {
	once     sync.Once
	raw, enc []byte
	err      error
}

// benchData is ~64 MiB of executables from /usr/bin (real, compressible
// data: xz -6 makes it about 4 times smaller), topped up with generated
// text, and its compression by xz -6.
func benchData(b *testing.B) ([]byte, []byte) {
	b.Helper()
	xzPath := testutil.NeedTool(b, "xz")
	bench.once.Do(func() {
		raw := make([]byte, 0, benchSize)
		names, _ := filepath.Glob("/usr/bin/*")
		sort.Strings(names)
		for _, name := range names {
			if fi, err := os.Lstat(name); err != nil || !fi.Mode().IsRegular() {
				continue
			}
			data, err := os.ReadFile(name)
			if err != nil {
				continue
			}
			raw = append(raw, data[:min(len(data), benchSize-len(raw))]...)
			if len(raw) == benchSize {
				break
			}
		}
		raw = append(raw, textData(benchSize-len(raw), 99)...)
		bench.raw = raw
		bench.enc, bench.err = runXZPath(xzPath, raw, "-z", "-c", "-6", "-T2")
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.raw, bench.enc
}

// BenchmarkDecode compares liblzma (cgo) with ulikunitz/xz, behind this
// package's checks ("ulikunitz") and alone ("ulikunitz-raw"), on 64 MiB.
// MB/s counts decompressed bytes.
func BenchmarkDecode(b *testing.B) {
	raw, enc := benchData(b)
	b.Logf("%d bytes, %d compressed (xz -6)", len(raw), len(enc))
	impls := map[string]func(io.Reader) (io.Reader, error){
		"ulikunitz": func(r io.Reader) (io.Reader, error) {
			return newPureReader(r, XZ, memLimit), nil
		},
		"ulikunitz-raw": func(r io.Reader) (io.Reader, error) {
			return xz.NewReader(r)
		},
	}
	if haveCgo {
		impls["liblzma"] = func(r io.Reader) (io.Reader, error) { return NewReader(r, XZ) }
	}
	for _, name := range []string{"liblzma", "ulikunitz", "ulikunitz-raw"} {
		open, ok := impls[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			buf := make([]byte, 128<<10)
			for b.Loop() {
				r, err := open(bytes.NewReader(enc))
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					k, err := r.Read(buf)
					n += k
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if c, ok := r.(io.Closer); ok {
					c.Close()
				}
				if n != len(raw) {
					b.Fatalf("decoded %d bytes, want %d", n, len(raw))
				}
			}
		})
	}
}
