package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/api/extensions"
)

func init() { register(newExtensionCmd) }

func newExtensionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "extension",
		Short: "System extensions: validate any extension, ours or third-party",
		Long: `A system extension is an OCI image whose root holds exactly manifest.yaml and
rootfs/. Its files must be regular files, directories or symlinks, none
world-writable, every non-directory below an allowed prefix:
  /usr/local/ /usr/lib/firmware/ /usr/lib/modules/ /usr/lib/udev/rules.d/
  /etc/cri/conf.d/ /usr/share/glvnd/ /usr/share/egl/ /etc/vulkan/
or one of the named files (the glibc loader, ldconfig, /etc/ld.so.conf,
/etc/ld.so.cache, NVIDIA's container helpers, nvme). The manifest names the
extension, its version and a compatibility constraint (">= v1.8.0").

builder build writes the extensions of a release under OUT/extensions/<name>/;
their definitions live in extensions/*.yaml.`,
	}
	asJSON := false
	validate := &cobra.Command{
		Use:   "validate [--json] IMAGE|DIR...",
		Short: "Check extensions against the contract and list every violation",
		Long: `validate reads each argument, an OCI image layout (every image of its index is
checked) or a directory holding manifest.yaml and rootfs/, and prints every
violation. It exits 1 when any extension is invalid.`,
		Example: `  # the extensions of a build
  builder extension validate out/extensions/zfs out/extensions/cri

  # a third-party extension unpacked into a directory
  builder extension validate ./my-extension`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			invalid := 0
			all := []extensions.Result{}
			for _, a := range args {
				rs, err := extensions.ValidatePath(a)
				if err != nil {
					return err
				}
				for _, r := range rs {
					if len(r.Violations) > 0 {
						invalid++
					}
					if r.Image != a {
						r.Image = a + ": " + r.Image
					}
					all = append(all, r)
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				if err := printJSON(out, validationJSON{Results: all, Invalid: invalid}); err != nil {
					return err
				}
			} else {
				for _, r := range all {
					if len(r.Violations) == 0 {
						name := ""
						if r.Manifest != nil {
							name = fmt.Sprintf(" (%s %s)", r.Manifest.Metadata.Name, r.Manifest.Metadata.Version)
						}
						fmt.Fprintf(out, "%s: valid%s\n", r.Image, name)
						continue
					}
					fmt.Fprintf(out, "%s: %d violations\n", r.Image, len(r.Violations))
					for _, v := range r.Violations {
						fmt.Fprintf(out, "  %s\n", v)
					}
					for _, h := range r.Hints {
						fmt.Fprintf(out, "  (%s)\n", h)
					}
				}
			}
			if invalid > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d of %d extension images are not valid", invalid, len(all))}
			}
			return nil
		},
	}
	validate.Flags().BoolVar(&asJSON, "json", false, "print the results as JSON")
	cmd.AddCommand(validate)
	return cmd
}

// validationJSON is extension validate --json
// (docs/schemas/extension-validate.schema.json).
type validationJSON struct {
	Results []extensions.Result `json:"results"`
	Invalid int                 `json:"invalid"` // images with a violation
}
