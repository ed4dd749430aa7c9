// Package gpt writes GUID partition tables (UEFI 2.10, section 5.3) into a
// disk image in memory: a protective MBR, the primary header and entry
// array at LBA 1, the backup at the end of the disk. GUIDs are derived
// from fixed namespaces and names (RFC 9562 version 5), so the same layout
// gives the same bytes on every build.
package gpt

import (
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"unicode/utf16"
)

// SectorSize is the usual logical block size (disks with 4K logical
// blocks have 4096).
const SectorSize = 512

const (
	entrySize  = 128
	entryCount = 128
	headerSize = 92
	alignBytes = 1 << 20 // partitions start on MiB boundaries
)

// geometry is where a sector size puts the tables: the entry array takes
// entryLBAs sectors after the header (32 of 512 bytes, 4 of 4096), the
// first usable sector follows it, partitions align on align sectors.
type geometry struct {
	size, entryLBAs, firstUsable, align uint64
}

func geometryOf(sectorSize int) (geometry, error) {
	if sectorSize < 512 || sectorSize > 65536 || sectorSize&(sectorSize-1) != 0 {
		return geometry{}, fmt.Errorf("gpt: sector size %d is not a power of two from 512 to 65536", sectorSize)
	}
	ss := uint64(sectorSize)
	entries := (entryCount*entrySize + ss - 1) / ss
	return geometry{size: ss, entryLBAs: entries, firstUsable: 2 + entries, align: alignBytes / ss}, nil
}

// GUID is a GUID in its textual byte order (as printed); it is written
// mixed-endian, as GPT stores them.
type GUID [16]byte

// MustParse reads "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
func MustParse(s string) GUID {
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != 16 || len(s) != 36 {
		panic("gpt: bad GUID " + s)
	}
	return GUID(b)
}

func (g GUID) String() string {
	return fmt.Sprintf("%X-%X-%X-%X-%X", g[0:4], g[4:6], g[6:8], g[8:10], g[10:16])
}

// Mixed is the on-disk form (GPT and UEFI alike): the first three fields
// little-endian.
func (g GUID) Mixed() [16]byte {
	var b [16]byte
	b[0], b[1], b[2], b[3] = g[3], g[2], g[1], g[0]
	b[4], b[5] = g[5], g[4]
	b[6], b[7] = g[7], g[6]
	copy(b[8:], g[8:])
	return b
}

// NameGUID is the version 5 (SHA-1) UUID of name in namespace ns.
func NameGUID(ns GUID, name string) GUID {
	h := sha1.New()
	h.Write(ns[:])
	h.Write([]byte(name))
	var g GUID
	copy(g[:], h.Sum(nil))
	g[6] = g[6]&0x0f | 0x50
	g[8] = g[8]&0x3f | 0x80
	return g
}

// Well-known partition types.
var (
	TypeEFISystem = MustParse("C12A7328-F81F-11D2-BA4B-00A0C93EC93B")
	TypeBIOSBoot  = MustParse("21686148-6449-6E6F-744E-656564454649")
	TypeLinuxData = MustParse("0FC63DAF-8483-4772-8E79-3D69D8477DE4")
)

// Partition is one entry; Start and Sectors are in the table's logical
// sectors (512 bytes for Layout and Write).
type Partition struct {
	Name    string
	Type    GUID
	GUID    GUID
	Start   uint64
	Sectors uint64
	Attrs   uint64
}

// Layout places partitions of the given sizes (bytes, rounded up to whole
// MiB) one after another from 1 MiB on a disk of sectorSize-byte logical
// sectors, and returns them with the disk size (the last partition's end
// plus room for the backup table, aligned): the partitions at the same
// bytes whatever the sector size, Start and Sectors counted in its sectors.
func Layout(sectorSize int, names []string, types []GUID, sizes []int64, guids []GUID) ([]Partition, int64, error) {
	g, err := geometryOf(sectorSize)
	if err != nil {
		return nil, 0, err
	}
	var ps []Partition
	lba := g.align
	for i := range names {
		secs := (uint64(sizes[i]) + alignBytes - 1) / alignBytes * g.align
		ps = append(ps, Partition{Name: names[i], Type: types[i], GUID: guids[i], Start: lba, Sectors: secs})
		lba += secs
	}
	return ps, int64((lba + g.align) * g.size), nil
}

// Write writes the protective MBR and both tables into disk, whose length
// is the disk size (a multiple of sectorSize): the header at LBA 1 and the entry array after it (UEFI 2.10, 5.3.2), the
// protective MBR in LBA 0's first 512 bytes counting the disk's sectors.
func Write(sectorSize int, disk []byte, diskGUID GUID, parts []Partition) error {
	head, tail, err := Tables(sectorSize, int64(len(disk)), diskGUID, parts)
	if err != nil {
		return err
	}
	copy(disk, head)
	copy(disk[len(disk)-len(tail):], tail)
	return nil
}

// Tables are what Write writes on a disk of diskSize bytes: head, its
// first sectors up to the first usable one (the protective MBR, the
// header, the entries), and tail, its last ones (the backup entries and
// header). Everything between is the partitions' (a disk written as a
// stream: head, the partitions, tail).
func Tables(sectorSize int, diskSize int64, diskGUID GUID, parts []Partition) (head, tail []byte, err error) {
	g, err := geometryOf(sectorSize)
	if err != nil {
		return nil, nil, err
	}
	ss, entryLBAs, firstUsable := g.size, g.entryLBAs, g.firstUsable
	if diskSize < 0 || uint64(diskSize)%ss != 0 || uint64(diskSize) < (2*firstUsable+1)*ss {
		return nil, nil, fmt.Errorf("gpt: disk of %d bytes", diskSize)
	}
	last := uint64(diskSize)/ss - 1
	lastUsable := last - 1 - entryLBAs
	if len(parts) > entryCount {
		return nil, nil, errors.New("gpt: more than 128 partitions")
	}
	entries := make([]byte, entryCount*entrySize)
	for i, p := range parts {
		if p.Start < firstUsable || p.Sectors == 0 || p.Start+p.Sectors-1 > lastUsable {
			return nil, nil, fmt.Errorf("gpt: partition %s (%d+%d) does not fit in %d..%d", p.Name, p.Start, p.Sectors, firstUsable, lastUsable)
		}
		for j := 0; j < i; j++ {
			q := parts[j]
			if p.Start < q.Start+q.Sectors && q.Start < p.Start+p.Sectors {
				return nil, nil, fmt.Errorf("gpt: partitions %s and %s overlap", q.Name, p.Name)
			}
		}
		e := entries[i*entrySize:]
		t, g := p.Type.Mixed(), p.GUID.Mixed()
		copy(e[0:], t[:])
		copy(e[16:], g[:])
		binary.LittleEndian.PutUint64(e[32:], p.Start)
		binary.LittleEndian.PutUint64(e[40:], p.Start+p.Sectors-1)
		binary.LittleEndian.PutUint64(e[48:], p.Attrs)
		u := utf16.Encode([]rune(p.Name))
		if len(u) > 36 {
			return nil, nil, fmt.Errorf("gpt: partition name %q is longer than 36 UTF-16 units", p.Name)
		}
		for k, c := range u {
			binary.LittleEndian.PutUint16(e[56+2*k:], c)
		}
	}
	entriesCRC := crc32.ChecksumIEEE(entries)

	// Protective MBR: one partition of type 0xEE over the disk.
	head = make([]byte, firstUsable*ss)
	mbr := head[:512]
	pe := mbr[446:]
	pe[1], pe[2], pe[3] = 0x00, 0x02, 0x00 // CHS of LBA 1
	pe[4] = 0xEE
	pe[5], pe[6], pe[7] = 0xFF, 0xFF, 0xFF
	binary.LittleEndian.PutUint32(pe[8:], 1)
	size := last
	if size > 0xFFFFFFFF {
		size = 0xFFFFFFFF
	}
	binary.LittleEndian.PutUint32(pe[12:], uint32(size))
	mbr[510], mbr[511] = 0x55, 0xAA

	header := func(my, alt, entriesLBA uint64) []byte {
		h := make([]byte, ss)
		copy(h, "EFI PART")
		binary.LittleEndian.PutUint32(h[8:], 0x00010000)
		binary.LittleEndian.PutUint32(h[12:], headerSize)
		binary.LittleEndian.PutUint64(h[24:], my)
		binary.LittleEndian.PutUint64(h[32:], alt)
		binary.LittleEndian.PutUint64(h[40:], firstUsable)
		binary.LittleEndian.PutUint64(h[48:], lastUsable)
		dg := diskGUID.Mixed()
		copy(h[56:], dg[:])
		binary.LittleEndian.PutUint64(h[72:], entriesLBA)
		binary.LittleEndian.PutUint32(h[80:], entryCount)
		binary.LittleEndian.PutUint32(h[84:], entrySize)
		binary.LittleEndian.PutUint32(h[88:], entriesCRC)
		binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h[:headerSize]))
		return h
	}
	copy(head[1*ss:], header(1, last, 2))
	copy(head[2*ss:], entries)
	backupEntries := last - entryLBAs
	tail = make([]byte, (entryLBAs+1)*ss)
	copy(tail, entries)
	copy(tail[entryLBAs*ss:], header(last, 1, backupEntries))
	return head, tail, nil
}
