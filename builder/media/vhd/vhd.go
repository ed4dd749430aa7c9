// Package vhd writes fixed-size virtual hard disks (Microsoft's VHD,
// "Virtual PC" format, as Azure imports them) from raw images: the raw
// bytes followed by a 512-byte footer. Azure wants a fixed disk whose size
// is a whole number of MiB; the footer records it as its current size.
//
// The footer is the one `qemu-img convert -O vpc -o subformat=fixed,force_size`
// writes (the tool Azure's documentation and most image pipelines use),
// with two fields made reproducible: the timestamp is the source date, and
// the disk's unique id is derived from the image's content. The same raw
// image and date give the same bytes.
package vhd

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

const (
	footerSize = 512
	sector     = 512
	// vhdEpoch is 2000-01-01T00:00:00Z, where VHD timestamps count from.
	vhdEpoch = 946684800
	// maxSectors is the format's limit as qemu applies it (about 2040 GiB).
	maxSectors = 65535 * 16 * 255
	diskFixed  = 2
)

// Write writes raw followed by the footer of a fixed disk to w. raw's
// length must be a positive multiple of 1 MiB (Azure refuses anything
// else); sourceDate (seconds since 1970) is the footer's timestamp.
func Write(w io.Writer, raw []byte, sourceDate int64) error {
	return WriteFrom(w, bytes.NewReader(raw), int64(len(raw)), sourceDate)
}

// WriteFrom is Write of the size bytes raw reads, copied as they come
// (hashed on the way for the footer's id): a disk in a file is never
// whole in memory.
func WriteFrom(w io.Writer, raw io.Reader, size, sourceDate int64) error {
	if err := checkSize(size); err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(raw, size))
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("vhd: the raw image ended at %d bytes of %d", n, size)
	}
	_, err = w.Write(footer(size, [sha256.Size]byte(h.Sum(nil)), sourceDate))
	return err
}

// Footer returns the 512-byte footer of raw as a fixed disk.
func Footer(raw []byte, sourceDate int64) ([]byte, error) {
	if err := checkSize(int64(len(raw))); err != nil {
		return nil, err
	}
	return footer(int64(len(raw)), sha256.Sum256(raw), sourceDate), nil
}

// checkSize refuses a disk size the format or Azure does not take.
func checkSize(size int64) error {
	if size <= 0 || size%(1<<20) != 0 {
		return fmt.Errorf("vhd: a fixed disk for Azure is a whole number of MiB, not %d bytes", size)
	}
	if size/sector > maxSectors {
		return errors.New("vhd: the disk is larger than the format's 2040 GiB")
	}
	return nil
}

// footer is the footer of a disk of size bytes whose SHA-256 is id.
func footer(size int64, id [sha256.Size]byte, sourceDate int64) []byte {
	ts := max(sourceDate-vhdEpoch, 0)
	ts = min(ts, 1<<32-1)

	f := make([]byte, footerSize)
	copy(f[0:], "conectix")
	binary.BigEndian.PutUint32(f[8:], 2)           // features: reserved bit, always set
	binary.BigEndian.PutUint32(f[12:], 0x00010000) // format version 1.0
	binary.BigEndian.PutUint64(f[16:], ^uint64(0)) // no dynamic header: fixed
	binary.BigEndian.PutUint32(f[24:], uint32(ts))
	// "qem2": qemu-img's creator id for disks sized by the current size
	// field; readers that guess the size from the creator (qemu among
	// them) read it right.
	copy(f[28:], "qem2")
	binary.BigEndian.PutUint32(f[32:], 0x00050003) // creator version, as qemu-img
	copy(f[36:], "Wi2k")
	binary.BigEndian.PutUint64(f[40:], uint64(size)) // original size
	binary.BigEndian.PutUint64(f[48:], uint64(size)) // current size
	// The largest CHS geometry: the disk's size is the current size, not
	// cylinders × heads × sectors (which cannot express every whole number
	// of MiB), as qemu-img's force_size writes it.
	binary.BigEndian.PutUint16(f[56:], 65535)
	f[58], f[59] = 16, 255
	binary.BigEndian.PutUint32(f[60:], diskFixed)
	// A name-based UUID (RFC 9562 version 8) from the content.
	copy(f[68:84], id[:16])
	f[68+6] = f[68+6]&0x0f | 0x80
	f[68+8] = f[68+8]&0x3f | 0x80
	binary.BigEndian.PutUint32(f[64:], checksum(f))
	return f
}

// checksum is the ones' complement of the sum of the footer's bytes, the
// checksum field counted as zero.
func checksum(f []byte) uint32 {
	var sum uint32
	for i, b := range f {
		if i < 64 || i >= 68 {
			sum += uint32(b)
		}
	}
	return ^sum
}
