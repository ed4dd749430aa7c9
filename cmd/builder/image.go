package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/api/schematic"
)

func init() { register(newImageCmd) }

// mediaKinds maps each --kind to the names of the files of
// OUT/media/<id>/ it prints.
var mediaKinds = map[string]*regexp.Regexp{
	"kernel":    regexp.MustCompile(`^kernel-`),
	"initramfs": regexp.MustCompile(`^initramfs-`),
	"cmdline":   regexp.MustCompile(`^cmdline-`),
	"pxe":       regexp.MustCompile(`^(kernel|initramfs|cmdline|ipxe)-`),
	"iso":       regexp.MustCompile(`^metal-.*\.iso`),
	"raw":       regexp.MustCompile(`^metal-.*\.raw`),
	"qcow2":     regexp.MustCompile(`^metal-.*\.qcow2$`),
	"all":       regexp.MustCompile(``),
}

func newImageCmd() *cobra.Command {
	var b buildFlags
	var schematicPath, kind string
	var compress []string
	cmd := &cobra.Command{
		Use:   "image --spec FILE --schematic FILE --kind KIND [--lock FILE] [--out DIR]",
		Short: "Boot media for a schematic: kernel, initramfs with its extensions, cmdline, PXE, UEFI ISO, GPT disk image, installer",
		Long: `image builds the release as build does (reusing the step caches) and writes the
boot media of a schematic to OUT/media/<schematic id>/:

  kernel-<arch>         the kernel (vmlinuz)
  initramfs-<arch>.xz   the release's initramfs with a second compressed cpio
                        appended: one squashfs per extension of the schematic
                        (0.sqsh, 1.sqsh, ... by name), a layer of module
                        indexes when extensions ship kernel modules, and
                        extensions.yaml listing the layers in mount order
  cmdline-<arch>        the image's kernel arguments plus the schematic's
  ipxe-<arch>           an iPXE script booting the two files above
  metal-<arch>.iso      a UEFI-bootable ISO: the EFI boot manager of the base
                        (image.bootloader, systemd-boot) with the kernel and
                        initramfs on a FAT El Torito image (xorriso)
  metal-<arch>.raw      a GPT disk image: EFI, BIOS, BOOT and META (the
                        schematic's META values) partitions, GUIDs derived
                        from the schematic; .iso and .raw also as .zst, .xz
  metal-<arch>.qcow2    the same disk in QEMU's qcow2 format (sparse)
  installer/            the installer image (OCI layout) with the schematic's
                        initramfs

--kind picks what to build and print: kernel, initramfs, cmdline, pxe (the
first four), iso, raw, qcow2, installer, or all; the disk images are written
only for iso, raw, qcow2 and all. Nothing needs root or loop devices. The release's own
installer image is written by every build, at OUT/installer/.`,
		Example: `  printf 'customization:\n  systemExtensions:\n    officialExtensions: [zfs, cri]\n' > zfs.yaml
  builder image --spec /tmp/demo/spec.yaml --schematic zfs.yaml --kind pxe`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			match, ok := mediaKinds[kind]
			if !ok {
				if kind != "installer" {
					return fmt.Errorf("--kind %q: want kernel, initramfs, cmdline, pxe, iso, raw, qcow2, installer or all", kind)
				}
			}
			data, err := os.ReadFile(schematicPath)
			if err != nil {
				return err
			}
			sch, err := schematic.Parse(data)
			if err != nil {
				return fmt.Errorf("%s: %w", schematicPath, err)
			}
			b.diskCompressions = compress
			b.noISO, b.noRaw, b.noQcow2 = kind != "iso" && kind != "all", kind != "raw" && kind != "all", kind != "qcow2" && kind != "all"
			rep, out, err := b.run(cmd, sch)
			if err != nil {
				return err
			}
			if kind == "installer" {
				fmt.Fprintf(cmd.OutOrStdout(), "%s  %s\n", filepath.Join(out, "media", rep.Media.Schematic, "installer"), rep.Media.Installer)
				return nil
			}
			var names []string
			for n := range rep.Media.Files {
				if match.MatchString(filepath.Base(n)) {
					names = append(names, n)
				}
			}
			if len(names) == 0 && (kind == "iso" || kind == "raw" || kind == "qcow2") {
				return fmt.Errorf("no %s image: %s", kind, rep.Media.NoDiskImages)
			}
			sort.Strings(names)
			w := cmd.OutOrStdout()
			for _, n := range names {
				a := rep.Media.Files[n]
				fmt.Fprintf(w, "%s  sha256:%s  %d bytes\n", filepath.Join(out, n), a.SHA256, a.Size)
			}
			return nil
		},
	}
	b.add(cmd)
	cmd.Flags().StringVar(&schematicPath, "schematic", "", "schematic file (YAML or JSON; builder schematic id explains)")
	cmd.Flags().StringVar(&kind, "kind", "initramfs", "kernel, initramfs, cmdline, pxe, iso, raw, qcow2, installer or all")
	cmd.Flags().StringSliceVar(&compress, "compress", []string{"zst", "xz"}, "compressed variants of the ISO and raw image: zst, xz (none: --compress '')")
	cmd.MarkFlagRequired("schematic")
	return cmd
}
