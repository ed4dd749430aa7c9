package release

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore/pkg/signature"
	"go.yaml.in/yaml/v3"

	"github.com/nodeforge/builder/attest/provenance"
	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/oci"
)

// Policy is what verify and promote require of a release's packages.
type Policy struct {
	// Base is the repository name every package must come from (default:
	// the provenance's base, the spec's first repository).
	Base string `yaml:"base" json:"base"`
	// URLs, when set, are prefixes one of which each package's URL must
	// start with.
	URLs []string `yaml:"urls" json:"urls"`
	// Fingerprints, when set, are the OpenPGP keys a package may be signed by.
	Fingerprints []string `yaml:"fingerprints" json:"fingerprints"`
	// Licenses, when set, are what the audit accepts of each package's
	// license (verify does not read it).
	Licenses *LicensePolicy `yaml:"licenses,omitempty" json:"licenses,omitempty"`
	// ForeignBranch is what the audit makes of a package whose disttag
	// names another branch than the release's (a Sisyphus build in a p11
	// release): FindingCaveat (the default) or FindingFail.
	ForeignBranch string `yaml:"foreign-branch,omitempty" json:"foreignBranch,omitempty"`
}

// LicensePolicy lists the license expressions allowed.
type LicensePolicy struct {
	Allowed []string `yaml:"allowed" json:"allowed"`
	// Otherwise is what a package under another license is: FindingFail
	// (the default) or FindingCaveat.
	Otherwise string `yaml:"otherwise,omitempty" json:"otherwise,omitempty"`
}

// What the audit makes of a finding the policy names.
const (
	FindingFail   = "fail"
	FindingCaveat = "caveat"
)

// LoadPolicy reads a policy file (YAML or JSON).
func LoadPolicy(path string) (*Policy, error) {
	if path == "" {
		return nil, nil // no policy: the spec's base
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p Policy
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("policy %s: %w", path, err)
	}
	for what, v := range map[string]string{"foreign-branch": p.ForeignBranch, "licenses.otherwise": licensesOtherwise(&p)} {
		if v != "" && v != FindingFail && v != FindingCaveat {
			return nil, fmt.Errorf("policy %s: %s %q: want %s or %s", path, what, v, FindingFail, FindingCaveat)
		}
	}
	return &p, nil
}

func licensesOtherwise(p *Policy) string {
	if p.Licenses == nil {
		return ""
	}
	return p.Licenses.Otherwise
}

// Verification is the outcome of verifying one reference.
type Verification struct {
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	// Manifests are the manifest checked (the index and each child).
	Manifests []ManifestCheck `json:"manifests"`
	// Problems lists every reason the reference fails; empty means it passed.
	Problems []string `json:"problems"`
	// Provenance is the verified SLSA predicate of the top manifest.
	Provenance *provenance.Predicate `json:"-"`
}

// ManifestCheck is what was found for one manifest.
type ManifestCheck struct {
	Digest       string         `json:"digest"`
	Signatures   int            `json:"verifiedSignatures"`
	Attestations map[string]int `json:"verifiedAttestations"`
	Referrers    int            `json:"referrers"`
	Packages     int            `json:"packages"`
	// Unverified counts the signatures present that no given key verifies.
	Unverified int `json:"unverifiedSignatures"`
	// SignedBy are the IDs (sha256 of the public key) of the keys whose
	// signatures verified.
	SignedBy []string `json:"signedBy,omitempty"`
	// Statements are the attestations that verified and name this digest.
	Statements []signing.Statement `json:"-"`
}

// OK reports whether nothing failed.
func (v *Verification) OK() bool { return len(v.Problems) == 0 }

func (v *Verification) fail(format string, a ...any) {
	v.Problems = append(v.Problems, fmt.Sprintf(format, a...))
}

// Verify checks repo:ref in st: a signature by one of keys on the
// manifest and on every child of an index; attestations signed by one of
// keys whose statements name that digest (SPDX, CycloneDX and SLSA
// provenance for images, provenance for the lock artifact); the same
// attestations as OCI referrers; and that every package of the SBOMs is a
// dependency the provenance resolved from the base the policy names.
func Verify(ctx context.Context, st oci.Reader, repo, ref string, keys []signature.Verifier, pol *Policy) (*Verification, error) {
	return verify(ctx, st, repo, ref, keys, pol, true)
}

// verify is Verify; readBlobs false skips reading the images' layers and
// configs (the signatures, attestations and manifests are still read and
// checked), for a source whose bytes are checked as they are copied.
func verify(ctx context.Context, st oci.Reader, repo, ref string, keys []signature.Verifier, pol *Policy, readBlobs bool) (*Verification, error) {
	v := &Verification{Ref: st.Ref(repo, ref), Manifests: []ManifestCheck{}, Problems: []string{}}
	top, children, err := oci.Manifests(ctx, st, repo, ref)
	if err != nil {
		return nil, err
	}
	v.Digest = top.Digest.String()
	targets := append([]v1.Descriptor{top}, children...)
	want := []string{signing.PredicateSLSA, signing.PredicateSPDX, signing.PredicateCycloneDX}
	if repo == RepoLock {
		want = []string{signing.PredicateSLSA}
	}
	blobs := oci.NewBlobChecker(st, repo)
	if !readBlobs {
		blobs = nil
	}
	v.Problems = append(v.Problems, blobs.Check(ctx, top)...)
	for _, t := range targets {
		c, prov := checkManifest(ctx, st, repo, t, keys, want, pol, v)
		v.Manifests = append(v.Manifests, c)
		if t.Digest == top.Digest {
			v.Provenance = prov
		}
		// The signatures, attestations and referrers vouch for t: read
		// every byte of them too.
		for _, tag := range []string{oci.SigTag(t.Digest), oci.AttTag(t.Digest)} {
			if d, err := st.Head(ctx, repo, tag); err == nil {
				v.Problems = append(v.Problems, blobs.Check(ctx, *d)...)
			}
		}
		if refs, err := st.Referrers(ctx, repo, t.Digest); err == nil {
			for _, r := range refs {
				v.Problems = append(v.Problems, blobs.Check(ctx, r)...)
			}
		}
	}
	return v, nil
}

// VerifyOrExplain verifies one image; an image that cannot be read at all
// is a failed verification naming why.
func VerifyOrExplain(ctx context.Context, st oci.Reader, repo, ref string, keys []signature.Verifier, pol *Policy) *Verification {
	v, err := Verify(ctx, st, repo, ref, keys, pol)
	if err != nil {
		v = &Verification{Ref: st.Ref(repo, ref), Problems: []string{err.Error()}}
	}
	return v
}

// VerifyVersion verifies every image of a release version in st.
func VerifyVersion(ctx context.Context, st oci.Reader, version string, keys []signature.Verifier, pol *Policy) ([]*Verification, error) {
	repos, err := Repositories(ctx, st, version)
	if err != nil {
		return nil, err
	}
	var out []*Verification
	for _, r := range repos {
		out = append(out, VerifyOrExplain(ctx, st, r, version, keys, pol))
	}
	return out, nil
}

// RootCause names the single reason behind a verification's many
// problems when there is one, for the first line of a report: every
// manifest is signed, and not one signature verifies with the keys given
// (a wrong --key). It returns "" otherwise.
func RootCause(vs []*Verification, keys []signature.Verifier) string {
	sigs := 0
	for _, v := range vs {
		if len(v.Manifests) == 0 {
			return ""
		}
		for _, m := range v.Manifests {
			if m.Signatures > 0 || m.Unverified == 0 {
				return ""
			}
			sigs += m.Unverified
		}
	}
	if sigs == 0 {
		return ""
	}
	var ids []string
	for _, k := range keys {
		if pub, err := k.PublicKey(); err == nil {
			if id, err := signing.KeyID(pub); err == nil {
				ids = append(ids, id)
			}
		}
	}
	return fmt.Sprintf("wrong key: every manifest is signed, but none of its %d signatures verifies with the key given (%s): the release was signed with another key; check --key (the details follow)", sigs, strings.Join(ids, ", "))
}

// checkManifest verifies one manifest and adds its problems to v.
func checkManifest(ctx context.Context, st oci.Reader, repo string, t v1.Descriptor, keys []signature.Verifier, want []string, pol *Policy, v *Verification) (ManifestCheck, *provenance.Predicate) {
	name := st.Ref(repo, t.Digest.String())
	c := ManifestCheck{Digest: t.Digest.String(), Attestations: map[string]int{}}
	_, sigs, err := signing.ReadSigs(ctx, st, repo, oci.SigTag(t.Digest))
	if err != nil {
		v.fail("%s: reading signatures: %v", name, err)
	}
	var sigErrs []string
	for _, l := range sigs {
		ok := false
		for _, k := range keys {
			if err := signing.CheckSignatureLayer(k, l, t.Digest); err == nil {
				ok = true
				if pub, err := k.PublicKey(); err == nil {
					if id, err := signing.KeyID(pub); err == nil && !slices.Contains(c.SignedBy, id) {
						c.SignedBy = append(c.SignedBy, id)
					}
				}
				break
			} else if len(keys) == 1 {
				sigErrs = append(sigErrs, err.Error())
			}
		}
		if ok {
			c.Signatures++
		} else {
			c.Unverified++
		}
	}
	if c.Signatures == 0 {
		if len(sigs) == 0 {
			v.fail("%s: not signed (no %s)", name, oci.SigTag(t.Digest))
		} else {
			v.fail("%s: no signature verifies with the key: %s", name, strings.Join(sigErrs, "; "))
		}
	}

	_, atts, err := signing.ReadSigs(ctx, st, repo, oci.AttTag(t.Digest))
	if err != nil {
		v.fail("%s: reading attestations: %v", name, err)
	}
	var prov *provenance.Predicate
	var sboms [][]byte
	for _, l := range atts {
		env, err := signing.LayerBytes(l.Layer)
		if err != nil {
			v.fail("%s: attestation %s: %v", name, l.Desc.Digest, err)
			continue
		}
		var payload []byte
		for _, k := range keys {
			if payload, err = signing.OpenEnvelope(k, env); err == nil {
				break
			}
		}
		if payload == nil {
			continue // signed by another key (a promoted image keeps the source channel's)
		}
		var s signing.Statement
		if err := json.Unmarshal(payload, &s); err != nil {
			v.fail("%s: attestation %s: not an in-toto statement: %v", name, l.Desc.Digest, err)
			continue
		}
		if !slices.ContainsFunc(s.Subject, func(sub signing.Subject) bool { return sub.Digest["sha256"] == t.Digest.Hex }) {
			var names []string
			for _, sub := range s.Subject {
				names = append(names, "sha256:"+sub.Digest["sha256"])
			}
			v.fail("%s: the %s attestation describes %s, not this digest", name, s.PredicateType, strings.Join(names, ", "))
			continue
		}
		c.Attestations[s.PredicateType]++
		c.Statements = append(c.Statements, s)
		switch s.PredicateType {
		case signing.PredicateSLSA:
			var p provenance.Predicate
			if err := json.Unmarshal(s.Predicate, &p); err != nil {
				v.fail("%s: provenance: %v", name, err)
				continue
			}
			prov = &p
		case signing.PredicateSPDX:
			sboms = append(sboms, s.Predicate)
		}
	}
	for _, w := range want {
		if c.Attestations[w] == 0 {
			v.fail("%s: no %s attestation verifies with the key", name, w)
		}
	}
	refs, err := st.Referrers(ctx, repo, t.Digest)
	if err != nil {
		v.fail("%s: referrers: %v", name, err)
	}
	byType := map[string]int{}
	for _, r := range refs {
		pt, ok := referrerStatement(ctx, st, repo, r, t.Digest, keys)
		if ok {
			c.Referrers++
			byType[pt]++
		}
	}
	for _, w := range want {
		if byType[w] == 0 {
			v.fail("%s: no OCI referrer holds a %s attestation that verifies with the key", name, w)
		}
	}
	if prov != nil {
		for _, sb := range sboms {
			n, problems := checkPackages(sb, prov, pol)
			c.Packages += n
			for _, p := range problems {
				v.fail("%s: %s", name, p)
			}
		}
	}
	return c, prov
}

// referrerStatement reads one referrer: an in-toto artifact whose DSSE
// envelope verifies with one of keys and whose statement names digest d.
// It returns the statement's predicate type.
func referrerStatement(ctx context.Context, st oci.Reader, repo string, r v1.Descriptor, d v1.Hash, keys []signature.Verifier) (string, bool) {
	img, err := st.Image(ctx, repo, r.Digest.String())
	if err != nil {
		return "", false
	}
	raw, err := img.RawManifest()
	if err != nil {
		return "", false
	}
	if at, _ := oci.ArtifactType(raw); at != signing.InTotoPayloadType {
		return "", false
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		return "", false
	}
	env, err := signing.LayerBytes(layers[0])
	if err != nil {
		return "", false
	}
	for _, k := range keys {
		payload, err := signing.OpenEnvelope(k, env)
		if err != nil {
			continue
		}
		var s signing.Statement
		if json.Unmarshal(payload, &s) != nil {
			return "", false
		}
		if slices.ContainsFunc(s.Subject, func(sub signing.Subject) bool { return sub.Digest["sha256"] == d.Hex }) {
			return s.PredicateType, true
		}
	}
	return "", false
}

// checkPackages applies the single-base policy to an SPDX document: every
// package is a resolved dependency of the provenance, from the base
// repository (and the policy's URLs and signers).
func checkPackages(spdx []byte, prov *provenance.Predicate, pol *Policy) (int, []string) {
	var doc struct {
		Packages []struct {
			Name        string `json:"name"`
			VersionInfo string `json:"versionInfo"`
			Checksums   []struct {
				Algorithm string `json:"algorithm"`
				Value     string `json:"checksumValue"`
			} `json:"checksums"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(spdx, &doc); err != nil {
		return 0, []string{"SPDX document: " + err.Error()}
	}
	deps := map[string]provenance.ResourceDescriptor{}
	for _, d := range prov.BuildDefinition.ResolvedDependencies {
		if d.Annotations[provenance.AnnKind] == "rpm" {
			deps[d.Digest["sha256"]] = d
		}
	}
	base := prov.BuildDefinition.ExternalParameters.Base
	var p Policy
	if pol != nil {
		p = *pol
	}
	if p.Base != "" {
		base = p.Base
	}
	var problems []string
	n := 0
	for _, pk := range doc.Packages {
		sum := ""
		for _, c := range pk.Checksums {
			if c.Algorithm == "SHA256" {
				sum = c.Value
			}
		}
		if sum == "" {
			continue // the artifact itself
		}
		n++
		label := pk.Name + "-" + pk.VersionInfo
		d, ok := deps[sum]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("package %s (sha256:%s) is not among the provenance's resolved dependencies", label, sum))
		case d.Annotations[provenance.AnnRepository] != base:
			problems = append(problems, fmt.Sprintf("package %s comes from repository %q, not the base %q (%s)", label, d.Annotations[provenance.AnnRepository], base, d.URI))
		case len(p.URLs) > 0 && !slices.ContainsFunc(p.URLs, func(u string) bool { return strings.HasPrefix(d.URI, u) }):
			problems = append(problems, fmt.Sprintf("package %s: %s is outside the policy's URLs", label, d.URI))
		case len(p.Fingerprints) > 0 && !slices.ContainsFunc(p.Fingerprints, func(f string) bool { return strings.EqualFold(f, d.Annotations[provenance.AnnSigner]) }):
			problems = append(problems, fmt.Sprintf("package %s is signed by %q, not a key of the policy", label, d.Annotations[provenance.AnnSigner]))
		}
	}
	return n, problems
}
