package testbase

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// ForTest builds (or finds cached) the base for a test and returns its
// spec's path. The test is skipped with -short (the base is minutes of
// work the first time), and where a tool or the kernel package is missing
// it is skipped on a workstation and fails under CI=true.
func ForTest(t testing.TB, opts Options) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the Debian test base; skipped with -short")
	}
	for _, tool := range []string{"rpmbuild", "createrepo_c", "dpkg-deb"} {
		testutil.NeedTool(t, tool)
	}
	if opts.Log == nil {
		opts.Log = t.Logf
	}
	specPath, err := Build(filepath.Join(t.TempDir(), "base"), opts)
	if errors.Is(err, ErrNoKernel) || errors.Is(err, ErrNoDebs) {
		testutil.Missing(t, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	return specPath
}

// EFIForTest reads an EFI binary of Debian's systemd-boot-efi (the
// package scripts/fetch-test-kernel.sh caches for the boot tests):
// systemd-bootx64.efi, linuxx64.efi.stub. Where it is missing the test
// is skipped on a workstation (nil) and fails under CI=true.
func EFIForTest(t testing.TB, name string) []byte {
	t.Helper()
	b, err := BootEFI(Options{}, name)
	if errors.Is(err, ErrNoKernel) {
		testutil.Missing(t, err.Error())
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}
