package compose

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os/exec"
	"runtime"
	"testing"

	"github.com/nodeforge/builder/internal/xzdec"
)

// benchDisk is size bytes laid out as a raw disk image of a real base
// is: mostly the ESP's compressed payload (the xz initramfs, the kernel:
// incompressible), some structured data (tables, text) and free space
// (zeros), in stretches of 1 MiB as partitions and files place them.
func benchDisk(size int) []byte {
	const mib = 1 << 20
	rng := rand.New(rand.NewPCG(41, 6))
	disk := make([]byte, size)
	words := []string{"kernel ", "module ", "initramfs ", "squashfs ", "extension ", "nodeforge ", "\n", "0x1f ", "release "}
	for off := 0; off < size; off += mib {
		part := disk[off:min(off+mib, size)]
		switch r := rng.IntN(16); {
		case r < 10: // compressed payload
			for i := 0; i+8 <= len(part); i += 8 {
				binary.LittleEndian.PutUint64(part[i:], rng.Uint64())
			}
		case r < 13: // tables and text
			var b bytes.Buffer
			v := rng.Uint32()
			for b.Len() < len(part) {
				if rng.IntN(4) == 0 {
					v += uint32(rng.IntN(500))
					b.Write(binary.LittleEndian.AppendUint32(nil, v))
				} else {
					b.WriteString(words[rng.IntN(len(words))])
				}
			}
			copy(part, b.Bytes())
		default: // free space
		}
	}
	return disk
}

// BenchmarkDiskXZ compresses a 64 MiB disk-like image (benchDisk) as the
// .xz disk images were (ulikunitz/xz, 16 MiB streams in parallel: what a
// builder without cgo still writes), as they are (liblzma's threaded
// encoder, 24 MiB Blocks at -6) and as `xz -T0 -6` does the same bytes,
// side by side on all cores (GOMAXPROCS; xz -T0 takes every core).
// compressed-bytes is each one's output size. Run:
//
//	go test -run '^$' -bench DiskXZ -benchtime 3x ./builder/compose/
func BenchmarkDiskXZ(b *testing.B) {
	data := benchDisk(64 << 20)
	run := func(name string, enc func() (int64, error)) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			var n int64
			for b.Loop() {
				var err error
				if n, err = enc(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n), "compressed-bytes")
		})
	}
	run("ulikunitz-chunks", func() (int64, error) {
		c, err := xzChunks(data)
		return int64(len(c)), err
	})
	if xzdec.CanEncode {
		run("liblzma-mt", func() (int64, error) {
			c, err := xzdec.Encode(data, xzdec.EncodeOptions{Preset: diskXZPreset, Threads: runtime.GOMAXPROCS(0)})
			return int64(len(c)), err
		})
	}
	if xz, err := exec.LookPath("xz"); err == nil {
		run("xz-T0", func() (int64, error) {
			cmd := exec.Command(xz, "-T0", "-6", "-c")
			cmd.Stdin = bytes.NewReader(data)
			w := countWriter{w: io.Discard}
			cmd.Stdout = io.Writer(&w)
			err := cmd.Run()
			return w.n, err
		})
	}
}
