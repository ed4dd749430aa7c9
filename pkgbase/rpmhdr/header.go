// Package rpmhdr reads and writes RPM header structures: the signature and
// main headers of an .rpm file and the bare header blobs that apt-rpm
// concatenates into pkglist indexes.
//
// It is written here rather than taken from a library because the same
// parser must read headers without a lead (pkglist entries), keep the exact
// bytes of each blob for digest and signature checks, and bound every
// length it reads from untrusted input.
package rpmhdr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
)

// Magic starts every header blob.
var Magic = []byte{0x8e, 0xad, 0xe8, 0x01}

// Limits that keep a corrupt or hostile header from exhausting memory.
// rpm itself caps the index at 0x0000ffff entries and the data at 256 MiB.
const (
	MaxEntries  = 0xffff
	MaxDataSize = 256 << 20
)

// ErrNoMoreHeaders is returned by ReadHeader at a clean end of stream.
var ErrNoMoreHeaders = errors.New("no more headers")

// Entry is one index entry of a header.
type Entry struct {
	Tag    uint32
	Type   uint32
	Offset uint32
	Count  uint32
}

// Header is a parsed header blob.
type Header struct {
	Raw     []byte // the exact blob: magic, counts, index and data
	Entries []Entry
	data    []byte // Raw[16+16*len(Entries):]
	byTag   map[uint32]int
}

// ReadHeader reads one header blob from r. It returns ErrNoMoreHeaders when
// r is at EOF before the first byte.
func ReadHeader(r io.Reader) (*Header, error) {
	var pre [16]byte
	n, err := io.ReadFull(r, pre[:])
	if err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return nil, ErrNoMoreHeaders
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("header preamble truncated after %d bytes", n)
		}
		return nil, fmt.Errorf("reading header: %w", err)
	}
	if !bytes.Equal(pre[:4], Magic) {
		return nil, fmt.Errorf("bad header magic % x", pre[:4])
	}
	nindex := binary.BigEndian.Uint32(pre[8:12])
	hsize := binary.BigEndian.Uint32(pre[12:16])
	if nindex > MaxEntries {
		return nil, fmt.Errorf("header has %d entries, more than the limit %d", nindex, MaxEntries)
	}
	if hsize > MaxDataSize {
		return nil, fmt.Errorf("header data of %d bytes exceeds the limit %d", hsize, MaxDataSize)
	}
	// Grow the buffer as bytes arrive rather than trusting the counts with
	// one large allocation: a short, hostile stream then costs little.
	want := int64(nindex)*16 + int64(hsize)
	var buf bytes.Buffer
	buf.Grow(16 + int(min(want, 1<<20)))
	buf.Write(pre[:])
	if n, err := io.CopyN(&buf, r, want); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("header truncated: %d of %d bytes", 16+n, 16+want)
		}
		return nil, fmt.Errorf("reading header: %w", err)
	}
	return Parse(buf.Bytes())
}

// Parse parses one complete header blob. The blob is retained, not copied.
func Parse(raw []byte) (*Header, error) {
	if len(raw) < 16 {
		return nil, fmt.Errorf("header too short (%d bytes)", len(raw))
	}
	if !bytes.Equal(raw[:4], Magic) {
		return nil, fmt.Errorf("bad header magic % x", raw[:4])
	}
	nindex := binary.BigEndian.Uint32(raw[8:12])
	hsize := binary.BigEndian.Uint32(raw[12:16])
	if nindex > MaxEntries || hsize > MaxDataSize {
		return nil, fmt.Errorf("header sizes out of range (%d entries, %d bytes)", nindex, hsize)
	}
	want := 16 + int(nindex)*16 + int(hsize)
	if len(raw) != want {
		return nil, fmt.Errorf("header is %d bytes, its counts say %d", len(raw), want)
	}
	h := &Header{Raw: raw, Entries: make([]Entry, nindex), byTag: make(map[uint32]int, nindex)}
	h.data = raw[16+int(nindex)*16:]
	for i := range h.Entries {
		b := raw[16+i*16:]
		e := Entry{
			Tag:    binary.BigEndian.Uint32(b[0:]),
			Type:   binary.BigEndian.Uint32(b[4:]),
			Offset: binary.BigEndian.Uint32(b[8:]),
			Count:  binary.BigEndian.Uint32(b[12:]),
		}
		if err := h.check(e); err != nil {
			return nil, fmt.Errorf("header entry %d (tag %d): %w", i, e.Tag, err)
		}
		h.Entries[i] = e
		if _, dup := h.byTag[e.Tag]; !dup {
			h.byTag[e.Tag] = i
		}
	}
	return h, nil
}

// TypeSize is the fixed element size of numeric types, 0 for variable ones.
func TypeSize(t uint32) int {
	switch t {
	case TypeChar, TypeInt8, TypeBin:
		return 1
	case TypeInt16:
		return 2
	case TypeInt32:
		return 4
	case TypeInt64:
		return 8
	}
	return 0
}

// check bounds an entry against the data area so later reads cannot fail.
func (h *Header) check(e Entry) error {
	if e.Type > TypeI18NString {
		return fmt.Errorf("unknown type %d", e.Type)
	}
	if uint64(e.Offset) > uint64(len(h.data)) {
		return fmt.Errorf("offset %d beyond data of %d bytes", e.Offset, len(h.data))
	}
	if e.Count > MaxDataSize {
		return fmt.Errorf("count %d out of range", e.Count)
	}
	if sz := TypeSize(e.Type); sz > 0 {
		if uint64(e.Offset)+uint64(e.Count)*uint64(sz) > uint64(len(h.data)) {
			return fmt.Errorf("%d items of %d bytes at offset %d overrun data of %d bytes", e.Count, sz, e.Offset, len(h.data))
		}
		return nil
	}
	if e.Type == TypeNull {
		return nil
	}
	// Strings: every one must be NUL-terminated inside the data area.
	n := e.Count
	if e.Type == TypeString {
		n = 1
	}
	off := int(e.Offset)
	for i := uint32(0); i < n; i++ {
		j := bytes.IndexByte(h.data[off:], 0)
		if j < 0 {
			return fmt.Errorf("string %d at offset %d is not terminated", i, off)
		}
		off += j + 1
	}
	return nil
}

// Has reports whether the header carries tag.
func (h *Header) Has(tag uint32) bool { _, ok := h.byTag[tag]; return ok }

// Entry returns the index entry of tag.
func (h *Header) Entry(tag uint32) (Entry, bool) {
	i, ok := h.byTag[tag]
	if !ok {
		return Entry{}, false
	}
	return h.Entries[i], true
}

// Tags returns every tag present, in index order.
func (h *Header) Tags() []uint32 {
	out := make([]uint32, len(h.Entries))
	for i, e := range h.Entries {
		out[i] = e.Tag
	}
	return out
}

// Strings returns a STRING, STRING_ARRAY or I18NSTRING entry as a slice.
func (h *Header) Strings(tag uint32) []string {
	e, ok := h.Entry(tag)
	if !ok {
		return nil
	}
	switch e.Type {
	case TypeString, TypeStringArray, TypeI18NString:
	default:
		return nil
	}
	n := int(e.Count)
	if e.Type == TypeString {
		n = 1
	}
	out := make([]string, 0, n)
	off := int(e.Offset)
	for i := 0; i < n; i++ {
		j := bytes.IndexByte(h.data[off:], 0) // bounded by check
		out = append(out, string(h.data[off:off+j]))
		off += j + 1
	}
	return out
}

// String returns the first string of tag, or "".
func (h *Header) String(tag uint32) string {
	s := h.Strings(tag)
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// Ints returns any integer entry widened to int64 (unsigned for 8/16/32 bits,
// as rpm treats them).
func (h *Header) Ints(tag uint32) []int64 {
	e, ok := h.Entry(tag)
	if !ok {
		return nil
	}
	sz := TypeSize(e.Type)
	if sz == 0 || e.Type == TypeBin {
		return nil
	}
	out := make([]int64, e.Count)
	d := h.data[e.Offset:]
	for i := range out {
		switch e.Type {
		case TypeChar, TypeInt8:
			out[i] = int64(d[i])
		case TypeInt16:
			out[i] = int64(binary.BigEndian.Uint16(d[2*i:]))
		case TypeInt32:
			out[i] = int64(binary.BigEndian.Uint32(d[4*i:]))
		case TypeInt64:
			out[i] = int64(binary.BigEndian.Uint64(d[8*i:]))
		}
	}
	return out
}

// Int returns the first integer of tag and whether it was present.
func (h *Header) Int(tag uint32) (int64, bool) {
	v := h.Ints(tag)
	if len(v) == 0 {
		return 0, false
	}
	return v[0], true
}

// Bytes returns a BIN entry (or the raw bytes of any fixed-size entry).
func (h *Header) Bytes(tag uint32) []byte {
	e, ok := h.Entry(tag)
	if !ok {
		return nil
	}
	sz := TypeSize(e.Type)
	if sz == 0 {
		return nil
	}
	return h.data[e.Offset : e.Offset+e.Count*uint32(sz)]
}

// Builder assembles a header blob. Entries are written sorted by tag, as
// rpm does, so the same entries always give the same bytes.
type Builder struct {
	items map[uint32]item
}

type item struct {
	typ   uint32
	count uint32
	data  []byte
}

// NewBuilder returns an empty builder.
func NewBuilder() *Builder { return &Builder{items: map[uint32]item{}} }

// CopyFrom copies every entry of h except region tags.
func (b *Builder) CopyFrom(h *Header) {
	for _, e := range h.Entries {
		if e.Tag == TagHeaderImmutable || e.Tag == TagHeaderSignatures {
			continue
		}
		if _, dup := b.items[e.Tag]; dup {
			continue
		}
		var data []byte
		if sz := TypeSize(e.Type); sz > 0 {
			data = h.data[e.Offset : e.Offset+e.Count*uint32(sz)]
		} else if e.Type != TypeNull {
			n := e.Count
			if e.Type == TypeString {
				n = 1
			}
			off := int(e.Offset)
			end := off
			for i := uint32(0); i < n; i++ {
				end += bytes.IndexByte(h.data[end:], 0) + 1
			}
			data = h.data[off:end]
		}
		b.items[e.Tag] = item{typ: e.Type, count: e.Count, data: append([]byte(nil), data...)}
	}
}

// Delete removes tag.
func (b *Builder) Delete(tag uint32) { delete(b.items, tag) }

// SetString sets a STRING entry.
func (b *Builder) SetString(tag uint32, s string) {
	b.items[tag] = item{typ: TypeString, count: 1, data: append([]byte(s), 0)}
}

// SetStrings sets a STRING_ARRAY entry.
func (b *Builder) SetStrings(tag uint32, ss []string) {
	var d []byte
	for _, s := range ss {
		d = append(append(d, s...), 0)
	}
	b.items[tag] = item{typ: TypeStringArray, count: uint32(len(ss)), data: d}
}

// SetInt32 sets an INT32 entry.
func (b *Builder) SetInt32(tag uint32, v ...uint32) {
	d := make([]byte, 4*len(v))
	for i, x := range v {
		binary.BigEndian.PutUint32(d[4*i:], x)
	}
	b.items[tag] = item{typ: TypeInt32, count: uint32(len(v)), data: d}
}

// SetInt16 sets an INT16 entry.
func (b *Builder) SetInt16(tag uint32, v ...uint16) {
	d := make([]byte, 2*len(v))
	for i, x := range v {
		binary.BigEndian.PutUint16(d[2*i:], x)
	}
	b.items[tag] = item{typ: TypeInt16, count: uint32(len(v)), data: d}
}

// SetInt64 sets an INT64 entry.
func (b *Builder) SetInt64(tag uint32, v ...uint64) {
	d := make([]byte, 8*len(v))
	for i, x := range v {
		binary.BigEndian.PutUint64(d[8*i:], x)
	}
	b.items[tag] = item{typ: TypeInt64, count: uint32(len(v)), data: d}
}

// SetBin sets a BIN entry.
func (b *Builder) SetBin(tag uint32, v []byte) {
	b.items[tag] = item{typ: TypeBin, count: uint32(len(v)), data: append([]byte(nil), v...)}
}

// Marshal writes the header blob.
func (b *Builder) Marshal() []byte {
	tags := make([]uint32, 0, len(b.items))
	for t := range b.items {
		tags = append(tags, t)
	}
	sort.Slice(tags, func(i, j int) bool { return tags[i] < tags[j] })
	var data []byte
	index := make([]byte, 16*len(tags))
	for i, t := range tags {
		it := b.items[t]
		if align := TypeSize(it.typ); align > 1 && it.typ != TypeBin {
			for len(data)%align != 0 {
				data = append(data, 0)
			}
		}
		binary.BigEndian.PutUint32(index[16*i:], t)
		binary.BigEndian.PutUint32(index[16*i+4:], it.typ)
		binary.BigEndian.PutUint32(index[16*i+8:], uint32(len(data)))
		binary.BigEndian.PutUint32(index[16*i+12:], it.count)
		data = append(data, it.data...)
	}
	out := make([]byte, 0, 16+len(index)+len(data))
	out = append(out, Magic...)
	out = append(out, 0, 0, 0, 0)
	out = binary.BigEndian.AppendUint32(out, uint32(len(tags)))
	out = binary.BigEndian.AppendUint32(out, uint32(len(data)))
	out = append(out, index...)
	return append(out, data...)
}
