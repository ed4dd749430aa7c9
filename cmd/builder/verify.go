package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/certification"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/release"
)

func init() { register(newVerifyCmd) }

// openRef opens the store a reference names, and the image it names
// unless version is set (then the reference is a whole release's store).
func openRef(ctx context.Context, ref, version string, sf storeFlags) (st oci.Store, repo, tagOrDigest string, err error) {
	parse := oci.ParseImageLocation
	if version != "" {
		parse = oci.ParseLocation
	}
	l, err := parse(ref)
	if err != nil {
		return nil, "", "", err
	}
	st, err = oci.Open(l, oci.OpenOptions{Remote: sf.remote(ctx)})
	return st, l.Repo, l.Ref, err
}

func newVerifyCmd() *cobra.Command {
	var keys []string
	var policyPath, version string
	var sf storeFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify REF --key PUB [--policy FILE]",
		Short: "Verify signatures, attestations and the single-base policy of published images",
		Long: `verify checks a published image offline with public keys (no transparency
log, Fulcio or TUF root):

  - a cosign signature by one of the keys on the manifest, and on every
    per-architecture child of an index;
  - signed in-toto attestations naming that very digest: SPDX and CycloneDX
    SBOMs and SLSA provenance (provenance only for the lock artifact), in
    cosign's .att tag, and the same attestations as OCI referrers;
  - the policy: every package of the SBOM is among the RPMs the provenance
    resolved (by sha256), from the base repository (the spec's first, or the
    policy's base), and, when the policy lists them, from its URLs and signed
    by its keys.

REF is HOST[:PORT]/PATH/REPO:TAG (or @sha256:...), or oci:DIR#REPO:TAG for a
local OCI layout written by builder release. With --version, REF names a
release's store (docker://HOST[:PORT]/PREFIX or oci:DIR) and every image of
that release is verified.

A policy file (YAML) may set: base (a repository name), urls (prefixes a
package URL must start with), fingerprints (OpenPGP keys packages may be
signed by). Exit status 1 with every reason when anything fails.`,
		Example: `  builder verify --key keys/dev/cosign.pub registry.internal:5000/nodeforge/p11/installer:1.11.0
  builder verify --key cosign.pub --version 1.11.0-demo oci:out/demo/release/dev
  builder verify --key cosign.pub --policy base.yaml --version 1.11.0 docker://registry.internal:5000/nodeforge/p11`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(keys) == 0 {
				return errors.New("--key PUB is required (a cosign.pub)")
			}
			vs, err := loadVerifiers(keys)
			if err != nil {
				return err
			}
			pol, err := release.LoadPolicy(policyPath)
			if err != nil {
				return err
			}
			st, repo, ref, err := openRef(cmd.Context(), args[0], version, sf)
			if err != nil {
				return err
			}
			if err := reachable(cmd.Context(), st); err != nil {
				return err
			}
			ctx := cmd.Context()
			var results []*release.Verification
			if version != "" {
				if results, err = release.VerifyVersion(ctx, st, version, vs, pol); err != nil {
					return err
				}
			} else {
				results = []*release.Verification{release.VerifyOrExplain(ctx, st, repo, ref, vs, pol)}
			}
			failed := slices.ContainsFunc(results, func(v *release.Verification) bool { return !v.OK() })
			if asJSON {
				if err := printJSON(cmd.OutOrStdout(), results); err != nil {
					return err
				}
			} else {
				printVerifications(cmd.OutOrStdout(), results, vs)
			}
			if failed {
				return &exitError{code: 1, err: errors.New("verification failed")}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "public key (cosign.pub) to verify with (repeatable: any may sign)")
	cmd.Flags().StringVar(&policyPath, "policy", "", "policy file (YAML): base, urls, fingerprints")
	cmd.Flags().StringVar(&version, "version", "", "verify every image of this release version; REF is then the store")
	sf.addRemote(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the results as JSON")
	return cmd
}

// shortPredicate names a predicate type the way cosign's --type does.
func shortPredicate(t string) string {
	switch t {
	case signing.PredicateSPDX:
		return "spdx"
	case signing.PredicateCycloneDX:
		return "cyclonedx"
	case signing.PredicateSLSA:
		return "slsa-provenance"
	case signing.PredicatePromotion:
		return "promotion"
	case signing.PredicateBuildReport:
		return "build-report"
	case certification.PredicateVSA:
		return "verification-summary"
	}
	return t
}

// printVerifications lists each image: OK with what verified, or FAIL with
// every problem; the root cause of a wrong key first.
func printVerifications(w io.Writer, results []*release.Verification, keys []signature.Verifier) {
	if rc := release.RootCause(results, keys); rc != "" {
		fmt.Fprintf(w, "%s\n", rc)
	}
	for _, v := range results {
		if v.OK() {
			fmt.Fprintf(w, "OK    %s@%s\n", v.Ref, v.Digest)
			for _, m := range v.Manifests {
				types := make([]string, 0, len(m.Attestations))
				for t, n := range m.Attestations {
					types = append(types, fmt.Sprintf("%s×%d", shortPredicate(t), n))
				}
				sort.Strings(types)
				fmt.Fprintf(w, "      %s: %d signature(s), attestations %s, %d referrer(s), %d package(s) from the base\n",
					m.Digest, m.Signatures, strings.Join(types, " "), m.Referrers, m.Packages)
			}
			continue
		}
		fmt.Fprintf(w, "FAIL  %s\n", v.Ref)
		for _, p := range v.Problems {
			fmt.Fprintf(w, "      - %s\n", p)
		}
	}
}
