package build

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/internal/ocilayout"
)

// Outputs are what a build hands on to be published: its images and its
// report as written. They are read from the output directory, each blob
// checked against its digest as it is read, so what is published is what
// the build wrote and the report vouches for.
type Outputs struct {
	// Boot is the index of the boot assets (OUT/oci), Installer the
	// installer image's (OUT/installer), Extensions each extension's
	// (OUT/extensions/<name>).
	Boot, Installer v1.ImageIndex
	Extensions      map[string]v1.ImageIndex
	// ReportJSON is OUT/report.json as written.
	ReportJSON []byte
}

// OpenOutputs opens the outputs of the build into out (as Build resolves
// it) that rep reports.
func OpenOutputs(out string, rep *report.Report) (*Outputs, error) {
	out, err := ResolveOutput(out)
	if err != nil {
		return nil, err
	}
	open := func(dir string) (v1.ImageIndex, error) {
		d, err := ocilayout.Open(dir)
		if err != nil {
			return nil, fmt.Errorf("build output %s: %w (run builder build first)", dir, err)
		}
		return d.Root()
	}
	o := &Outputs{Extensions: map[string]v1.ImageIndex{}}
	if o.Boot, err = open(filepath.Join(out, "oci")); err != nil {
		return nil, err
	}
	if o.Installer, err = open(filepath.Join(out, "installer")); err != nil {
		return nil, err
	}
	for name := range rep.Extensions {
		if o.Extensions[name], err = open(filepath.Join(out, "extensions", name)); err != nil {
			return nil, err
		}
	}
	if o.ReportJSON, err = os.ReadFile(filepath.Join(out, "report.json")); err != nil {
		return nil, fmt.Errorf("build report: %w", err)
	}
	return o, nil
}
