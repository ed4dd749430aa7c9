package rpmfile

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/cpio"
)

// FuzzRPM: whole .rpm files (lead, headers, payload) are read, described
// and verified without panics.
func FuzzRPM(f *testing.F) {
	for _, n := range []string{"empty-0.1-1.x86_64.rpm", "payload-test-0.1-w9.gzdio.x86_64.rpm", "hlinktest-1.0-1.noarch.rpm"} {
		if b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "..", "shared", "fixtures", "rpm", n)); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Open(bytes.NewReader(data))
		if err != nil {
			return
		}
		if _, err := ReadInfo(p.Header); err != nil {
			return
		}
		p.Verify(VerifyOptions{Entry: func(e *cpio.Entry, r io.Reader) error {
			_, err := io.Copy(io.Discard, io.LimitReader(r, 1<<20))
			return err
		}})
	})
}
