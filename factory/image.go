package factory

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/builder/media/secureboot"
	"github.com/nodeforge/builder/internal/direntries"
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
	// UKI adds the plain UKI (compose.Options.UKI).
	UKI bool
}

// WriteImage makes the media of o.Schematic for every architecture of rel
// and writes them under o.Out/media/<schematic id>/, each file whole or
// not at all. It returns them by path below o.Out.
func WriteImage(ctx context.Context, rel *VerifiedRelease, o ImageOptions) (map[string]report.ArtifactInfo, error) {
	id, err := o.Schematic.ID()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(o.Out, "media", id)
	if o.Installers {
		// Refused before any work: nothing is written when one would be.
		kinds, err := installerKinds(rel, o)
		if err != nil {
			return nil, err
		}
		for _, k := range kinds {
			if err := replaceableLayout(ctx, filepath.Join(dir, k.Repo())); err != nil {
				return nil, err
			}
		}
	}
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
		boot, exts, co, err := rel.Inputs(ctx, arch, o.Schematic.Customization.SystemExtensions.OfficialExtensions)
		if err != nil {
			return nil, err
		}
		co.Schematic, co.Platform, co.DiskFormats, co.Compressions, co.Work, co.UKI = o.Schematic, o.Platform, o.DiskFormats, o.Compressions, work, o.UKI
		if o.SecureBoot != nil {
			co.SecureBoot = &compose.SecureBoot{Signing: o.SecureBoot}
		}
		res, err := compose.Media(ctx, boot, exts, co)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", arch, err)
		}
		for _, f := range res.Files {
			info, err := f.Save(filepath.Join(dir, f.Name))
			if err != nil {
				return nil, err
			}
			files[filepath.ToSlash(filepath.Join("media", id, f.Name))] = info
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
func writeInstallers(ctx context.Context, rel *VerifiedRelease, o ImageOptions, work, dir string, files map[string]report.ArtifactInfo) error {
	kinds, err := installerKinds(rel, o)
	if err != nil {
		return err
	}
	for _, k := range kinds {
		idx, err := rel.Installer(ctx, InstallerOptions{Schematic: o.Schematic, Platform: k.Platform, Work: work, SecureBoot: o.SecureBoot})
		if err != nil {
			return err
		}
		name := k.Repo()
		tmp := filepath.Join(work, name)
		if err := ocilayout.WriteRoot(ctx, tmp, idx); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		// Looked at again: the directory may have changed meanwhile.
		final := filepath.Join(dir, name)
		if err := replaceableLayout(ctx, final); err != nil {
			return err
		}
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

// installerKinds are the installers writeInstallers writes: the
// schematic's and its platform's.
func installerKinds(rel *VerifiedRelease, o ImageOptions) ([]InstallerKind, error) {
	p, err := rel.PlatformTable().Lookup(o.Platform)
	if err != nil {
		return nil, err
	}
	sb := o.SecureBoot != nil
	return []InstallerKind{{SecureBoot: sb}, {Platform: p.Name, SecureBoot: sb}}, nil
}

// replaceableLayout refuses to replace the directory p unless it is
// missing, empty or an OCI layout holding nothing beside what its
// index.json leads to (an earlier installer's): a user's files are never
// removed with it.
func replaceableLayout(ctx context.Context, p string) error {
	foreign, err := ocilayout.Foreign(ctx, p)
	if err != nil {
		return fmt.Errorf("%s is not an earlier installer image (%v): refusing to replace it; move it away or give another --out", p, err)
	}
	if len(foreign) > 0 {
		return fmt.Errorf("%s is an earlier installer image, but it also holds %s, which the builder did not write: refusing to replace it; move them away or give another --out", p, direntries.DescribeNames(foreign))
	}
	return nil
}
