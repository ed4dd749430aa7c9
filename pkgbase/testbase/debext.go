package testbase

import (
	"os"
	"path/filepath"

	"github.com/nodeforge/builder/pkgbase/debext"
)

// The extensions' base (Options.Extensions): Debian's packages wrapped
// unchanged into RPMs of the same names, the cri and btrfs extensions made
// from them by definitions that relocate Debian's layout into the
// extension contract's (/usr/local), and the libraries they load in the
// root filesystem, as a distribution's root has them. The bootable demo
// base makes its cri and btrfs extensions of the same packages with the
// same definitions (pkgbase/debext).
var (
	// CRIDebs make the cri extension.
	CRIDebs = debext.CRIDebs
	// BtrfsDebs make the btrfs extension.
	BtrfsDebs = debext.BtrfsDebs
	// LibDebs go into the root filesystem: what the extensions' programs
	// load.
	LibDebs = debext.LibDebs
)

// writeExtDefs writes the cri and btrfs definitions into dir.
func writeExtDefs(dir string) error {
	for _, d := range debext.Definitions() {
		if err := os.WriteFile(filepath.Join(dir, d.File), []byte(d.YAML), 0o644); err != nil {
			return err
		}
	}
	return nil
}
