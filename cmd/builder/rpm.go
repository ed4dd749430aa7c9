package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/pkgbase/binrpm"
	"github.com/nodeforge/builder/pkgbase/rpmwrite"
)

func init() { register(newRPMCmd) }

func newRPMCmd() *cobra.Command {
	o := binrpm.Options{Name: "nodeforge-builder", Command: "builder", Group: "Development/Other", License: "Apache-2.0",
		URL: "https://nodeforge.invalid/", Summary: "Nodeforge: reproducible, signed node OS releases from one certified RPM package base",
		Description: "builder resolves a node OS from one certified RPM package base, assembles\n" +
			"bit-for-bit reproducible artifacts, signs, attests and publishes them, writes\n" +
			"certification audit reports and serves node images per schematic (factory).",
		Packager: "Nodeforge <release@nodeforge.invalid>", Vendor: "Nodeforge"}
	var key, out, date string
	cmd := &cobra.Command{
		Use:   "rpm --key KEY.asc --version V [--release R] [--out DIR]",
		Short: "Package this builder as a signed RPM (nodeforge-builder) a package base can carry",
		Long: `rpm packages a builder binary (by default this one) as nodeforge-builder:
/usr/bin/builder, the documents given with --doc, and the shared libraries it
needs as rpm's and ALT's dependency finders write them (libc.so.6(GLIBC_2.34)(64bit)...),
read from its ELF dynamic section. The package is signed with an OpenPGP
key (an armored private key, as a packager's; NODEFORGE_RPM_KEY_PASSWORD
decrypts an encrypted one) and dated by the source date, so that two runs
write the same bytes: rpm -K with the public key checks it, and a package
base that carries it lets the factory's own image be built from the base.
make rpm runs it on the commit (RPM_KEY=FILE).`,
		Example: `  builder rpm --key packager.asc --version 1.11.0 --release alt1 --date "$(git log -1 --format=%ct)" --doc README.md --out dist/`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if key == "" {
				return errors.New("rpm needs --key FILE: the packager's armored OpenPGP private key (gpg --export-secret-keys --armor ID > key.asc)")
			}
			built, err := sourceDate(date)
			if err != nil {
				return err
			}
			if o.Binary == "" {
				if o.Binary, err = os.Executable(); err != nil {
					return err
				}
			}
			signer, err := readOpenPGPKey(key, "NODEFORGE_RPM_KEY_PASSWORD")
			if err != nil {
				return err
			}
			// A signature cannot predate its key: a source date older
			// than the key signs at the key's creation.
			signedAt := built
			if created := signer.PrimaryKey.CreationTime; created.After(built) {
				signedAt = created.UTC()
			}
			o.Built, o.Signer = built, rpmwrite.OpenPGPSigner(signer, signedAt)
			name, b, err := binrpm.Package(o)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			path := filepath.Join(out, name)
			if err := atomicfile.Write(path, b, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s sha256:%x\n", path, sha256.Sum256(b))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Binary, "binary", "", "the builder binary to package (default: this one)")
	fl.StringVar(&key, "key", "", "the packager's armored OpenPGP private key, which signs the package")
	fl.StringVar(&o.Version, "version", "", "the package's version (letters, digits and . _ + ~)")
	fl.StringVar(&o.Release, "release", "alt1", "the package's release")
	fl.StringVar(&o.Disttag, "disttag", "", "ALT's disttag (e.g. p11+389100.100.1.1)")
	fl.StringSliceVar(&o.Docs, "doc", nil, "a document for /usr/share/doc/nodeforge-builder-VERSION/ (repeatable)")
	fl.StringVar(&date, "date", "", "the package's date, in seconds since 1970 (default: $SOURCE_DATE_EPOCH): the commit's, never the clock")
	fl.StringVarP(&out, "out", "o", ".", "directory the package is written to")
	cmd.MarkFlagRequired("version")
	return cmd
}

// sourceDate reads a date in seconds since 1970 from the flag, else from
// $SOURCE_DATE_EPOCH.
func sourceDate(flag string) (time.Time, error) {
	what, v := "--date", flag
	if v == "" {
		what, v = "SOURCE_DATE_EPOCH", os.Getenv("SOURCE_DATE_EPOCH")
	}
	if v == "" {
		return time.Time{}, errors.New("the package's date: give --date SECONDS or SOURCE_DATE_EPOCH (the commit's: git log -1 --format=%ct)")
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, fmt.Errorf("%s=%q is not a number of seconds since 1970", what, v)
	}
	return time.Unix(n, 0).UTC(), nil
}
