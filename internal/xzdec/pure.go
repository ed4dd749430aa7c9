package xzdec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"sync"

	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"
)

// The pure Go decoder, github.com/ulikunitz/xz behind the same behaviour
// as the cgo one. It is what NewReader returns without cgo; the tests and
// the fuzz target use it with cgo too, to compare the two.
//
// ulikunitz/xz allocates whatever dictionary an .xz Block Header asks for
// (up to 4 GiB), so its input goes through a scanner that follows the .xz
// structure (headers, LZMA2 chunk sizes, Index, footers) as the bytes go
// by and refuses a dictionary over the memory limit before ulikunitz/xz sees the
// header. ulikunitz/xz decodes only the LZMA2 filter alone; the scanner
// reports other filter chains as unsupported options.

// pureOverhead approximates the decoder memory besides the dictionary, as
// liblzma counts it, so both decoders refuse about the same streams.
const pureOverhead = 64 << 10

type pureReader struct {
	mu     sync.Mutex
	format Format
	limit  uint64
	in     *guardReader
	dec    io.Reader // made by the first Read
	err    error     // sticky
}

func newPureReader(r io.Reader, f Format, limit uint64) *pureReader {
	g := &guardReader{src: r, buf: make([]byte, inBufSize)}
	if f == XZ {
		g.scan = &xzScanner{limit: limit, need: 4}
	}
	return &pureReader{format: f, limit: limit, in: g}
}

func (d *pureReader) Read(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return 0, d.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if d.dec == nil {
		if err := d.start(); err != nil {
			d.err = err
			return 0, err
		}
	}
	for empty := 0; ; {
		n, err := d.dec.Read(p)
		if err == io.EOF {
			err = d.end()
		}
		if err != nil {
			d.err = d.mapError(err)
			if n > 0 && d.err == io.EOF {
				return n, nil
			}
			return n, d.err
		}
		if n > 0 {
			return n, nil
		}
		if empty++; empty >= maxEmptyReads {
			d.err = io.ErrNoProgress
			return 0, d.err
		}
	}
}

// start reads the header and makes the ulikunitz/xz reader.
func (d *pureReader) start() error {
	if d.format == XZ {
		dec, err := xz.NewReader(d.in)
		if err != nil {
			return d.mapError(err)
		}
		d.dec = dec
		return nil
	}
	// .lzma: props (1 byte), dictionary size (4), uncompressed size (8).
	h, err := d.in.peek(lzma.HeaderLen)
	if len(h) < lzma.HeaderLen {
		if err == io.EOF {
			return errTruncated
		}
		return err
	}
	if h[0] >= 9*5*5 {
		return errNotLZMA
	}
	if need := uint64(binary.LittleEndian.Uint32(h[1:5])) + pureOverhead; need > d.limit {
		return memLimitError(need, d.limit)
	}
	dec, err := lzma.ReaderConfig{DictCap: int(min(d.limit, lzma.MaxDictCap))}.NewReader(d.in)
	if err != nil {
		if e := d.mapError(err); errors.Is(e, errCorrupt) {
			return fmt.Errorf("%w (%v)", errNotLZMA, err)
		}
		return d.mapError(err)
	}
	d.dec = dec
	return nil
}

// end checks what follows the end of the data: io.EOF if nothing.
func (d *pureReader) end() error {
	g := d.in
	if d.format == XZ {
		// ulikunitz/xz reads .xz input up to its end itself, but it
		// takes a stream cut inside a Block Header for the end.
		if !g.scan.complete() {
			return errTruncated
		}
		return io.EOF
	}
	if g.r < g.w || g.fill() {
		return errTrailing
	}
	return g.err
}

// mapError turns an error of ulikunitz/xz into one of the package's.
func (d *pureReader) mapError(err error) error {
	g := d.in
	var dictErr *lzma.ErrDictSize
	switch {
	case err == io.EOF:
		return err
	case g.scanErr != nil:
		return g.scanErr
	case g.srcErr != nil && err == g.srcErr:
		return err
	case errors.As(err, &dictErr):
		return memLimitError(uint64(dictErr.HeaderDictSize)+pureOverhead, d.limit)
	case err == io.ErrUnexpectedEOF || err.Error() == "lzma: unexpected EOF":
		return errTruncated
	case strings.Contains(err.Error(), "checksum error for block"):
		return errCheck
	}
	return fmt.Errorf("%w (%v)", errCorrupt, err)
}

// Close releases the reader. Read returns an error after Close.
func (d *pureReader) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dec = nil
	d.in = &guardReader{err: errClosed}
	d.err = errClosed
	return nil
}

// guardReader is a buffered reader of the compressed input. For .xz it
// runs every byte read from the source through an xzScanner first.
type guardReader struct {
	src     io.Reader
	buf     []byte
	r, w    int
	scan    *xzScanner // nil for .lzma
	err     error      // sticky: io.EOF, a source or a scanner error
	srcErr  error      // the source's error, if any
	scanErr error      // the scanner's error, if any
}

// fill reads more input after the unread bytes. It reports whether it got
// any; if not, g.err says why.
func (g *guardReader) fill() bool {
	if g.err != nil {
		return false
	}
	if g.r > 0 {
		g.w = copy(g.buf, g.buf[g.r:g.w])
		g.r = 0
	}
	for range maxEmptyReads {
		n, err := g.src.Read(g.buf[g.w:])
		if n > 0 && g.scan != nil {
			if serr := g.scan.scan(g.buf[g.w : g.w+n]); serr != nil {
				// Hold back the whole read: the decoder mustn't
				// see what the scanner refused.
				g.scanErr, g.err = serr, serr
				g.r, g.w = 0, 0
				return false
			}
		}
		g.w += n
		if err != nil {
			g.err = err
			if err != io.EOF {
				g.srcErr = err
			}
		}
		if n > 0 {
			return true
		}
		if err != nil {
			return false
		}
	}
	g.err = io.ErrNoProgress
	return false
}

func (g *guardReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if g.r == g.w && !g.fill() {
		return 0, g.err
	}
	n := copy(p, g.buf[g.r:g.w])
	g.r += n
	return n, nil
}

// ReadByte makes guardReader an io.ByteReader, which ulikunitz/xz uses
// instead of wrapping it in a reader of single bytes.
func (g *guardReader) ReadByte() (byte, error) {
	if g.r == g.w && !g.fill() {
		return 0, g.err
	}
	c := g.buf[g.r]
	g.r++
	return c, nil
}

// peek returns the next n bytes without consuming them (fewer, and the
// reason, at the end of the input). n must be at most len(g.buf).
func (g *guardReader) peek(n int) ([]byte, error) {
	for g.w-g.r < n {
		if !g.fill() {
			return g.buf[g.r:g.w], g.err
		}
	}
	return g.buf[g.r : g.r+n], nil
}

// xzScanner follows the structure of .xz streams byte by byte: Stream
// Header, Blocks (Block Header, LZMA2 chunks, Block Padding, Check),
// Index, Stream Footer and Stream Padding. It checks only what it needs to
// keep its place and the Block Headers' filter chains and dictionary
// sizes; ulikunitz/xz checks the rest.
type xzScanner struct {
	limit   uint64 // memory limit
	state   scanState
	need    int       // bytes to collect into hdr
	hdr     []byte    // the bytes collected so far
	skip    uint64    // bytes left to skip in scanSkip
	after   scanState // the state after scanSkip
	check   uint64    // Check size of the current stream
	comp    uint64    // compressed size of the current Block
	idx     uint64    // size of the current Index so far
	vlis    uint64    // Index VLIs left after the current one
	vli     int       // bytes of the current Index VLI
	records uint64    // the Index's Number of Records
	counted bool      // the Index's Number of Records was read
	streams int       // streams whose header was read
	err     error
}

type scanState int

const (
	scanStreamStart  scanState = iota // 4 bytes: Stream Padding or a Stream Header's start
	scanStreamHeader                  // the rest of the 12-byte Stream Header
	scanBlockStart                    // 1 byte: Block Header Size or Index Indicator
	scanBlockHeader                   // the rest of the Block Header
	scanChunk                         // 1 byte: LZMA2 control byte
	scanChunkHeader                   // the rest of an LZMA2 chunk header
	scanIndex                         // Index VLIs, a byte at a time
	scanSkip                          // skip bytes, then go to after
)

var xzMagic = []byte{0xFD, '7', 'z', 'X', 'Z', 0x00}

func (s *xzScanner) scan(b []byte) error {
	for len(b) > 0 && s.err == nil {
		switch s.state {
		case scanSkip:
			k := uint64(len(b))
			if k > s.skip {
				k = s.skip
			}
			s.skip -= k
			b = b[k:]
			if s.skip == 0 {
				s.setState(s.after)
			}
			continue
		case scanIndex:
			c := b[0]
			b = b[1:]
			s.err = s.indexByte(c)
			continue
		}
		k := min(len(b), s.need-len(s.hdr))
		s.hdr = append(s.hdr, b[:k]...)
		b = b[k:]
		if len(s.hdr) == s.need {
			s.err = s.collected()
		}
	}
	return s.err
}

// complete tells whether the input so far ends after a whole stream and
// its Stream Padding.
func (s *xzScanner) complete() bool {
	return s.err == nil && s.streams > 0 && s.state == scanStreamStart && len(s.hdr) == 0
}

// setState enters state st, with its first collection size.
func (s *xzScanner) setState(st scanState) {
	s.state = st
	s.hdr = s.hdr[:0]
	switch st {
	case scanStreamStart:
		s.need = 4
	case scanBlockStart, scanChunk:
		s.need = 1
	}
}

func (s *xzScanner) skipTo(n uint64, st scanState) {
	if n == 0 {
		s.setState(st)
		return
	}
	s.state, s.skip, s.after = scanSkip, n, st
}

// collected handles the s.need bytes collected in s.hdr.
func (s *xzScanner) collected() error {
	h := s.hdr
	switch s.state {
	case scanStreamStart:
		if s.streams > 0 && binary.LittleEndian.Uint32(h) == 0 {
			s.setState(scanStreamStart) // Stream Padding
			return nil
		}
		s.state, s.need = scanStreamHeader, 12 // keep the 4 bytes
	case scanStreamHeader:
		if string(h[:6]) != string(xzMagic) {
			if s.streams == 0 {
				return errNotXZ
			}
			return errCorrupt
		}
		s.streams++
		s.check = checkSize(h[7] & 0x0F)
		s.setState(scanBlockStart)
	case scanBlockStart:
		if h[0] == 0 { // Index Indicator
			s.state, s.idx, s.vli, s.counted, s.records = scanIndex, 1, 0, false, 0
			return nil
		}
		s.state, s.need = scanBlockHeader, (int(h[0])+1)*4
	case scanBlockHeader:
		if err := blockHeader(h, s.limit); err != nil {
			return err
		}
		s.comp = 0
		s.setState(scanChunk)
	case scanChunk:
		switch c := h[0]; {
		case c == 0x00: // end of LZMA2 data, then Block Padding and Check
			s.comp++
			s.skipTo((4-s.comp%4)%4+s.check, scanBlockStart)
		case c == 0x01 || c == 0x02: // uncompressed chunk
			s.state, s.need = scanChunkHeader, 3
		case c >= 0xC0: // LZMA chunk with new properties
			s.state, s.need = scanChunkHeader, 6
		case c >= 0x80: // LZMA chunk
			s.state, s.need = scanChunkHeader, 5
		default:
			return errCorrupt
		}
	case scanChunkHeader:
		var size uint64
		if h[0] < 0x80 {
			size = uint64(binary.BigEndian.Uint16(h[1:3])) + 1
		} else {
			size = uint64(binary.BigEndian.Uint16(h[3:5])) + 1
		}
		s.comp += uint64(len(h)) + size
		s.skipTo(size, scanChunk)
	}
	return nil
}

// indexByte takes the next byte of an Index after the Index Indicator:
// Number of Records, then two VLIs a record, then Index Padding and the
// CRC32, then the Stream Footer.
func (s *xzScanner) indexByte(c byte) error {
	s.idx++
	if !s.counted {
		s.records |= uint64(c&0x7F) << (7 * s.vli)
	}
	s.vli++
	if c&0x80 != 0 {
		if s.vli == 9 {
			return errCorrupt
		}
		return nil
	}
	s.vli = 0
	if !s.counted {
		s.counted = true
		s.vlis = 2 * s.records // records < 2^63: a VLI has 63 bits
	} else {
		s.vlis--
	}
	if s.vlis == 0 {
		s.skipTo((4-s.idx%4)%4+4+12, scanStreamStart)
	}
	return nil
}

// blockHeader checks a Block Header: its CRC32, a filter chain that
// ulikunitz/xz decodes (LZMA2 alone), and the dictionary size.
func blockHeader(h []byte, limit uint64) error {
	end := len(h) - 4
	if crc32.ChecksumIEEE(h[:end]) != binary.LittleEndian.Uint32(h[end:]) {
		return errCorrupt
	}
	flags := h[1]
	if flags&0x3C != 0 {
		return errOptions // reserved bits
	}
	p := 2
	vli := func() (uint64, error) {
		var v uint64
		for i := range 9 {
			if p >= end {
				return 0, errCorrupt
			}
			c := h[p]
			p++
			v |= uint64(c&0x7F) << (7 * i)
			if c&0x80 == 0 {
				return v, nil
			}
		}
		return 0, errCorrupt
	}
	for _, bit := range []byte{0x40, 0x80} { // Compressed and Uncompressed Size
		if flags&bit != 0 {
			if _, err := vli(); err != nil {
				return err
			}
		}
	}
	if flags&0x03 != 0 {
		return errOptions // more than one filter
	}
	id, err := vli()
	if err != nil {
		return err
	}
	size, err := vli()
	if err != nil {
		return err
	}
	if id != 0x21 || size != 1 {
		return errOptions // not LZMA2
	}
	if p >= end {
		return errCorrupt
	}
	d := h[p]
	if d > 40 {
		return errOptions
	}
	dict := uint64(0xFFFFFFFF)
	if d < 40 {
		dict = uint64(2|d&1) << (d/2 + 11)
	}
	if need := dict + pureOverhead; need > limit {
		return memLimitError(need, limit)
	}
	return nil
}

// checkSize is the size of the Check field for a Check ID.
func checkSize(id byte) uint64 {
	if id == 0 {
		return 0
	}
	return 4 << ((id - 1) / 3)
}
