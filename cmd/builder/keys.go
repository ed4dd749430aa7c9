package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/internal/atomicfile"
)

func init() { register(newKeysCmd) }

func newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Signing keys of a release channel, in cosign's formats",
	}
	var out string
	var force bool
	gen := &cobra.Command{
		Use:   "generate --out DIR",
		Short: "Write a new key pair: DIR/cosign.key (encrypted) and DIR/cosign.pub",
		Long: `generate writes a new ECDSA P-256 key pair in cosign's own formats:
DIR/cosign.key, encrypted with the password in $COSIGN_PASSWORD (scrypt and
secretbox, "ENCRYPTED SIGSTORE PRIVATE KEY"; readable by cosign itself), and
DIR/cosign.pub. Signatures made with it need no transparency log, Fulcio or TUF
root: verify offline with cosign.pub (cosign verify --key cosign.pub
--insecure-ignore-tlog).

Existing keys are never overwritten unless --force is given.`,
		Example: `  COSIGN_PASSWORD=$(pass show nodeforge/dev) builder keys generate --out keys/dev`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("--out DIR is required")
			}
			pw, ok := os.LookupEnv("COSIGN_PASSWORD")
			if !ok {
				return errors.New("set COSIGN_PASSWORD to the password that encrypts the private key (it may be empty, but must be set)")
			}
			privPath, pubPath := filepath.Join(out, "cosign.key"), filepath.Join(out, "cosign.pub")
			if !force {
				for _, p := range []string{privPath, pubPath} {
					if _, err := os.Stat(p); err == nil {
						return fmt.Errorf("%s exists: not overwriting a key (--force replaces it)", p)
					} else if !errors.Is(err, fs.ErrNotExist) {
						return err
					}
				}
			}
			priv, pub, err := signing.Generate([]byte(pw))
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			if err := atomicfile.Write(privPath, priv, 0o600); err != nil {
				return err
			}
			if err := atomicfile.Write(pubPath, pub, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n%s\n", privPath, pubPath)
			return nil
		},
	}
	gen.Flags().StringVarP(&out, "out", "o", "", "directory for cosign.key and cosign.pub")
	gen.Flags().BoolVar(&force, "force", false, "replace existing keys")
	cmd.AddCommand(gen)
	return cmd
}
