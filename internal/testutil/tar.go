package testutil

import (
	"archive/tar"
	"io"
	"strings"
	"testing"
)

// TarFile is one regular file of a tar.
type TarFile struct {
	Header *tar.Header
	Data   []byte
}

// ReadTar reads the regular files of a tar by path (without "./").
func ReadTar(t testing.TB, r io.Reader) map[string]TarFile {
	t.Helper()
	out := map[string]TarFile{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out[strings.TrimPrefix(h.Name, "./")] = TarFile{Header: h, Data: b}
		}
	}
}
