// Package cpio reads the cpio "newc" (SVR4, 070701/070702) archives that
// carry RPM payloads, and rpm's stripped form of them (07070X, written
// since rpm 4.12 when a package has a file of 4 GiB or more). It streams:
// each entry's data is read from the underlying reader, never buffered
// whole.
package cpio

import (
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Entry is one archive member.
type Entry struct {
	Name      string // as stored, usually "./usr/bin/x"
	Ino       uint32
	Mode      uint32 // st_mode: type bits and permissions
	UID, GID  uint32
	Nlink     uint32
	Mtime     uint32
	Size      int64
	DevMajor  uint32
	DevMinor  uint32
	RdevMajor uint32
	RdevMinor uint32
	Check     uint32
	// Stripped marks an entry of rpm's stripped form: the archive gave only
	// Index, the file's position in the RPM header's file list, and every
	// other field came from Reader.Stripped.
	Stripped bool
	Index    int
}

// Mode type bits.
const (
	TypeMask = 0o170000
	TypeReg  = 0o100000
	TypeDir  = 0o040000
	TypeLink = 0o120000
	TypeChr  = 0o020000
	TypeBlk  = 0o060000
	TypeFifo = 0o010000
	TypeSock = 0o140000
)

// Limits for hostile input.
const (
	MaxNameSize  = 64 << 10
	MaxEntrySize = 1 << 40
)

const trailer = "TRAILER!!!"

// Magic numbers of the forms read.
const (
	MagicNewc     = "070701"
	MagicCRC      = "070702"
	MagicStripped = "07070X"
)

// strippedEnd is the index rpm reads as the end of a stripped archive
// (-1 as its unsigned 8-digit field).
const strippedEnd = 0xffffffff

// Reader reads entries.
type Reader struct {
	// Stripped describes the file of a stripped entry (07070X): the
	// archive carries only the file's index in the RPM header's file list,
	// so name, mode, size (64-bit: such packages have files of 4 GiB and
	// more) and the rest come from the header, as rpm takes them. It must
	// refuse an index outside the list. Without it a stripped entry is an
	// error.
	Stripped func(index int) (*Entry, error)

	r      io.Reader
	off    int64 // bytes consumed, for padding
	remain int64 // unread data of the current entry
	pad    int64 // padding after the current entry's data
	done   bool
}

// NewReader returns a reader of entries from r; set Stripped to read rpm's
// stripped form.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Next advances to the next entry; io.EOF after the trailer.
func (c *Reader) Next() (*Entry, error) {
	if c.done {
		return nil, io.EOF
	}
	if err := c.skip(c.remain + c.pad); err != nil {
		return nil, fmt.Errorf("cpio: skipping entry data: %w", unexpected(err))
	}
	c.remain, c.pad = 0, 0
	var hdr [110]byte
	if err := c.read(hdr[:6]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("cpio: archive ends without a trailer")
		}
		return nil, fmt.Errorf("cpio: header: %w", unexpected(err))
	}
	magic := string(hdr[:6])
	if magic == MagicStripped {
		return c.nextStripped()
	}
	if magic != MagicNewc && magic != MagicCRC {
		return nil, fmt.Errorf("cpio: bad magic %q at offset %d (only newc and rpm's stripped form are supported)", magic, c.off-6)
	}
	if err := c.read(hdr[6:]); err != nil {
		return nil, fmt.Errorf("cpio: header: %w", unexpected(err))
	}
	var f [13]uint32
	for i := range f {
		v, err := strconv.ParseUint(string(hdr[6+8*i:14+8*i]), 16, 32)
		if err != nil {
			return nil, fmt.Errorf("cpio: bad header field %d %q", i, hdr[6+8*i:14+8*i])
		}
		f[i] = uint32(v)
	}
	e := &Entry{Ino: f[0], Mode: f[1], UID: f[2], GID: f[3], Nlink: f[4], Mtime: f[5], Size: int64(f[6]),
		DevMajor: f[7], DevMinor: f[8], RdevMajor: f[9], RdevMinor: f[10], Check: f[12]}
	namesize := f[11]
	if namesize == 0 || namesize > MaxNameSize {
		return nil, fmt.Errorf("cpio: name size %d out of range", namesize)
	}
	name := make([]byte, namesize)
	if err := c.read(name); err != nil {
		return nil, fmt.Errorf("cpio: name: %w", unexpected(err))
	}
	if name[namesize-1] != 0 {
		return nil, errors.New("cpio: name is not NUL-terminated")
	}
	e.Name = string(name[:namesize-1])
	if err := c.skip((4 - c.off%4) % 4); err != nil {
		return nil, fmt.Errorf("cpio: name padding: %w", unexpected(err))
	}
	if e.Name == trailer {
		c.done = true
		return nil, io.EOF
	}
	c.remain = e.Size
	c.pad = (4 - e.Size%4) % 4
	return e, nil
}

// nextStripped reads the rest of a stripped header (8 hex digits of the
// file index, then padding to 4 bytes) and asks Stripped for the entry.
func (c *Reader) nextStripped() (*Entry, error) {
	at := c.off - 6
	var fx [8]byte
	if err := c.read(fx[:]); err != nil {
		return nil, fmt.Errorf("cpio: stripped header: %w", unexpected(err))
	}
	idx, err := strconv.ParseUint(string(fx[:]), 16, 32)
	if err != nil {
		return nil, fmt.Errorf("cpio: bad file index %q in the stripped header at offset %d", fx[:], at)
	}
	if err := c.skip((4 - c.off%4) % 4); err != nil {
		return nil, fmt.Errorf("cpio: stripped header padding: %w", unexpected(err))
	}
	if idx == strippedEnd {
		c.done = true
		return nil, io.EOF
	}
	if c.Stripped == nil {
		return nil, fmt.Errorf("cpio: stripped entry (07070X) at offset %d: its file list is in the RPM header, which was not given", at)
	}
	e, err := c.Stripped(int(idx))
	if err != nil {
		return nil, fmt.Errorf("cpio: stripped entry at offset %d: %w", at, err)
	}
	if e.Size < 0 || e.Size > MaxEntrySize {
		return nil, fmt.Errorf("cpio: stripped entry %d (%s): size %d out of range", idx, e.Name, e.Size)
	}
	e.Stripped, e.Index = true, int(idx)
	c.remain = e.Size
	c.pad = (4 - e.Size%4) % 4
	return e, nil
}

// Read reads the current entry's data.
func (c *Reader) Read(p []byte) (int, error) {
	if c.remain <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > c.remain {
		p = p[:c.remain]
	}
	n, err := c.r.Read(p)
	c.off += int64(n)
	c.remain -= int64(n)
	if err == io.EOF && c.remain > 0 {
		err = io.ErrUnexpectedEOF
	}
	if err == io.EOF {
		err = nil
	}
	return n, err
}

func (c *Reader) read(b []byte) error {
	n, err := io.ReadFull(c.r, b)
	c.off += int64(n)
	return err
}

func (c *Reader) skip(n int64) error {
	if n <= 0 {
		return nil
	}
	m, err := io.CopyN(io.Discard, c.r, n)
	c.off += m
	return err
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
