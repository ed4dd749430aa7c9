// Package hugepage gets large buffers backed by transparent huge pages
// where the kernel offers them on request (THP "madvise", Debian's
// default). A build fills hundreds of megabytes of fresh memory (the
// payloads decompressed, the squashfs read back, the initramfs); faulted
// in 4 KiB at a time that cost a cold build of the real base 3.5 s of
// system time on the 2-core VM, 2 MiB at a time almost nothing. Where the
// kernel refuses, nothing changes.
package hugepage

import (
	"io"
	"os"
	"unsafe"
)

// size is a huge page's.
const size = 2 << 20

// Advise asks for huge pages behind the whole 2 MiB pages inside
// [p, p+n), which should not have been touched yet.
func Advise(p unsafe.Pointer, n uintptr) {
	start := (uintptr(p) + size - 1) &^ (size - 1)
	end := (uintptr(p) + n) &^ (size - 1)
	if end > start {
		advise(start, end-start)
	}
}

// Bytes is make([]byte, n), advised: for buffers of megabytes, filled
// right after they are made (smaller ones gain nothing).
func Bytes(n int) []byte {
	b := make([]byte, n)
	if n >= size {
		Advise(unsafe.Pointer(unsafe.SliceData(b)), uintptr(n))
	}
	return b
}

// ReadFile is os.ReadFile into a buffer from Bytes.
func ReadFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := Bytes(int(fi.Size()))
	n, err := io.ReadFull(f, b)
	if err == io.ErrUnexpectedEOF {
		return b[:n], nil // the file shrank: what it holds now
	}
	if err != nil {
		return nil, err
	}
	// The file grew: the rest, as os.ReadFile would read it.
	rest, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return append(b, rest...), nil
}
