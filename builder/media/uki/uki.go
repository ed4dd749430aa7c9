// Package uki assembles unified kernel images: systemd-stub (an EFI PE
// executable from the package base) with the kernel, the initramfs, the
// command line and os-release added as PE sections, as systemd's ukify
// lays them out, so that systemd-stub finds them. Nothing else is changed
// in the stub: the result is the stub's headers and sections, the headers
// updated for the new sections, then the sections' bytes.
//
// The image is reproducible by construction: the sections are added in a
// fixed order, each at the next address aligned to the stub's section
// alignment, the COFF time stamp is zero and the checksum is computed
// over the result.
package uki

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/nodeforge/builder/internal/pechecksum"
)

// Section is one section added to the stub.
type Section struct {
	Name string // ".linux", at most 8 bytes
	Data []byte
	// Body, when not nil, is the content instead of Data, read where it
	// is (an initramfs of 150 MB in a file).
	Body interface {
		io.ReaderAt
		Size() int64
	}
}

// size is the section's content size in bytes.
func (s Section) size() int64 {
	if s.Body != nil {
		return s.Body.Size()
	}
	return int64(len(s.Data))
}

// reader reads the section's content from its start.
func (s Section) reader() io.Reader {
	if s.Body != nil {
		return io.NewSectionReader(s.Body, 0, s.Body.Size())
	}
	return bytes.NewReader(s.Data)
}

// Sections are the parts of a UKI in the order systemd's ukify writes
// them: the small ones first, the kernel last.
func Sections(osRelease, cmdline, uname, initrd, kernel []byte) []Section {
	out := []Section{{Name: ".osrel", Data: osRelease}, {Name: ".cmdline", Data: cmdline}}
	if len(uname) > 0 {
		out = append(out, Section{Name: ".uname", Data: uname})
	}
	return append(out, Section{Name: ".initrd", Data: initrd}, Section{Name: ".linux", Data: kernel})
}

const (
	peSignature    = "PE\x00\x00"
	coffHeaderSize = 20
	sectionHdrSize = 40
	magicPE32Plus  = 0x20b
	// IMAGE_SCN_CNT_INITIALIZED_DATA | IMAGE_SCN_MEM_READ, as ukify marks
	// the sections it adds.
	dataReadOnly = 0x40000040
)

// Build returns the stub with the sections appended (Layout's image,
// as one buffer).
func Build(stub []byte, sections []Section) ([]byte, error) {
	im, err := Layout(stub, sections)
	if err != nil {
		return nil, err
	}
	return im.Bytes(), nil
}

// Image is a UKI laid out and not copied: its headers, then each
// section's bytes (the caller's, not copied) padded to the file
// alignment. A UKI is mostly its initramfs, which its maker already
// holds: an Image writes it out without a second copy in memory.
type Image struct {
	head     []byte // the headers and the stub's sections, padded
	sections []Section
	pads     []int64 // zeros after each section
	size     int64
}

// Layout lays out the stub with the sections appended. The stub must be
// a PE32+ image with room in its headers for the new section headers (the
// systemd-stub of every distribution leaves it), and carry no section of
// the names added. The sections' bytes must not change while the Image
// is in use.
func Layout(stub []byte, sections []Section) (*Image, error) {
	h, err := parseHeaders(stub)
	if err != nil {
		return nil, err
	}
	for _, s := range sections {
		if len(s.Name) == 0 || len(s.Name) > 8 {
			return nil, fmt.Errorf("section name %q: want 1 to 8 bytes", s.Name)
		}
		if h.has(s.Name) {
			return nil, fmt.Errorf("the stub already has a section %s", s.Name)
		}
	}
	newCount := h.sections + len(sections)
	if newCount > math.MaxUint16 {
		return nil, errors.New("too many sections")
	}
	if end := h.tableOffset + newCount*sectionHdrSize; end > h.sizeOfHeaders {
		return nil, fmt.Errorf("no room in the stub's headers for %d more section headers (%d bytes of headers, the table would end at %d)",
			len(sections), h.sizeOfHeaders, end)
	}
	// What follows the stub's last section in its file is no part of the
	// image a firmware loads: a COFF symbol table, as Debian's stub
	// carries. It is left out, with the header fields naming it, so that
	// no gap lies between the sections: Authenticode hashes the sections
	// in file order, and signing tools disagree on the bytes of a gap.
	fileEnd := alignUp(h.rawEnd, h.fileAlign)
	if len(sections) == 0 {
		fileEnd = h.rawEnd // nothing after the stub to pad for
	}
	head := make([]byte, fileEnd)
	copy(head, stub[:h.rawEnd])
	binary.LittleEndian.PutUint64(head[h.coff+8:], 0) // PointerToSymbolTable, NumberOfSymbols
	im := &Image{head: head, sections: sections}
	vaEnd := alignUp(h.imageEnd, h.sectionAlign)
	for i, s := range sections {
		size := uint64(s.size())
		rawSize := alignUp(size, h.fileAlign)
		if fileEnd+rawSize > math.MaxUint32 || vaEnd+size > math.MaxUint32 {
			return nil, fmt.Errorf("section %s: the image would pass 4 GiB", s.Name)
		}
		hdr := head[h.tableOffset+(h.sections+i)*sectionHdrSize:]
		copy(hdr[0:8], s.Name)
		binary.LittleEndian.PutUint32(hdr[8:], uint32(size))     // VirtualSize
		binary.LittleEndian.PutUint32(hdr[12:], uint32(vaEnd))   // VirtualAddress
		binary.LittleEndian.PutUint32(hdr[16:], uint32(rawSize)) // SizeOfRawData
		binary.LittleEndian.PutUint32(hdr[20:], uint32(fileEnd)) // PointerToRawData
		binary.LittleEndian.PutUint32(hdr[36:], dataReadOnly)
		im.pads = append(im.pads, int64(rawSize-size))
		fileEnd += rawSize
		vaEnd = alignUp(vaEnd+size, h.sectionAlign)
	}
	im.size = int64(fileEnd)
	le := binary.LittleEndian
	le.PutUint16(head[h.coff+2:], uint16(newCount))
	le.PutUint32(head[h.coff+4:], 0)                  // TimeDateStamp: no clock in the image
	le.PutUint32(head[h.optional+56:], uint32(vaEnd)) // SizeOfImage
	le.PutUint32(head[h.optional+64:], 0)
	// Every part starts at an even offset, and an odd section is
	// followed by its padding's zeros: the parts' sums are the image's.
	sum := pechecksum.Add(0, head)
	buf := make([]byte, 1<<20) // even: each piece starts at an even offset
	for _, s := range sections {
		if s.Body == nil {
			sum = pechecksum.Add(sum, s.Data)
			continue
		}
		r := s.reader()
		for {
			n, err := io.ReadFull(r, buf)
			sum = pechecksum.Add(sum, buf[:n])
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("section %s: %w", s.Name, err)
			}
		}
	}
	le.PutUint32(head[h.optional+64:], pechecksum.Finish(sum, im.size))
	return im, nil
}

// Size is the image's size in bytes.
func (im *Image) Size() int64 { return im.size }

// WriteTo writes the image to w.
func (im *Image) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(im.head)
	total := int64(n)
	var zeros [4096]byte
	for i, s := range im.sections {
		if err != nil {
			return total, err
		}
		var m int64
		m, err = io.Copy(w, s.reader())
		total += m
		if err == nil && m != s.size() {
			err = fmt.Errorf("section %s: %d bytes of %d", s.Name, m, s.size())
		}
		for pad := im.pads[i]; pad > 0 && err == nil; pad -= int64(n) {
			n, err = w.Write(zeros[:min(pad, int64(len(zeros)))])
			total += int64(n)
		}
	}
	return total, err
}

// Bytes is the image in one buffer.
func (im *Image) Bytes() []byte {
	var b bytes.Buffer
	b.Grow(int(im.size))
	im.WriteTo(&b) // a bytes.Buffer takes all
	return b.Bytes()
}

// headers are what Build reads of the stub.
type headers struct {
	coff, optional, tableOffset int
	sections                    int
	sectionAlign, fileAlign     uint64
	sizeOfHeaders               int
	imageEnd                    uint64 // the end of the last section in memory
	rawEnd                      uint64 // the end of the headers and the sections' raw data in the file
	names                       []string
}

func (h *headers) has(name string) bool {
	for _, n := range h.names {
		if n == name {
			return true
		}
	}
	return false
}

func parseHeaders(b []byte) (*headers, error) {
	le := binary.LittleEndian
	if len(b) < 0x40 || b[0] != 'M' || b[1] != 'Z' {
		return nil, errors.New("the stub is not a PE image (no MZ header)")
	}
	pe := int(le.Uint32(b[0x3c:]))
	if pe < 0x40 || pe+4+coffHeaderSize > len(b) || string(b[pe:pe+4]) != peSignature {
		return nil, errors.New("the stub is not a PE image (no PE signature)")
	}
	h := &headers{coff: pe + 4}
	h.sections = int(le.Uint16(b[h.coff+2:]))
	optSize := int(le.Uint16(b[h.coff+16:]))
	h.optional = h.coff + coffHeaderSize
	h.tableOffset = h.optional + optSize
	if optSize < 112 || h.tableOffset+h.sections*sectionHdrSize > len(b) {
		return nil, errors.New("the stub's headers are truncated")
	}
	if le.Uint16(b[h.optional:]) != magicPE32Plus {
		return nil, errors.New("the stub is not a PE32+ image")
	}
	h.sectionAlign = uint64(le.Uint32(b[h.optional+32:]))
	h.fileAlign = uint64(le.Uint32(b[h.optional+36:]))
	h.sizeOfHeaders = int(le.Uint32(b[h.optional+60:]))
	if h.sectionAlign == 0 || h.fileAlign == 0 || h.sectionAlign&(h.sectionAlign-1) != 0 || h.fileAlign&(h.fileAlign-1) != 0 {
		return nil, fmt.Errorf("the stub's alignments (section %d, file %d) are not powers of two", h.sectionAlign, h.fileAlign)
	}
	if h.sizeOfHeaders > len(b) {
		return nil, errors.New("the stub's headers are larger than the stub")
	}
	// A signed stub carries its certificate table at its end, where the
	// sections go: its signature would not cover them (the UKI is signed
	// as a whole, once assembled).
	const securityDir = 4
	if n := int(le.Uint32(b[h.optional+108:])); n > securityDir && optSize >= 112+8*(securityDir+1) {
		if le.Uint32(b[h.optional+112+8*securityDir+4:]) != 0 {
			return nil, errors.New("the stub is signed (it has a certificate table): give the unsigned stub, the UKI is signed once assembled")
		}
	}
	h.rawEnd = uint64(h.sizeOfHeaders)
	for i := range h.sections {
		s := b[h.tableOffset+i*sectionHdrSize:]
		h.names = append(h.names, string(bytes.TrimRight(s[:8], "\x00")))
		end := uint64(le.Uint32(s[12:])) + max(uint64(le.Uint32(s[8:])), uint64(le.Uint32(s[16:])))
		h.imageEnd = max(h.imageEnd, end)
		if size := uint64(le.Uint32(s[16:])); size > 0 {
			h.rawEnd = max(h.rawEnd, uint64(le.Uint32(s[20:]))+size)
		}
	}
	if h.rawEnd > uint64(len(b)) {
		return nil, errors.New("a section's raw data runs past the end of the stub")
	}
	return h, nil
}

func alignUp(n, a uint64) uint64 { return (n + a - 1) &^ (a - 1) }
