package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/builder"
	"github.com/nodeforge/builder/builder/media/secureboot"
	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/release"
)

func init() { register(newImageCmd) }

// mediaKinds maps each --kind to the names of the files of
// OUT/media/<id>/ it prints; the disk formats of api/platform are kinds
// too.
var mediaKinds = map[string]*regexp.Regexp{
	"kernel":    regexp.MustCompile(`^kernel-`),
	"initramfs": regexp.MustCompile(`^initramfs-`),
	"cmdline":   regexp.MustCompile(`^cmdline-`),
	"pxe":       regexp.MustCompile(`^(kernel|initramfs|cmdline|ipxe)-`),
	"installer": regexp.MustCompile(`installer(-secureboot)?$`),
	"uki":       regexp.MustCompile(`-uki\.efi$`),
	"all":       regexp.MustCompile(``),
}

// kindMatch returns what --kind prints, and the disk formats it builds
// (nil: the platform's own).
func kindMatch(kind string) (*regexp.Regexp, []string, error) {
	if kind == "all" {
		return mediaKinds[kind], nil, nil
	}
	if m, ok := mediaKinds[kind]; ok {
		return m, []string{}, nil
	}
	if platform.CheckFormat(kind) != nil {
		return nil, nil, fmt.Errorf("--kind %q: want kernel, initramfs, cmdline, pxe, %s, installer or all", kind, strings.Join(platform.Formats, ", "))
	}
	return regexp.MustCompile(`^(` + platform.NamePattern + `)-[^.]+\.` + regexp.QuoteMeta(kind) + `($|\.)`), []string{kind}, nil
}

// imageLong is builder image --help.
func imageLong() string {
	return `image builds the release as build does (reusing the step caches) and writes the
boot media of a schematic for one platform to OUT/media/<schematic id>/. With
--release it builds nothing: it verifies a published release (STORE is
docker://HOST[:PORT]/PREFIX or oci:DIR, --key its public keys) and makes the
same media, byte for byte, from what the release holds, as the Image Factory
does:

  kernel-<arch>                the kernel (vmlinuz)
  initramfs-<arch>.xz          the release's initramfs with a second compressed
                               cpio appended: one squashfs per extension of the
                               schematic (0.sqsh, 1.sqsh, ... by name), its
                               embeddedMachineConfiguration as the extension
                               embedded-config (its config.yaml in
                               /usr/local/etc/talos/), a layer of module
                               indexes when extensions ship kernel modules,
                               and extensions.yaml listing the layers
  cmdline-<platform>-<arch>    the kernel arguments as Talos's imager puts them
                               together: talos.platform=<platform> and the
                               platform's consoles, the image's, the
                               schematic's META values as
                               talos.environment=INSTALLER_META_BASE64=...,
                               the schematic's (no trailing newline)
  ipxe-<platform>-<arch>       an iPXE script booting the kernel and initramfs
  <platform>-<arch>.iso        a UEFI-bootable ISO: the EFI boot manager of the
                               base (image.bootloader, systemd-boot) with the
                               kernel and initramfs on a FAT El Torito image
  <platform>-<arch>.raw        a GPT disk image: EFI, BIOS, BOOT and META (the
                               schematic's META values) partitions, GUIDs
                               derived from the schematic
  <platform>-<arch>.qcow2      the same disk in QEMU's qcow2 format (sparse)
  <platform>-<arch>.vhd        the same disk as a fixed VHD (Azure)
  <platform>-<arch>.raw.tar.gz the same disk as disk.raw in a gzipped tar (GCP)
  <platform>-<arch>.ova        the same disk as a VMware appliance: its OVF
                               and a streamOptimized VMDK in a tar
  <platform>-<arch>-uki.efi    --kind uki: the plain unified kernel image, the
                               base's systemd-stub (image.stub) with the
                               kernel, the initramfs and the command line
  installer/                   the installer image (OCI layout), laid out as
                               Talos's: the installer, then its boot assets
                               at usr/install/<amd64|arm64>/ with the
                               schematic's initramfs (and UKI, vmlinuz.efi)
  <platform>-installer/        with --release: the same with the platform's
                               command line at usr/install/<arch>/cmdline
                               (the factory's /v2/ serves both)
The ISO, raw and VHD images are also written compressed (--compress).

With --secureboot KEYDIR (a set from builder keys generate --secureboot) the
ISO and disk images boot under UEFI Secure Boot, and are named so:
  <platform>-<arch>-secureboot.<format>
                               systemd-boot signed with KEYDIR/db.key, and a
                               signed unified kernel image on the EFI system
                               partition (EFI/Linux/nodeforge.efi); with
                               KEYDIR's PK.auth, KEK.auth and db.auth in
                               loader/keys/auto/, enrolled by systemd-boot when
                               it finds the firmware in setup mode
  <platform>-<arch>-secureboot-uki.efi
                               that UKI: the base's systemd-stub (image.stub)
                               with the kernel, the initramfs above, the
                               command line and an os-release, signed
  installer-secureboot/        the Secure Boot installer: the installer image
  <platform>-installer-secureboot/
                               with, in place of the unsigned kernel,
                               initramfs and boot manager, the ESP above
                               at usr/install/<arch>/esp/ (signed
                               systemd-boot, the signed UKI, loader.conf,
                               the .auth files) for the installer to copy,
                               and the signed systemd-boot.efi and
                               vmlinuz.efi where Talos's installer looks
The command line is inside the signed UKI: it cannot be changed at boot.

Platforms and the disk images --kind all makes for them:
` + platformHelp() + `
--kind picks what to build and print: kernel, initramfs, cmdline, pxe (the
first four), one disk format (iso, raw, qcow2, vhd, raw.tar.gz, ova; any
platform may have any), uki (signed with --secureboot), installer, or all
(the platform's formats). Nothing needs root or loop devices. The release's own installer
image is written by every build, at OUT/installer/.

--kind container --name NAME builds from the spec and its lock (no
schematic) and prints the OCI layout of the container image NAME of the
spec's images section, OUT/images/NAME/: an index over one image per
architecture, checked before it is written (the entrypoint is code for the
architecture, its ELF interpreter and libraries resolve in the image, the
user exists, the links' targets exist, no setuid file the spec does not
allow). Every build writes every image. With --release it builds nothing:
the release's lock artifact and image NAME are verified with --key
(signatures, attestations, every blob), and the image that verified is
written as an OCI archive, OUT/images/NAME.tar (an OCI image layout in a
tar: what ctr images import, skopeo's and podman's oci-archive: read),
named in its index.json for containerd by its registry reference, or
localhost/images/NAME:VERSION from a layout, and tagged VERSION. make
demo-boot attaches the demo release's image this way.`
}

func newImageCmd() *cobra.Command {
	var b buildFlags
	var schematicPath, kind, platformName, imageName string
	var rel releaseSource
	var compress []string
	cmd := &cobra.Command{
		Use:   "image (--spec FILE [--lock FILE] | --release STORE --version V --key PUB) (--schematic FILE --kind KIND [--platform P] | --kind container --name NAME) [--out DIR]",
		Short: "Boot media for a schematic and a platform: kernel, initramfs with its extensions, cmdline, PXE, ISO, disk images, installer",
		Long:  imageLong(),
		Example: `  printf 'customization:\n  systemExtensions:\n    officialExtensions: [zfs, cri]\n' > zfs.yaml
  builder image --spec /tmp/demo/spec.yaml --schematic zfs.yaml --kind pxe
  builder image --spec /tmp/demo/spec.yaml --schematic zfs.yaml --platform azure --kind vhd
  builder image --spec base/spec.yaml --schematic zfs.yaml --kind iso --secureboot keys/dev-secureboot
  builder image --release oci:out/demo/release/dev --version 1.11.0-demo --key out/demo/keys/dev/cosign.pub \
    --schematic zfs.yaml --kind iso --out /tmp/media
  builder image --release oci:out/demo/release/dev --version 1.11.0-demo --key out/demo/keys/dev/cosign.pub \
    --kind container --name hello --out /tmp/media`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if kind == "container" {
				if rel.store != "" {
					return rel.writeContainer(cmd, imageName, b.out, b.asJSON)
				}
				return b.container(cmd, imageName)
			}
			if schematicPath == "" {
				return errors.New(`required flag(s) "schematic" not set`)
			}
			match, formats, err := kindMatch(kind)
			if err != nil {
				return err
			}
			// The platform is checked against the table of the spec (which
			// may add platforms) before the build, or of the release.
			data, err := os.ReadFile(schematicPath)
			if err != nil {
				return err
			}
			sch, err := schematic.Parse(data)
			if err != nil {
				return fmt.Errorf("%s: %w", schematicPath, err)
			}
			if b.secureBootKeys != "" && formats != nil && len(formats) == 0 && kind != "uki" && kind != "installer" {
				return fmt.Errorf("--secureboot signs the UKI, the ISO and the disk images: --kind %s makes none of them", kind)
			}
			b.uki = kind == "uki" && b.secureBootKeys == ""
			if rel.store != "" {
				var sb *secureboot.Signing
				if b.secureBootKeys != "" {
					if sb, err = loadSecureBoot(b.secureBootKeys); err != nil {
						return fmt.Errorf("--secureboot: %w", err)
					}
					defer sb.Close()
				}
				files, err := rel.write(cmd, factory.ImageOptions{Schematic: sch, Platform: platformName, DiskFormats: formats, Compressions: compress, Out: b.out,
					Installers: kind == "installer" || kind == "all", SecureBoot: sb, UKI: b.uki})
				if err != nil {
					return err
				}
				list, err := mediaOutputs(b.out, files, match, kind, formats, "the release has no EFI boot manager")
				if err != nil {
					return err
				}
				return writeOutputs(cmd.OutOrStdout(), b.asJSON, b.out, list)
			}
			b.diskCompressions, b.platform, b.diskFormats = compress, platformName, formats
			rep, out, err := b.run(cmd, sch)
			if err != nil {
				return err
			}
			list := []output{{Path: filepath.Join(out, filepath.FromSlash(builder.MediaInstallerDir(rep.Media.Schematic, false))), Digest: rep.Media.Installer}}
			if sb := rep.Media.SecureBoot; sb != nil && sb.Installer != "" {
				list = []output{{Path: filepath.Join(out, filepath.FromSlash(builder.MediaInstallerDir(rep.Media.Schematic, true))), Digest: sb.Installer}}
			}
			if kind != "installer" {
				if list, err = mediaOutputs(out, rep.Media.Files, match, kind, formats, rep.Media.NoDiskImages); err != nil {
					return err
				}
			}
			return writeOutputs(cmd.OutOrStdout(), b.asJSON, out, list)
		},
	}
	rel.add(cmd)
	b.add(cmd)
	b.addJSON(cmd)
	cmd.Flags().StringVar(&schematicPath, "schematic", "", "schematic file (YAML or JSON; builder schematic id explains)")
	cmd.Flags().StringVar(&kind, "kind", "initramfs", "kernel, initramfs, cmdline, pxe, iso, raw, qcow2, vhd, raw.tar.gz, ova, uki, installer, all, or container (with --name)")
	cmd.Flags().StringVar(&imageName, "name", "", "with --kind container: the container image of the spec's images section (with --release: of the release)")
	cmd.Flags().StringVar(&platformName, "platform", platform.Default, "where the node runs: "+strings.Join(platform.Names(), ", "))
	cmd.Flags().StringSliceVar(&compress, "compress", []string{"zst", "xz"}, "compressed variants of the ISO, raw and VHD images: zst, xz, gz (none: --compress '')")
	cmd.AddCommand(newImageValidateCmd())
	return cmd
}

// container is image --kind container --name NAME: the build of the lock
// (up to date at once when nothing changed), printing the image's OCI
// layout, OUT/images/NAME.
func (b *buildFlags) container(cmd *cobra.Command, name string) error {
	if name == "" {
		return errors.New("--kind container needs --name, a container image of the spec's images section")
	}
	s, err := b.sf.load()
	if err != nil {
		return err
	}
	if _, ok := s.Images[name]; !ok {
		have := "none"
		if len(s.Images) > 0 {
			have = strings.Join(s.ImageNames(), ", ")
		}
		return fmt.Errorf("--name %s: the spec has no such container image (it has: %s)", name, have)
	}
	rep, out, err := b.run(cmd, nil)
	if err != nil {
		return err
	}
	return writeOutputs(cmd.OutOrStdout(), b.asJSON, out, []output{{Path: filepath.Join(out, filepath.FromSlash(builder.ImagesDir(name))), Digest: rep.Images[name]}})
}

// writeContainer is image --release --kind container --name NAME: the
// release's image, verified, as an OCI archive OUT/images/NAME.tar (what
// ctr images import reads), written in full or not at all.
func (r *releaseSource) writeContainer(cmd *cobra.Command, name, out string, asJSON bool) error {
	switch {
	case name == "":
		return errors.New("--kind container needs --name, a container image of the release")
	case r.version == "" || len(r.keys) == 0:
		return errors.New("--release needs --version and --key (the release's public key)")
	case out == "":
		return errors.New("--release needs --out DIR")
	}
	vs, err := loadVerifiers(r.keys)
	if err != nil {
		return err
	}
	st, _, _, err := openRef(cmd.Context(), r.store, r.version, r.sf)
	if err != nil {
		return err
	}
	if err := reachable(cmd.Context(), st); err != nil {
		return err
	}
	path := filepath.Join(out, filepath.FromSlash(builder.ImagesDir(name))+".tar")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var a *release.ImageArchive
	h := sha256.New()
	err = atomicfile.WriteFrom(path, 0o644, func(w io.Writer) error {
		a, err = release.WriteImageArchive(cmd.Context(), st, r.version, name, vs, io.MultiWriter(w, h))
		return err
	})
	if err != nil {
		return err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "image %s of release %s: verified %s, named %s in %s\n", name, r.version, a.Digest, a.Ref, path)
	return writeOutputs(cmd.OutOrStdout(), asJSON, out, []output{{Path: path, Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Size: fi.Size()}})
}

// platformHelp lists the platforms with their default disk formats, for
// --help.
func platformHelp() string {
	var b strings.Builder
	for _, p := range platform.All {
		fmt.Fprintf(&b, "  %-12s %-16s %s\n", p.Name, strings.Join(p.Formats, ", "), p.Description)
	}
	return b.String()
}

// mediaOutputs lists the media files that match, or says why there are none
// of the disk formats asked for.
func mediaOutputs(out string, files map[string]report.ArtifactInfo, match *regexp.Regexp, kind string, formats []string, noDisks string) ([]output, error) {
	var names []string
	for n := range files {
		if match.MatchString(filepath.Base(n)) {
			names = append(names, n)
		}
	}
	if len(names) == 0 && len(formats) > 0 {
		return nil, fmt.Errorf("no %s image: %s", kind, noDisks)
	}
	sort.Strings(names)
	list := []output{}
	for _, n := range names {
		a := files[n]
		list = append(list, output{Path: filepath.Join(out, n), Digest: "sha256:" + a.SHA256, Size: a.Size})
	}
	return list, nil
}

// releaseSource is image --release: the published release to compose
// from.
type releaseSource struct {
	store, version string
	keys           []string
	sf             storeFlags
}

func (r *releaseSource) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&r.store, "release", "", "make the media from this published release (docker://HOST[:PORT]/PREFIX or oci:DIR) instead of building")
	cmd.Flags().StringVar(&r.version, "version", "", "with --release: the release version")
	cmd.Flags().StringArrayVar(&r.keys, "key", nil, "with --release: a public key the release must verify with (repeatable)")
	r.sf.addRemote(cmd.Flags())
}

// write verifies the release and writes its media.
func (r *releaseSource) write(cmd *cobra.Command, o factory.ImageOptions) (map[string]report.ArtifactInfo, error) {
	if r.version == "" || len(r.keys) == 0 {
		return nil, errors.New("--release needs --version and --key (the release's public key)")
	}
	if o.Out == "" {
		return nil, errors.New("--release needs --out DIR")
	}
	vs, err := loadVerifiers(r.keys)
	if err != nil {
		return nil, err
	}
	st, _, _, err := openRef(cmd.Context(), r.store, r.version, r.sf)
	if err != nil {
		return nil, err
	}
	if err := reachable(cmd.Context(), st); err != nil {
		return nil, err
	}
	rel, err := factory.Open(cmd.Context(), st, r.version, vs)
	if err != nil {
		return nil, err
	}
	return factory.WriteImage(cmd.Context(), rel, o)
}
