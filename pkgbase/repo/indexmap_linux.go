package repo

import (
	"errors"
	"os"
	"syscall"
	"unsafe"
)

// mapIndexFile maps a cache entry into memory, read-only, its pages
// populated at once: the page cache is used where it lies, without the
// cost of fresh memory. The mapping stays as long as the process (strings
// of the decoded index point into it) unless release is called, which
// must happen only when nothing of it is in use. Entries are replaced by
// renames, never rewritten in place, so the mapped file does not change.
func mapIndexFile(path string) (data string, release func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > indexCacheMaxSize || st.Size() < int64(len(indexCacheMagic))+12 {
		return "", nil, errors.New("not an index cache entry")
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		return readIndexFile(f, st.Size())
	}
	return unsafe.String(&m[0], len(m)), func() { syscall.Munmap(m) }, nil
}
