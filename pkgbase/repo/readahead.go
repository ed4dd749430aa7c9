package repo

import (
	"io"
	"sync"
)

// readAhead reads its source on a goroutine of its own, a few chunks
// ahead of its reader: fetching, hashing and decompressing an index
// overlap with parsing it. Its reader sees the source's bytes and then
// its error, as from the source itself.
type readAhead struct {
	full  chan raChunk
	free  chan []byte
	stop  chan struct{}
	done  chan struct{}
	chunk []byte // the chunk being read, to give back
	cur   []byte // what is left of it
	err   error  // after cur
	once  sync.Once
}

type raChunk struct {
	b   []byte
	err error
}

const (
	raChunkSize = 128 << 10
	raChunks    = 4
)

func newReadAhead(r io.Reader) *readAhead {
	a := &readAhead{
		full: make(chan raChunk, raChunks),
		free: make(chan []byte, raChunks),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	for range raChunks {
		a.free <- make([]byte, raChunkSize)
	}
	go a.run(r)
	return a
}

func (a *readAhead) run(r io.Reader) {
	defer close(a.done)
	for {
		var b []byte
		select {
		case b = <-a.free:
		case <-a.stop:
			return
		}
		n, err := io.ReadAtLeast(r, b[:cap(b)], 1)
		select {
		case a.full <- raChunk{b[:n], err}:
		case <-a.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

func (a *readAhead) Read(p []byte) (int, error) {
	for len(a.cur) == 0 {
		if a.chunk != nil {
			a.free <- a.chunk // never blocks: free has room for every chunk
			a.chunk = nil
		}
		if a.err != nil {
			return 0, a.err
		}
		c := <-a.full
		a.chunk, a.cur, a.err = c.b, c.b, c.err
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	return n, nil
}

// Close stops the goroutine and waits for it: the source is not read
// once Close returns.
func (a *readAhead) Close() error {
	a.once.Do(func() { close(a.stop) })
	<-a.done
	return nil
}
