package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/pkgbase/evr"
)

func init() { register(newVercmpCmd) }

func newVercmpCmd() *cobra.Command {
	semantics := "alt"
	cmd := &cobra.Command{
		Use:   "vercmp [--semantics alt|rpm] A B",
		Short: "Compare two version labels and print -1, 0 or 1",
		Long: `vercmp compares two version labels of the form [E:]V[-R[:DISTTAG]] and prints
one line: -1 if A is older than B, 0 if they are equal, 1 if A is newer.

The comparison is rpm's label compare: the epoch (an absent epoch counts as 0),
then the versions, then the releases, each of the latter two with rpmvercmp.

--semantics selects the rules (default alt):
  alt  ALT Linux rpm: when a numeric segment meets an alphabetic one, the
       alphabetic one is newer ("1.0a" > "1.0.1").
  rpm  upstream rpm (rpm-md repositories): the numeric one is newer.
Both sort '~' before everything, even the end of the version, and '^' after
the end of the version but before anything else.

Disttags (ALT's ":p10+415595.100.2.1" after the release) are accepted but ignored
for ordering here: two labels that differ only in their disttags compare 0.
Only the choice of the best candidate during resolution (evr.Newer) looks at
disttags (the branch prefix before '+', preferring the target branch) and then
at build times.

If a label starts with '-', put "--" before the labels.`,
		Example: `  # a kernel from p10 against the same EVR without a disttag: prints 0
  builder vercmp 2:5.10.253-alt1:p10+415595.100.2.1 2:5.10.253-alt1

  # where ALT and upstream rpm disagree: prints 1, then -1
  builder vercmp 1.0a-alt1 1.0.1-alt1
  builder vercmp --semantics rpm 1.0a-1 1.0.1-1

  # tilde pre-releases sort before the release: prints -1
  builder vercmp --semantics rpm 1.0~rc1-1 1.0-1`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return fmt.Errorf("vercmp takes exactly 2 labels (A B), got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			sem, err := evr.ParseSemantics(semantics)
			if err != nil {
				return fmt.Errorf("--semantics: unknown value %q: want alt or rpm", semantics)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), evr.CompareLabel(sem, args[0], args[1]))
			return err
		},
	}
	cmd.Flags().StringVar(&semantics, "semantics", semantics, "version rules: alt (ALT Linux rpm) or rpm (upstream rpm)")
	return cmd
}
