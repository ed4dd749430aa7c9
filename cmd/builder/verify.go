package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/certification"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/release"
)

func init() { register(newVerifyCmd) }

// parseRef splits a reference into a store and a repository and tag or
// digest: HOST[:PORT]/PATH/REPO:TAG (docker:// allowed) or
// oci:DIR#REPO:TAG. With version set, ref names a whole release's store
// (docker://HOST[:PORT]/PREFIX or oci:DIR) and repo is empty.
func parseRef(ref, version string, sf storeFlags) (st oci.Store, repo, tagOrDigest string, err error) {
	if dir, ok := strings.CutPrefix(ref, "oci:"); ok {
		dir, rest, _ := strings.Cut(dir, "#")
		st, err := oci.OpenLayout(dir)
		if err != nil {
			return nil, "", "", err
		}
		if version != "" {
			return st, "", "", nil
		}
		repo, tag, ok := splitRepoRef(rest)
		if !ok {
			return nil, "", "", fmt.Errorf("reference %q: want oci:DIR#REPO:TAG or oci:DIR#REPO@sha256:...", ref)
		}
		return st, repo, tag, nil
	}
	if !strings.HasPrefix(ref, "docker://") {
		// "DIR" where a directory of that name exists is surely a layout
		// meant, not a Docker Hub repository: say which form to write.
		path, _, _ := strings.Cut(ref, "#")
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			return nil, "", "", fmt.Errorf("%s is a directory here: write oci:%s for the OCI image layout in it (a registry is docker://HOST[:PORT]/PREFIX)", path, ref)
		}
	}
	ref = strings.TrimPrefix(ref, "docker://")
	o := oci.RemoteOptions{Timeout: netTimeout, CAFile: sf.caFile, AllowHTTP: sf.allowHTTP}
	if version != "" {
		st, err := oci.NewRemote(ref, o)
		return st, "", "", err
	}
	full, tag, ok := splitRepoRef(ref)
	if !ok {
		return nil, "", "", fmt.Errorf("reference %q: want HOST[:PORT]/REPO:TAG or HOST[:PORT]/REPO@sha256:...", ref)
	}
	i := strings.LastIndex(full, "/")
	if i < 0 {
		return nil, "", "", fmt.Errorf("reference %q names no registry host", ref)
	}
	st, err = oci.NewRemote(full[:i], o)
	return st, full[i+1:], tag, err
}

// splitRepoRef splits "repo:tag" or "repo@sha256:..." (a port in the host
// part is not a tag).
func splitRepoRef(s string) (repo, ref string, ok bool) {
	if r, d, found := strings.Cut(s, "@"); found {
		return r, d, r != "" && strings.HasPrefix(d, "sha256:")
	}
	i := strings.LastIndex(s, ":")
	if i < 0 || strings.Contains(s[i:], "/") {
		return "", "", false
	}
	return s[:i], s[i+1:], s[:i] != "" && s[i+1:] != ""
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
			var pol *release.Policy
			if policyPath != "" {
				if pol, err = release.LoadPolicy(policyPath); err != nil {
					return err
				}
			}
			st, repo, ref, err := parseRef(args[0], version, sf)
			if err != nil {
				return err
			}
			if err := reachable(cmd.Context(), st); err != nil {
				return err
			}
			ctx := cmd.Context()
			type target struct{ repo, ref string }
			var targets []target
			if version != "" {
				tag := version
				repos, err := release.Repositories(ctx, st, tag)
				if err != nil {
					return err
				}
				for _, r := range repos {
					targets = append(targets, target{r, tag})
				}
			} else {
				targets = []target{{repo, ref}}
			}
			var results []*release.Verification
			failed := false
			for _, t := range targets {
				v, err := release.Verify(ctx, st, t.repo, t.ref, vs, pol)
				if err != nil {
					v = &release.Verification{Ref: st.Ref(t.repo, t.ref), Problems: []string{err.Error()}}
				}
				if !v.OK() {
					failed = true
				}
				results = append(results, v)
			}
			w := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(results); err != nil {
					return err
				}
			} else {
				if rc := release.RootCause(results, vs); rc != "" {
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
			if failed {
				return &exitError{code: 1, err: errors.New("verification failed")}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "public key (cosign.pub) to verify with (repeatable: any may sign)")
	cmd.Flags().StringVar(&policyPath, "policy", "", "policy file (YAML): base, urls, fingerprints")
	cmd.Flags().StringVar(&version, "version", "", "verify every image of this release version; REF is then the store")
	cmd.Flags().StringVar(&sf.caFile, "ca-file", "", "PEM bundle of CAs trusted for the registry besides the system's")
	cmd.Flags().BoolVar(&sf.allowHTTP, "allow-http", false, "permit plain HTTP to a registry that is not on loopback")
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
