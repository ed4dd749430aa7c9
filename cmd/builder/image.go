package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/schematic"
)

func init() { register(newImageCmd) }

// mediaKinds maps each --kind to the files of OUT/media/<id>/ it names.
var mediaKinds = map[string][]string{
	"kernel":    {"kernel-"},
	"initramfs": {"initramfs-"},
	"cmdline":   {"cmdline-"},
	"pxe":       {"kernel-", "initramfs-", "cmdline-", "ipxe-"},
}

func newImageCmd() *cobra.Command {
	var b buildFlags
	var schematicPath, kind string
	cmd := &cobra.Command{
		Use:   "image --spec FILE --schematic FILE --kind KIND [--lock FILE] [--out DIR]",
		Short: "Boot media for a schematic: the kernel, the initramfs with its extensions appended, cmdline, PXE set",
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

--kind picks what to print: kernel, initramfs, cmdline or pxe (all four).
The ISO, raw disk and installer kinds are not built yet.`,
		Example: `  printf 'customization:\n  systemExtensions:\n    officialExtensions: [zfs, cri]\n' > zfs.yaml
  builder image --spec /tmp/demo/spec.yaml --schematic zfs.yaml --kind pxe`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			prefixes, ok := mediaKinds[kind]
			if !ok {
				switch kind {
				case "iso", "raw", "installer":
					return fmt.Errorf("--kind %s: not built yet (kernel, initramfs, cmdline and pxe are)", kind)
				}
				return fmt.Errorf("--kind %q: want kernel, initramfs, cmdline or pxe", kind)
			}
			data, err := os.ReadFile(schematicPath)
			if err != nil {
				return err
			}
			sch, err := schematic.Parse(data)
			if err != nil {
				return fmt.Errorf("%s: %w", schematicPath, err)
			}
			rep, out, err := b.run(cmd, sch)
			if err != nil {
				return err
			}
			var names []string
			for n := range rep.Media.Files {
				base := filepath.Base(n)
				for _, p := range prefixes {
					if strings.HasPrefix(base, p) {
						names = append(names, n)
					}
				}
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
	cmd.Flags().StringVar(&kind, "kind", "initramfs", "kernel, initramfs, cmdline or pxe")
	cmd.MarkFlagRequired("schematic")
	return cmd
}
