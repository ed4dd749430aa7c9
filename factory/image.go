package factory

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/build/compose"
	"github.com/nodeforge/builder/build/media/secureboot"
	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/internal/digest"
	ocilayout "github.com/nodeforge/builder/internal/ocilayout"
)

// ImageOptions say which media to make from a release.
type ImageOptions struct {
	Schematic *schematic.Schematic
	// Platform, DiskFormats and Compressions as compose.Options has them.
	Platform     string
	DiskFormats  []string
	Compressions []string
	// Out is where the media go: Out/media/<schematic id>/, as builder
	// image writes them.
	Out string
	// Installers adds the schematic's installer images, OCI layouts:
	// installer/ and <platform>-installer/ beside the media (with
	// SecureBoot installer-secureboot/ and <platform>-installer-secureboot/).
	Installers bool
	// SecureBoot makes the ISO and disk images the Secure Boot ones,
	// signed with this key set, and adds the signed UKI.
	SecureBoot *secureboot.Signing
}

// WriteImage makes the media of o.Schematic for every architecture of rel
// and writes them under o.Out/media/<schematic id>/, each file whole or
// not at all. It returns them by path below o.Out.
func WriteImage(ctx context.Context, rel *Release, o ImageOptions) (map[string]report.ArtifactInfo, error) {
	id, err := o.Schematic.ID()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(o.Out, "media", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(o.Out, ".image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	files := map[string]report.ArtifactInfo{}
	for _, arch := range rel.Params.Architectures {
		boot, exts, co, err := rel.Inputs(ctx, arch, o.Schematic.Extensions())
		if err != nil {
			return nil, err
		}
		co.Schematic, co.Platform, co.DiskFormats, co.Compressions, co.Work = o.Schematic, o.Platform, o.DiskFormats, o.Compressions, work
		if o.SecureBoot != nil {
			co.SecureBoot = &compose.SecureBoot{Signing: o.SecureBoot}
		}
		res, err := compose.Media(ctx, boot, exts, co)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", arch, err)
		}
		for _, f := range res.Files {
			if err := atomicfile.Write(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
				return nil, err
			}
			files[filepath.ToSlash(filepath.Join("media", id, f.Name))] = report.ArtifactInfo{SHA256: digest.SHA256Hex(f.Data), Size: int64(len(f.Data))}
		}
	}
	if o.Installers {
		if err := writeInstallers(ctx, rel, o, work, dir, files); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// writeInstallers writes the schematic's installer and its platform's
// installer (with o.SecureBoot the Secure Boot ones, installer-secureboot
// and <platform>-installer-secureboot) as OCI layouts in dir, each
// replacing what was there only once whole, and lists each by its index
// digest and manifest size.
func writeInstallers(ctx context.Context, rel *Release, o ImageOptions, work, dir string, files map[string]report.ArtifactInfo) error {
	p, err := platform.Lookup(o.Platform)
	if err != nil {
		return err
	}
	for _, pl := range []string{"", p.Name} {
		idx, err := rel.Installer(ctx, InstallerOptions{Schematic: o.Schematic, Platform: pl, Work: work, SecureBoot: o.SecureBoot})
		if err != nil {
			return err
		}
		name := installerKind{platform: pl, secureBoot: o.SecureBoot != nil}.repo()
		tmp := filepath.Join(work, name)
		if err := ocilayout.WriteRoot(ctx, tmp, idx); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		final := filepath.Join(dir, name)
		if err := os.RemoveAll(final); err != nil {
			return err
		}
		if err := os.Rename(tmp, final); err != nil {
			return err
		}
		d, err := idx.Digest()
		if err != nil {
			return err
		}
		raw, err := idx.RawManifest()
		if err != nil {
			return err
		}
		files[filepath.ToSlash(filepath.Join("media", filepath.Base(dir), name))] = report.ArtifactInfo{SHA256: d.Hex, Size: int64(len(raw))}
	}
	return nil
}
