package sqfs

import (
	"errors"
	"io"
)

// memChunk is the size of a Buffer's chunks.
const memChunk = 1 << 20

// Buffer is an io.WriteSeeker in memory for an image: Write, which can
// seek it, copies each data block in as soon as it is compressed, while
// later blocks still are, where a bytes.Buffer gets them all at the end.
// It grows by chunks, never copying what it holds; Bytes copies the image
// once into a slice of its size. A write past the end extends it (a gap
// left by a seek reads as zeros).
type Buffer struct {
	chunks [][]byte // each memChunk bytes
	size   int64
	off    int64
}

func (m *Buffer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i, at := int(m.off/memChunk), int(m.off%memChunk)
		for len(m.chunks) <= i {
			m.chunks = append(m.chunks, make([]byte, memChunk))
		}
		k := copy(m.chunks[i][at:], p)
		p = p[k:]
		m.off += int64(k)
	}
	m.size = max(m.size, m.off)
	return n, nil
}

func (m *Buffer) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += m.off
	case io.SeekEnd:
		offset += m.size
	case io.SeekStart:
	default:
		return 0, errors.New("sqfs: seek: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("sqfs: seek: negative position")
	}
	m.off = offset
	return offset, nil
}

// Bytes are the buffer's bytes, in one slice.
func (m *Buffer) Bytes() []byte {
	b := make([]byte, m.size)
	for i, c := range m.chunks {
		copy(b[int64(i)*memChunk:], c)
	}
	return b
}
