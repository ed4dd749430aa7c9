package builder

import (
	"encoding/json"
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
	// (OUT/extensions/<name>), Images each container image's
	// (OUT/images/<name>).
	Boot, Installer    v1.ImageIndex
	Extensions, Images map[string]v1.ImageIndex
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
	// Each index must be the one the report names: another build into the
	// same directory since may have replaced it.
	open := func(dir, want string) (v1.ImageIndex, error) {
		d, err := ocilayout.Open(dir)
		if err != nil {
			return nil, fmt.Errorf("build output %s: %w (run builder build first)", dir, err)
		}
		idx, err := d.Root()
		if err != nil {
			return nil, err
		}
		if got, err := idx.Digest(); err != nil || got.String() != want {
			return nil, fmt.Errorf("build output %s is not the build reported (index %v, the report says %s): was it built again meanwhile?", dir, got, want)
		}
		return idx, nil
	}
	o := &Outputs{Extensions: map[string]v1.ImageIndex{}, Images: map[string]v1.ImageIndex{}}
	if o.Boot, err = open(filepath.Join(out, "oci"), rep.OCIIndex); err != nil {
		return nil, err
	}
	if o.Installer, err = open(filepath.Join(out, "installer"), rep.Installer); err != nil {
		return nil, err
	}
	for name, want := range rep.Extensions {
		if o.Extensions[name], err = open(filepath.Join(out, "extensions", name), want); err != nil {
			return nil, err
		}
	}
	for name, want := range rep.Images {
		if o.Images[name], err = open(filepath.Join(out, filepath.FromSlash(ImagesDir(name))), want); err != nil {
			return nil, err
		}
	}
	if o.ReportJSON, err = os.ReadFile(filepath.Join(out, "report.json")); err != nil {
		return nil, fmt.Errorf("build report: %w", err)
	}
	var written report.Report
	if err := json.Unmarshal(o.ReportJSON, &written); err != nil || written.OCIIndex != rep.OCIIndex || written.LockSHA256 != rep.LockSHA256 {
		return nil, fmt.Errorf("build report %s is not the build reported: was it built again meanwhile?", filepath.Join(out, "report.json"))
	}
	return o, nil
}
