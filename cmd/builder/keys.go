package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/attest/pkcs11key"
	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/builder/media/secureboot"
	"github.com/nodeforge/builder/internal/atomicfile"
)

func init() { register(newKeysCmd) }

func newKeysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Signing keys of a release channel, in cosign's formats",
	}
	var out, commonName string
	var force, secureBoot bool
	gen := &cobra.Command{
		Use:   "generate --out DIR [--secureboot [--common-name NAME]]",
		Short: "Write a new key pair: DIR/cosign.key (encrypted) and DIR/cosign.pub; or a Secure Boot key set",
		Long: `generate writes a new ECDSA P-256 key pair in cosign's own formats:
DIR/cosign.key, encrypted with the password in $COSIGN_PASSWORD (scrypt and
secretbox, "ENCRYPTED SIGSTORE PRIVATE KEY"; readable by cosign itself), and
DIR/cosign.pub. Signatures made with it need no transparency log, Fulcio or TUF
root: verify offline with cosign.pub (cosign verify --key cosign.pub
--insecure-ignore-tlog).

With --secureboot it writes a UEFI Secure Boot key set instead: a platform
key, a key exchange key and a signature database key (RSA-2048, self-signed
certificates "NAME PK", "NAME KEK", "NAME db", valid 20 years), each as
DIR/<K>.key (PKCS#8 PEM, mode 0600, not encrypted: keep the directory on
an encrypted volume or a token), DIR/<K>.pem (the certificate), DIR/<K>.esl
(an EFI signature list) and DIR/<K>.auth (the signed update that enrols it:
db signed by KEK, KEK by PK, PK by itself), DIR/KEK.wellknown.auth and
DIR/db.wellknown.auth (the same updates enrolling Microsoft's UEFI
certificates too, for schematics with secureboot.includeWellKnownCertificates;
made anew of PK.key and KEK.key where missing), and DIR/pcr.key with DIR/pcr.pub:
an RSA key that signs the PCR 11 policies of the UKIs. The db key signs
systemd-boot and the unified kernel images of builder image --secureboot DIR,
whose media carry the .auth files in loader/keys/auto/: systemd-boot enrols
them when it finds the firmware in setup mode (PK last, which ends setup
mode). Each UKI carries pcr.pub as .pcrpkey and, as .pcrsig, the policies of
the PCR 11 values systemd-stub will measure of it, signed for each boot phase
as systemd-measure signs them: a node binds its disk encryption to "any UKI
signed by this key" (systemd-cryptenroll --tpm2-public-key) and survives
updates.

Keys on a PKCS#11 token (an HSM, a smart card): import db.key and pcr.key
into the token, delete the files and write, in their place, db.pkcs11 and
pcr.pkcs11 holding each key's RFC 7512 URI, for instance
  pkcs11:token=nodeforge;object=db?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/etc/nodeforge/pin
(the PIN from pin-source, pin-value or $NODEFORGE_PKCS11_PIN). The token
signs; the signatures are the bytes the key files would have made.

Existing keys are never overwritten unless --force is given.`,
		Example: `  COSIGN_PASSWORD=$(pass show nodeforge/dev) builder keys generate --out keys/dev
  builder keys generate --secureboot --common-name "Example Corp dev" --out keys/dev-secureboot`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("--out DIR is required")
			}
			if secureBoot {
				return writeSecureBootKeys(cmd, out, commonName, force)
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
	gen.Flags().BoolVar(&secureBoot, "secureboot", false, "write a UEFI Secure Boot key set (PK, KEK, db) instead of cosign keys")
	gen.Flags().StringVar(&commonName, "common-name", "Nodeforge", "with --secureboot: the name in the certificates (\"NAME PK\"...)")
	cmd.AddCommand(gen)
	return cmd
}

// writeSecureBootKeys writes a new Secure Boot key set into out.
func writeSecureBootKeys(cmd *cobra.Command, out, commonName string, force bool) error {
	if commonName == "" {
		return errors.New("--common-name must not be empty")
	}
	ks, err := secureboot.Generate(commonName, time.Now())
	if err != nil {
		return err
	}
	files, err := ks.Files()
	if err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(files))
	if !force {
		for _, n := range names {
			p := filepath.Join(out, n)
			if _, err := os.Stat(p); err == nil {
				return fmt.Errorf("%s exists: not overwriting a key (--force replaces the set)", p)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, n := range names {
		mode := fs.FileMode(0o644)
		if strings.HasSuffix(n, ".key") {
			mode = 0o600
		}
		if err := atomicfile.Write(filepath.Join(out, n), files[n], mode); err != nil {
			return err
		}
		fmt.Fprintln(cmd.OutOrStdout(), filepath.Join(out, n))
	}
	return nil
}

// loadSecureBoot reads a Secure Boot key set for signing; keys on tokens
// whose URIs give no PIN take $NODEFORGE_PKCS11_PIN's.
func loadSecureBoot(dir string) (*secureboot.Signing, error) {
	return secureboot.Load(dir, os.Getenv(pkcs11key.PINEnv))
}
