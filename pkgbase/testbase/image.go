package testbase

import (
	"os"
	"time"

	"github.com/nodeforge/builder/pkgbase/debext"
)

// writeHelloImage writes the container image of the extensions' boot
// test (debext.Image: the init, run as "nodeforge-init hello"; with
// several architectures an image index of each one's init). Dated sde, so
// the same inits give the same bytes.
func writeHelloImage(path string, inputs []archInput, sde int64) error {
	var inits []debext.Init
	for _, in := range inputs {
		b, err := os.ReadFile(in.initBin)
		if err != nil {
			return err
		}
		inits = append(inits, debext.Init{GOARCH: in.arch.OCI, Binary: b})
	}
	archive, err := debext.Image(inits, time.Unix(sde, 0))
	if err != nil {
		return err
	}
	return os.WriteFile(path, archive, 0o644)
}
