package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/release"
)

func init() { register(newPromoteCmd) }

func newPromoteCmd() *cobra.Command {
	var sf specFlags
	var from, to, key, policyPath string
	var fromKeys []string
	var fromStore, toStore storeFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "promote --from dev --to prod VERSION",
		Short: "Copy a verified release from one channel to another by digest, and sign it there",
		Long: `promote moves a release through the gate: it never rebuilds. It first verifies
every image of the release in the source channel (signatures and attestations
with the source channel's public key, that the SBOM and provenance describe
each digest, and the single-base policy: every package from the base named in
the provenance, or the policy's base), and refuses with every reason when
anything fails. Then it copies each image by digest (the destination digest is
checked to equal the source's), signs each manifest with the destination
channel's key, attests the verified SBOMs and provenance again with that key,
and adds a promotion attestation (https://nodeforge.dev/promotion/v1: version,
source and destination, the keys, the time).

The channels, their registries or layouts and keys come from the spec; the
flags override them for one run. The destination key's password is read from
$COSIGN_PASSWORD.`,
		Example: `  builder promote --spec p11.yaml --from dev --to prod 1.11.0
  builder promote --spec spec.yaml --from-registry 127.0.0.1:5000/dev --from-key dev.pub \
      --to-registry 127.0.0.1:5000/prod --key prod.key 1.11.0-demo`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := sf.load()
			if err != nil {
				return err
			}
			src, err := s.Channel(from)
			if err != nil {
				return err
			}
			dst, err := s.Channel(to)
			if err != nil {
				return err
			}
			if from == to && fromStore.registry == toStore.registry && fromStore.layout == toStore.layout {
				return errors.New("--from and --to name the same place")
			}
			if len(fromKeys) == 0 && src.PublicKey != "" {
				fromKeys = []string{src.PublicKey}
			}
			if len(fromKeys) == 0 {
				return fmt.Errorf("no public key for channel %s: set its key in the spec or give --from-key PUB", from)
			}
			vs, err := loadVerifiers(fromKeys)
			if err != nil {
				return err
			}
			if key == "" {
				key = dst.Key
			}
			signer, err := loadSigner(key)
			if err != nil {
				return err
			}
			pol, err := release.LoadPolicy(policyPath)
			if err != nil {
				return err
			}
			fst, err := fromStore.open(cmd.Context(), src, false)
			if err != nil {
				return err
			}
			tst, err := toStore.open(cmd.Context(), dst, true)
			if err != nil {
				return err
			}
			for _, st := range []oci.Store{fst, tst} {
				if err := reachable(cmd.Context(), st); err != nil {
					return err
				}
			}
			stderr := cmd.ErrOrStderr()
			res, err := release.Promote(cmd.Context(), release.PromoteOptions{Version: args[0], FromChannel: from, ToChannel: to,
				From: fst, To: tst, FromKeys: vs, Signer: signer, Policy: pol, Now: time.Now(),
				Log: func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }})
			if errors.Is(err, release.ErrRefused) {
				printRefusal(stderr, "promote "+args[0]+" from "+fst.String(), res.RootCause, res.Refused)
				return &exitError{code: 1, err: errors.New("promotion refused")}
			}
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), res)
			}
			for _, img := range res.Images {
				fmt.Fprintf(cmd.OutOrStdout(), "%s@%s\n", img.Ref, img.Digest)
			}
			fmt.Fprintf(stderr, "promoted %s from %s to %s: %d blobs copied (%d bytes), signed with %s\n",
				res.Version, res.From, res.To, res.Stats.Blobs, res.Stats.BlobBytes, signer.KeyID)
			return nil
		},
	}
	sf.add(cmd)
	cmd.Flags().StringVar(&from, "from", "dev", "source channel")
	cmd.Flags().StringVar(&to, "to", "prod", "destination channel")
	cmd.Flags().StringArrayVar(&fromKeys, "from-key", nil, "public key verifying the source (default: the source channel's)")
	cmd.Flags().StringVar(&key, "key", "", "signing key of the destination (default: the destination channel's)")
	cmd.Flags().StringVar(&policyPath, "policy", "", "policy file (YAML): base, urls, fingerprints")
	cmd.Flags().StringVar(&fromStore.registry, "from-registry", "", "source registry HOST[:PORT][/PREFIX] instead of the channel's")
	cmd.Flags().StringVar(&fromStore.layout, "from-layout", "", "source OCI layout instead of the channel's")
	cmd.Flags().StringVar(&toStore.registry, "to-registry", "", "destination registry HOST[:PORT][/PREFIX] instead of the channel's")
	cmd.Flags().StringVar(&toStore.layout, "to-layout", "", "destination OCI layout instead of the channel's")
	fromStore.addRemote(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was promoted as JSON")
	cmd.PreRun = func(*cobra.Command, []string) {
		toStore.caFile, toStore.allowHTTP = fromStore.caFile, fromStore.allowHTTP
	}
	return cmd
}

// printRefusal says what was refused and every reason, the root cause
// first.
func printRefusal(w io.Writer, what, rootCause string, reasons []string) {
	fmt.Fprintf(w, "refusing to %s:\n", what)
	if rootCause != "" {
		fmt.Fprintf(w, "  %s\n", rootCause)
	}
	for _, r := range reasons {
		fmt.Fprintf(w, "  - %s\n", r)
	}
}
