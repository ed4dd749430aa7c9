package rpmfile

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// The signature header is covered by no digest or signature, so rpm holds
// its structure to rules before it reads a package (lib/header.c,
// hdrblobVerifyRegion and hdrblobVerifyInfo in rpm 4.18), and refuses the
// package when one breaks. checkSigHeader applies the same rules: a byte
// changed there is refused as rpm refuses it, not read past.

// checkSigHeader checks the signature header's preamble, its region and
// each index entry as rpm does.
func checkSigHeader(h *rpmhdr.Header) error {
	raw := h.Raw
	if !bytes.Equal(raw[4:8], []byte{0, 0, 0, 0}) {
		return fmt.Errorf("reserved preamble bytes % x are not zero", raw[4:8])
	}
	il := len(h.Entries)
	data := raw[16+16*il:]
	dl := len(data)
	if il == 0 {
		return fmt.Errorf("no entries")
	}
	entries, rdl := h.Entries, -1
	if e := entries[0]; e.Tag == rpmhdr.TagHeaderSignatures {
		if e.Type != rpmhdr.TypeBin || e.Count != 16 {
			return fmt.Errorf("region tag %d has type %d and count %d, not BIN of 16", e.Tag, e.Type, e.Count)
		}
		if int64(e.Offset)+16 > int64(dl) {
			return fmt.Errorf("region trailer at offset %d overruns the %d data bytes", e.Offset, dl)
		}
		t := data[e.Offset : e.Offset+16]
		tag, typ, off, count := binary.BigEndian.Uint32(t), binary.BigEndian.Uint32(t[4:]), int32(binary.BigEndian.Uint32(t[8:])), binary.BigEndian.Uint32(t[12:])
		if tag == rpmhdr.TagHeaderImage {
			tag = rpmhdr.TagHeaderSignatures
		}
		if tag != rpmhdr.TagHeaderSignatures || typ != rpmhdr.TypeBin || count != 16 {
			return fmt.Errorf("region trailer is tag %d type %d count %d, not tag %d BIN of 16", tag, typ, count, rpmhdr.TagHeaderSignatures)
		}
		rdl = int(e.Offset) + 16
		if off%16 != 0 || -(off/16) != int32(il) || rdl != dl {
			return fmt.Errorf("region of %d entries and %d bytes is not the whole header (%d entries, %d bytes)", -(off / 16), rdl, il, dl)
		}
		entries = entries[1:]
	}
	end := 0
	for _, e := range entries {
		off := int(e.Offset)
		n, err := entryLength(e, data)
		switch {
		case end > off:
			err = fmt.Errorf("data at offset %d overlaps the previous entry's, which ends at %d", off, end)
		case int32(e.Tag) < rpmhdr.TagHeaderI18NTable: // rpm's tags are signed
			err = fmt.Errorf("tag below %d", rpmhdr.TagHeaderI18NTable)
		case off%max(rpmhdr.TypeSize(e.Type), 1) != 0: // a number aligns to its size
			err = fmt.Errorf("offset %d is not aligned for type %d", off, e.Type)
		}
		if err != nil {
			return fmt.Errorf("entry of tag %d: %w", e.Tag, err)
		}
		end = off + n
		if rdl >= 0 && end > rdl-16 && off < rdl {
			return fmt.Errorf("entry of tag %d: data overlaps the region trailer", e.Tag)
		}
	}
	return nil
}

// entryLength is the size of an entry's data as rpm's dataLength counts
// it; rpmhdr.Parse has bounded the entry already.
func entryLength(e rpmhdr.Entry, data []byte) (int, error) {
	switch e.Type {
	case rpmhdr.TypeNull:
		return 0, nil
	case rpmhdr.TypeChar, rpmhdr.TypeInt8, rpmhdr.TypeBin, rpmhdr.TypeInt16, rpmhdr.TypeInt32, rpmhdr.TypeInt64:
		return int(e.Count) * rpmhdr.TypeSize(e.Type), nil
	case rpmhdr.TypeString:
		if e.Count != 1 {
			return 0, fmt.Errorf("STRING with count %d", e.Count)
		}
	}
	off := int(e.Offset)
	for range e.Count {
		off += bytes.IndexByte(data[off:], 0) + 1
	}
	return off - int(e.Offset), nil
}

// sigTagRule is what rpm requires of an entry it verifies (lib/rpmvs.c,
// rpmvfytags): its type, and when not 0 its count and its size in bytes.
type sigTagRule struct{ typ, count, size uint32 }

var sigTagRules = map[uint32]sigTagRule{
	rpmhdr.SigPGP:    {rpmhdr.TypeBin, 0, 0},
	rpmhdr.SigGPG:    {rpmhdr.TypeBin, 0, 0},
	rpmhdr.SigRSA:    {rpmhdr.TypeBin, 0, 0},
	rpmhdr.SigDSA:    {rpmhdr.TypeBin, 0, 0},
	rpmhdr.SigMD5:    {rpmhdr.TypeBin, 0, 16},
	rpmhdr.SigSHA1:   {rpmhdr.TypeString, 1, 41},
	rpmhdr.SigSHA256: {rpmhdr.TypeString, 1, 65},
}

// sigTagErr says why rpm would not take the entry of tag as a signature or
// digest, or returns nil.
func sigTagErr(h *rpmhdr.Header, tag uint32) error {
	e, ok := h.Entry(tag)
	r, known := sigTagRules[tag]
	if !ok || !known {
		return nil
	}
	if e.Type != r.typ {
		return fmt.Errorf("signature header tag %d has type %d, not %d", tag, e.Type, r.typ)
	}
	if r.count != 0 && e.Count != r.count {
		return fmt.Errorf("signature header tag %d has count %d, not %d", tag, e.Count, r.count)
	}
	size := e.Count
	if e.Type == rpmhdr.TypeString {
		size = uint32(len(h.String(tag)) + 1)
	}
	if r.size != 0 && size != r.size {
		return fmt.Errorf("signature header tag %d holds %d bytes, not %d", tag, size, r.size)
	}
	return nil
}
