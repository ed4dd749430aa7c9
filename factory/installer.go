package factory

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/build/compose"
	"github.com/nodeforge/builder/release"
)

// Annotations of a schematic's installer image, beside the release's.
const (
	AnnotationSchematic = "dev.nodeforge.schematic"
	AnnotationPlatform  = "dev.nodeforge.platform"
)

// InstallerRepo is the name of a schematic's installer image:
// installer, or <platform>-installer for a platform's (the upstream
// factory's names, below the registry front and beside the media).
func InstallerRepo(platform string) string {
	if platform == "" {
		return "installer"
	}
	return platform + "-installer"
}

// InstallerOptions say which installer image to make.
type InstallerOptions struct {
	Schematic *schematic.Schematic
	// Platform is "" for the installer (installer/ID:V), a platform's
	// name for the platform's (PLATFORM-installer/ID:V), which also
	// carries the platform's command line.
	Platform string
	Work     string // a scratch directory
}

// Installer makes the installer image of a schematic: the release's
// installer image, architecture by architecture, with the initramfs that
// carries the schematic's extensions (compose.SchematicInstaller), under
// an index annotated as the release's and with the schematic's ID. builder
// build writes the same index for its spec's schematic.
func (r *Release) Installer(ctx context.Context, o InstallerOptions) (v1.ImageIndex, error) {
	id, err := o.Schematic.ID()
	if err != nil {
		return nil, err
	}
	if o.Platform != "" {
		if _, err := platform.Lookup(o.Platform); err != nil {
			return nil, err
		}
	}
	idx, err := r.index(ctx, release.RepoInstaller)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	ann := maps.Clone(m.Annotations)
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationSchematic] = id
	if o.Platform != "" {
		ann[AnnotationPlatform] = o.Platform
	}
	layers := map[string]*compose.ImageLayer{}
	for _, arch := range r.Params.Architectures {
		if layers[arch], err = r.installerLayer(ctx, arch, o); err != nil {
			return nil, fmt.Errorf("installer, %s: %w", arch, err)
		}
	}
	return compose.ImageIndex(r.SourceDate, ann, r.Params.Architectures, layers, compose.InstallerEntrypoint)
}

// installerLayer is the schematic's installer layer for arch.
func (r *Release) installerLayer(ctx context.Context, arch string, o InstallerOptions) (*compose.ImageLayer, error) {
	boot, exts, co, err := r.Inputs(ctx, arch, o.Schematic.Extensions())
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(o.Work, "installer-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	co.Schematic, co.Platform, co.DiskFormats, co.Work = o.Schematic, o.Platform, []string{}, work
	res, err := compose.Media(ctx, boot, exts, co)
	if err != nil {
		return nil, err
	}
	var cmdline []byte
	if o.Platform != "" {
		want := "cmdline-" + res.Platform + "-" + arch
		for _, f := range res.Files {
			if f.Name == want {
				cmdline = f.Data
			}
		}
	}
	img, err := r.child(ctx, release.RepoInstaller, arch)
	if err != nil {
		return nil, err
	}
	rc, err := onlyLayerReader(img, false)
	if err != nil {
		return nil, err
	}
	base, err := io.ReadAll(io.LimitReader(rc, maxAsset+1))
	rc.Close()
	if err != nil {
		return nil, err
	}
	l, err := compose.SchematicInstaller(base, arch, res.Initramfs, cmdline, r.SourceDate)
	if err != nil {
		return nil, err
	}
	return compose.NewImageLayer(l)
}
