package sqfs

import (
	"errors"
	"io"
)

// WriteBytes is Write into memory, returning the image. The buffer can
// seek, so each data block is copied into it as soon as it is compressed,
// while later blocks still are, rather than all of them at the end; it
// grows by chunks, never copying what it holds, and the image is copied
// once into a slice of its size.
func WriteBytes(entries []Entry, opts Options) ([]byte, error) {
	var m memFile
	if err := Write(&m, entries, opts); err != nil {
		return nil, err
	}
	return m.bytes(), nil
}

// memChunk is the size of memFile's chunks.
const memChunk = 1 << 20

// memFile is an io.WriteSeeker in memory: a write past the end extends
// it (a gap left by a seek reads as zeros).
type memFile struct {
	chunks [][]byte // each memChunk bytes
	size   int64
	off    int64
}

func (m *memFile) Write(p []byte) (int, error) {
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

func (m *memFile) Seek(offset int64, whence int) (int64, error) {
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

// bytes are the file's bytes, in one slice.
func (m *memFile) bytes() []byte {
	b := make([]byte, m.size)
	for i, c := range m.chunks {
		copy(b[int64(i)*memChunk:], c)
	}
	return b
}
