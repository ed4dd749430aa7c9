package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/api/schematic"
)

func init() { register(newSchematicCmd) }

func newSchematicCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schematic",
		Short: "Image schematics: extensions, kernel arguments and META values of a customised image",
		Long: `A schematic (YAML or JSON, Talos Image Factory's format) describes a customised
node OS image:

  customization:
    extraKernelArgs: [console=ttyS0]
    meta:
      - {key: 0xa, value: '{"externalIPs": []}'}
    systemExtensions:
      officialExtensions: [siderolabs/zfs, cri]

Its ID is the sha256 of the schematic as Talos's Image Factory marshals it
(go.yaml.in/yaml/v4, lists in the order given): any schematic gets the ID
upstream gives it, and the factory (builder factory serve) the same. Listing
extensions in another order is another schematic, with another ID (the media
are composed of the same extensions). Extensions are named as the release's
clients name them: NAMESPACE/NAME (siderolabs/zfs) or NAME.`,
	}
	canonical := false
	id := &cobra.Command{
		Use:   "id [--canonical] FILE",
		Short: "Print a schematic's ID (FILE - reads standard input)",
		Example: `  # the empty schematic: 376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba
  echo 'customization: {}' | builder schematic id -

  # the canonical YAML the ID is taken from
  builder schematic id --canonical zfs.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var data []byte
			var err error
			if args[0] == "-" {
				data, err = io.ReadAll(cmd.InOrStdin())
			} else {
				data, err = os.ReadFile(args[0])
			}
			if err != nil {
				return err
			}
			s, err := schematic.Parse(data)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			if canonical {
				b, err := s.Canonical()
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(b)
				return err
			}
			sid, err := s.ID()
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), sid)
			return nil
		},
	}
	id.Flags().BoolVar(&canonical, "canonical", false, "print the canonical form instead of the ID")
	cmd.AddCommand(id)
	return cmd
}
