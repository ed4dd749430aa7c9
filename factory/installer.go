package factory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/builder/media/secureboot"
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

// InstallerKind names one of a schematic's installer images: the plain
// or a platform's, and whether it is the Secure Boot one.
type InstallerKind struct {
	Platform   string
	SecureBoot bool
}

// Repo is the kind's repository name: [PLATFORM-]installer[-secureboot]
// (the upstream factory's names).
func (k InstallerKind) Repo() string {
	if k.SecureBoot {
		return InstallerRepo(k.Platform) + compose.SecureBootSuffix
	}
	return InstallerRepo(k.Platform)
}

// ref is the reference of a schematic's installer of the kind for a
// version, REPO/ID:vVERSION (Talos's tag), without a host.
func (k InstallerKind) ref(id, version string) string {
	return k.Repo() + "/" + id + ":" + TalosVersion(version)
}

// platformWord is a platform's name as a repository carries it (lower
// case: equinixMetal has no installer repository); whether the platform
// is one of a release's is its table's to say.
var platformWord = regexp.MustCompile(`^(` + installerPlatform + `)$`)

const installerPlatform = `digital-ocean|[a-z][a-z0-9]*`

// ParseInstallerRepo is the kind a repository name names (repo's
// inverse); false for a name that is no installer's.
func ParseInstallerRepo(name string) (InstallerKind, bool) {
	name, sb := strings.CutSuffix(name, compose.SecureBootSuffix)
	if name == "installer" {
		return InstallerKind{SecureBoot: sb}, true
	}
	pl, ok := strings.CutSuffix(name, "-installer")
	if !ok || !platformWord.MatchString(pl) {
		return InstallerKind{}, false
	}
	return InstallerKind{Platform: pl, SecureBoot: sb}, true
}

// InstallerOptions say which installer image to make.
type InstallerOptions struct {
	Schematic *schematic.Schematic
	// Platform is "" for the installer (installer/ID:V), a platform's
	// name for the platform's (PLATFORM-installer/ID:V), which also
	// carries the platform's command line.
	Platform string
	Work     string // a scratch directory
	// SecureBoot makes the Secure Boot installer (installer-secureboot):
	// its boot code is the signed ESP of the Secure Boot media
	// (compose.SchematicInstaller), signed with this key set.
	SecureBoot *secureboot.Signing
	// Layers keeps the extensions' squashfs images between compositions
	// (nil: none kept).
	Layers compose.LayerCache
}

// Installer makes the installer image of a schematic: the release's
// installer image, architecture by architecture, with the boot assets of
// the schematic's media (installerLayers), under an index annotated as the
// release's and with the schematic's ID. builder build writes the same
// index for its spec's schematic.
func (r *VerifiedRelease) Installer(ctx context.Context, o InstallerOptions) (v1.ImageIndex, error) {
	ann, err := r.installerAnnotations(ctx, o)
	if err != nil {
		return nil, err
	}
	layers := map[string][]v1.Layer{}
	for _, arch := range r.Params.Architectures {
		if layers[arch], err = r.installerLayers(ctx, arch, o); err != nil {
			return nil, fmt.Errorf("installer, %s: %w", arch, err)
		}
	}
	return compose.ImageIndex(r.SourceDate, ann, r.Params.Architectures, layers, compose.InstallerEntrypoint)
}

// InstallerImage is one architecture's image of the schematic's installer
// (the index's child, the same bytes).
func (r *VerifiedRelease) InstallerImage(ctx context.Context, o InstallerOptions, arch string) (v1.Image, error) {
	ann, err := r.installerAnnotations(ctx, o)
	if err != nil {
		return nil, err
	}
	layers, err := r.installerLayers(ctx, arch, o)
	if err != nil {
		return nil, fmt.Errorf("installer, %s: %w", arch, err)
	}
	return compose.Image(r.SourceDate, ann, arch, layers, compose.InstallerEntrypoint)
}

// InstallerTarball is one architecture's image of the schematic's
// installer as a docker tarball (docker load, crane push take it), as the
// upstream factory serves installer-ARCH.tar: the image's config and
// layers, and a manifest.json tagging it [PLATFORM-]installer[-secureboot]/
// ID:vVERSION (no host: the bytes do not depend on who asks), written to
// w. The new layer is made in o.Work, which the caller removes.
func (r *VerifiedRelease) InstallerTarball(ctx context.Context, o InstallerOptions, arch string, w io.Writer) error {
	id, err := o.Schematic.ID()
	if err != nil {
		return err
	}
	img, err := r.InstallerImage(ctx, o, arch)
	if err != nil {
		return err
	}
	k := InstallerKind{Platform: o.Platform, SecureBoot: o.SecureBoot != nil}
	tag, err := name.NewTag(k.ref(id, r.Version))
	if err != nil {
		return err
	}
	if err := tarball.Write(tag, img, w); err != nil {
		return fmt.Errorf("installer tarball: %w", err)
	}
	return nil
}

// installerAnnotations are a schematic's installer's: the release's
// installer's, the schematic, the platform, the Secure Boot certificate.
func (r *VerifiedRelease) installerAnnotations(ctx context.Context, o InstallerOptions) (map[string]string, error) {
	id, err := o.Schematic.ID()
	if err != nil {
		return nil, err
	}
	if o.Platform != "" {
		if _, err := r.PlatformTable().Lookup(o.Platform); err != nil {
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
	if o.SecureBoot != nil {
		ann[compose.AnnotationSecureBoot] = o.SecureBoot.CertSHA256()
	}
	return ann, nil
}

// installerLayers are the schematic's installer layers for arch, as
// Talos's imager makes them: the release's installer layers but the last
// as they are, and the last, the boot assets, with the schematic's
// (compose.SchematicInstaller).
func (r *VerifiedRelease) installerLayers(ctx context.Context, arch string, o InstallerOptions) ([]v1.Layer, error) {
	boot, exts, co, err := r.Inputs(ctx, arch, o.Schematic.Customization.SystemExtensions.OfficialExtensions)
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(o.Work, "installer-")
	if err != nil {
		return nil, err
	}
	// The new layer's file stays there for the caller, who writes the
	// image and removes o.Work.
	made := false
	defer func() {
		if !made {
			os.RemoveAll(work)
		}
	}()
	co.Schematic, co.Platform, co.DiskFormats, co.Work, co.Layers = o.Schematic, o.Platform, []string{}, work, o.Layers
	if o.SecureBoot != nil {
		co.SecureBoot = &compose.SecureBoot{Signing: o.SecureBoot}
	}
	res, err := compose.Media(ctx, boot, exts, co)
	if err != nil {
		return nil, err
	}
	if o.SecureBoot != nil && res.ESP == nil {
		return nil, errors.New("a Secure Boot installer needs the release's EFI boot manager, and it has none (image.bootloader)")
	}
	in := compose.InstallerAssets{Initramfs: res.InitramfsBlob, ESP: res.ESP}
	if o.Platform != "" {
		in.Cmdline = res.InstallerCmdline
	}
	if o.SecureBoot == nil {
		u, err := compose.InstallerUKI(boot, res.InitramfsBlob, co)
		if err != nil {
			return nil, err
		}
		if u != nil { // a nil *uki.Image is no body
			in.UKI = u
		}
	}
	img, err := r.Image(ctx, release.RepoInstaller, arch)
	if err != nil {
		return nil, err
	}
	kept, assets, err := installerAssetsLayer(img)
	if err != nil {
		return nil, err
	}
	rc, err := layerReader(assets)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	// The release's tar streams in, the new one streams out through gzip
	// into a file: neither is ever whole in memory.
	nl, err := compose.NewFileLayer(filepath.Join(work, "assets.layer"), func(w io.Writer) error {
		if err := compose.WriteSchematicInstaller(w, io.LimitReader(rc, maxAsset), arch, in, r.SourceDate); err != nil {
			return err
		}
		// On to the blob's end, where the store checks its digest.
		_, err := io.Copy(io.Discard, rc)
		return err
	})
	if err != nil {
		return nil, err
	}
	made = true
	return append(kept, nl), nil
}

// installerAssetsLayer splits a release's installer image: the layers a
// schematic's installer keeps (the installer itself) and the one that
// holds the boot assets, its last. A release made before the installer
// was laid out as Talos's has that one only.
func installerAssetsLayer(img v1.Image) ([]v1.Layer, v1.Layer, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, nil, err
	}
	if len(layers) == 0 || len(layers) > 2 {
		return nil, nil, fmt.Errorf("installer image: %d layers, want the installer's and the boot assets'", len(layers))
	}
	return layers[:len(layers)-1], layers[len(layers)-1], nil
}
