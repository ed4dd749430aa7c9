package sqfs

import (
	"encoding/binary"
	"fmt"
)

const (
	metaSize    = 8192   // uncompressed size of a metadata block
	metaRawFlag = 0x8000 // metadata block header: stored uncompressed
)

// metaWriter turns a stream of records into metadata blocks: 8 KiB pieces,
// each compressed on its own and preceded by a 16-bit size. Records may
// cross block boundaries. Blocks are compressed as soon as they fill, so
// the position of the block being filled is always known: references to
// a record are (block position in the table << 16 | offset in the block).
type metaWriter struct {
	comp   compressor
	out    []byte   // finished blocks
	buf    []byte   // the block being filled, less than metaSize bytes
	starts []uint64 // position in out of each finished block
	total  uint64   // uncompressed bytes written
	err    error    // first compression error; later writes are dropped
}

func newMetaWriter(c compressor) *metaWriter {
	return &metaWriter{comp: c, buf: make([]byte, 0, metaSize)}
}

// ref is the reference of the next byte written.
func (m *metaWriter) ref() uint64 {
	return uint64(len(m.out))<<16 | uint64(len(m.buf))
}

func (m *metaWriter) write(p []byte) {
	for len(p) > 0 {
		n := min(len(p), metaSize-len(m.buf))
		m.buf = append(m.buf, p[:n]...)
		p = p[n:]
		m.total += uint64(n)
		if len(m.buf) == metaSize {
			m.flush()
		}
	}
}

func (m *metaWriter) flush() {
	if len(m.buf) == 0 {
		return
	}
	m.starts = append(m.starts, uint64(len(m.out)))
	if m.err == nil {
		z, err := m.comp.compress(m.buf)
		if err != nil {
			m.err = err
		}
		var hdr [2]byte
		if z == nil {
			binary.LittleEndian.PutUint16(hdr[:], uint16(len(m.buf))|metaRawFlag)
			m.out = append(append(m.out, hdr[:]...), m.buf...)
		} else {
			binary.LittleEndian.PutUint16(hdr[:], uint16(len(z)))
			m.out = append(append(m.out, hdr[:]...), z...)
		}
	}
	m.buf = m.buf[:0]
}

// blockAt is the table position of the block holding uncompressed byte u,
// which must be in a finished block or the one being filled.
func (m *metaWriter) blockAt(u uint64) (uint64, error) {
	i := u / metaSize
	switch {
	case i < uint64(len(m.starts)):
		return m.starts[i], nil
	case i == uint64(len(m.starts)):
		return uint64(len(m.out)), nil
	}
	return 0, fmt.Errorf("sqfs: metadata position %d is not written yet", u)
}

// finish closes the last block and returns the table.
func (m *metaWriter) finish() ([]byte, error) {
	m.flush()
	return m.out, m.err
}

// lookupTable stores a table of fixed-size records as metadata blocks
// followed by the list of the blocks' image offsets, the form of the
// fragment, id and xattr id tables. base is the image offset where the
// table starts; it returns the blocks, the list and the list's offset.
func lookupTable(c compressor, records []byte, base uint64) (blocks, list []byte, listPos uint64, err error) {
	m := newMetaWriter(c)
	m.write(records)
	blocks, err = m.finish()
	if err != nil {
		return nil, nil, 0, err
	}
	list = make([]byte, 8*len(m.starts))
	for i, s := range m.starts {
		binary.LittleEndian.PutUint64(list[8*i:], base+s)
	}
	return blocks, list, base + uint64(len(blocks)), nil
}
