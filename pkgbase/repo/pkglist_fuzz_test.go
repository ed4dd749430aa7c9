package repo

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ulikunitz/xz"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// FuzzPkglist: a decompressed apt-rpm index is read entry by entry into
// packages without panics. Seeds: entries of the real p10 index.
func FuzzPkglist(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "..", "shared", "fixtures", "alt", "pkglist.checkinstall.xz")); err == nil {
		if r, err := xz.NewReader(bytes.NewReader(b)); err == nil {
			plain, _ := io.ReadAll(r)
			f.Add(plain[:min(len(plain), 40000)])
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for i := 0; i < 1000; i++ {
			h, err := rpmhdr.ReadHeader(r)
			if errors.Is(err, rpmhdr.ErrNoMoreHeaders) || err != nil {
				return
			}
			p, err := PackageFromHeader(h, evr.ALT)
			if err == nil {
				_ = p.NEVRA()
			}
		}
	})
}
