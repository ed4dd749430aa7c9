// Package vmdk writes VMware's streamOptimized virtual disks (VMDK 3, the
// disk of an OVA: what ovftool, vSphere and qemu-img read) from raw
// images, as VMware's Virtual Disk Format 5.0 describes them: a sparse
// extent header, the text descriptor, then each grain of 64 KiB that is
// not all zeros as a marker and its zlib stream, then the grain tables,
// the grain directory, a footer (the header again, with the directory's
// place) and the end-of-stream marker, every piece on a 512-byte sector.
// Nothing depends on the clock or the host: the descriptor's content ID
// comes from the image's digest, and the grains are compressed by one
// compressor at a pinned version, in parallel but each on its own.
package vmdk

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zlib"
)

const (
	sector      = 512
	grainSects  = 128 // 64 KiB grains
	grainSize   = grainSects * sector
	gtEntries   = 512 // grain table entries: one table covers 32 MiB
	magic       = 0x564d444b
	gdAtEnd     = ^uint64(0)
	flagNL      = 1 << 0  // the newline test characters are valid
	flagCompr   = 1 << 16 // grains are compressed
	flagMarkers = 1 << 17 // the stream has markers
	deflate     = 1
	// The metadata markers' types.
	markerEOS, markerGT, markerGD, markerFooter = 0, 1, 2, 3
)

// header is the sparse extent header (and the footer).
type header struct {
	Magic, Version, Flags            uint32
	Capacity, GrainSize              uint64
	DescriptorOffset, DescriptorSize uint64
	NumGTEsPerGT                     uint32
	RGDOffset, GDOffset, OverHead    uint64
	UncleanShutdown                  uint8
	// The newline test: '\n', ' ', '\r', '\n'.
	SingleEndLine, NonEndLine, DoubleEndLine1, DoubleEndLine2 uint8
	CompressAlgorithm                                         uint16
}

func (h header) bytes() []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, h) // a fixed-size struct: no error
	return pad(b.Bytes())
}

// pad fills b up to the next sector.
func pad(b []byte) []byte {
	if r := len(b) % sector; r != 0 {
		b = append(b, make([]byte, sector-r)...)
	}
	return b
}

// marker is a metadata marker: numSectors of its type follow.
func marker(numSectors uint64, typ uint32) []byte {
	b := make([]byte, sector)
	binary.LittleEndian.PutUint64(b, numSectors)
	binary.LittleEndian.PutUint32(b[12:], typ)
	return b
}

// Write writes raw as a streamOptimized VMDK to w, its extent named name
// in the descriptor (the file name it is kept under: disk.vmdk in an
// OVA). raw's length must be a positive multiple of 512.
func Write(w io.Writer, raw []byte, name string) error {
	if len(raw) == 0 || len(raw)%sector != 0 {
		return fmt.Errorf("vmdk: %d bytes is not a whole number of sectors", len(raw))
	}
	capacity := uint64(len(raw) / sector)
	sum := sha256.Sum256(raw)
	cid := binary.BigEndian.Uint32(sum[:])
	if cid == 0xffffffff { // "no parent" in parentCID
		cid--
	}
	heads, sects := uint64(255), uint64(63)
	cyl := min(capacity/(heads*sects), 65535)
	desc := fmt.Sprintf("# Disk DescriptorFile\nversion=1\nCID=%08x\nparentCID=ffffffff\ncreateType=\"streamOptimized\"\n\n"+
		"# Extent description\nRW %d SPARSE \"%s\"\n\n# The Disk Data Base\n#DDB\n\n"+
		"ddb.adapterType = \"lsilogic\"\nddb.geometry.cylinders = \"%d\"\nddb.geometry.heads = \"%d\"\nddb.geometry.sectors = \"%d\"\nddb.virtualHWVersion = \"4\"\n",
		cid, capacity, name, cyl, heads, sects)
	descSects := uint64((len(desc) + sector - 1) / sector)
	// The first grain starts on a grain boundary, as VMware's own files.
	overhead := (1 + descSects + grainSects - 1) / grainSects * grainSects
	h := header{Magic: magic, Version: 3, Flags: flagNL | flagCompr | flagMarkers, Capacity: capacity, GrainSize: grainSects,
		DescriptorOffset: 1, DescriptorSize: descSects, NumGTEsPerGT: gtEntries, GDOffset: gdAtEnd, OverHead: overhead,
		SingleEndLine: '\n', NonEndLine: ' ', DoubleEndLine1: '\r', DoubleEndLine2: '\n', CompressAlgorithm: deflate}

	cw := &countWriter{w: w}
	cw.write(h.bytes())
	cw.write(pad([]byte(desc)))
	cw.write(make([]byte, (overhead-1-descSects)*sector))

	grains := (len(raw) + grainSize - 1) / grainSize
	gt := make([]uint32, (grains+gtEntries-1)/gtEntries*gtEntries)
	err := compressGrains(raw, grains, func(i int, z []byte) {
		gt[i] = uint32(cw.n / sector)
		m := make([]byte, 12, 12+len(z))
		binary.LittleEndian.PutUint64(m, uint64(i)*grainSects)
		binary.LittleEndian.PutUint32(m[8:], uint32(len(z)))
		cw.write(pad(append(m, z...)))
	})
	if err != nil {
		return err
	}
	if cw.n/sector > 0xffffffff {
		return errors.New("vmdk: the image outgrows the grain tables' 32-bit offsets")
	}
	tables := len(gt) / gtEntries
	gd := make([]uint32, tables)
	for t := range tables {
		cw.write(marker(gtEntries*4/sector, markerGT))
		gd[t] = uint32(cw.n / sector)
		var b bytes.Buffer
		binary.Write(&b, binary.LittleEndian, gt[t*gtEntries:(t+1)*gtEntries])
		cw.write(b.Bytes())
	}
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, gd)
	gdBytes := pad(b.Bytes())
	cw.write(marker(uint64(len(gdBytes)/sector), markerGD))
	h.GDOffset = uint64(cw.n / sector)
	cw.write(gdBytes)
	cw.write(marker(1, markerFooter))
	cw.write(h.bytes())
	cw.write(marker(0, markerEOS))
	return cw.err
}

// compressGrains compresses every grain of raw that is not all zeros,
// on every core, and hands them to out in order.
func compressGrains(raw []byte, grains int, out func(i int, z []byte)) error {
	const batch = 256 // grains compressed at once: 16 MiB
	zero := make([]byte, grainSize)
	workers := runtime.GOMAXPROCS(0)
	for start := 0; start < grains; start += batch {
		end := min(start+batch, grains)
		zs := make([][]byte, end-start)
		errs := make([]error, end-start)
		var wg sync.WaitGroup
		next := make(chan int)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					g := raw[i*grainSize : min((i+1)*grainSize, len(raw))]
					if bytes.Equal(g, zero[:len(g)]) {
						continue
					}
					var b bytes.Buffer
					zw, err := zlib.NewWriterLevel(&b, zlib.DefaultCompression)
					if err == nil {
						if _, err = zw.Write(g); err == nil {
							err = zw.Close()
						}
					}
					zs[i-start], errs[i-start] = b.Bytes(), err
				}
			}()
		}
		for i := start; i < end; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("vmdk: %w", err)
		}
		for j, z := range zs {
			if z != nil {
				out(start+j, z)
			}
		}
	}
	return nil
}

// countWriter counts what it wrote and keeps the first error.
type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
}
