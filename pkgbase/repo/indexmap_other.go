//go:build !linux

package repo

import (
	"errors"
	"os"
)

// mapIndexFile reads a cache entry whole (mapIndexFile on Linux maps it).
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
	return readIndexFile(f, st.Size())
}
