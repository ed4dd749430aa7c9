package release

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/nodeforge/builder/attest/provenance"
	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/attest/signing/signingtest"
	"github.com/nodeforge/builder/oci"
)

// stores returns each kind of store: in-process registries with and
// without the referrers API, and a local OCI layout.
func stores(t *testing.T) map[string]oci.Store {
	out := map[string]oci.Store{}
	for name, referrers := range map[string]bool{"registry+referrers": true, "registry-fallback": false} {
		srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.WithReferrersSupport(referrers), ggcrregistry.Logger(log.New(io.Discard, "", 0))))
		t.Cleanup(srv.Close)
		u, _ := url.Parse(srv.URL)
		st, err := oci.NewRemote(u.Host+"/test", oci.RemoteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[name] = st
	}
	l, err := oci.CreateLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out["layout"] = l
	return out
}

const pkgSHA = "6b7d10dff1a2bc6c49c6624a537ee7e38f6a4ab4fb027134c5d6513790196aee"

func provenanceFor(subjects []signing.Subject, repo string) []byte {
	p := provenance.Predicate{}
	p.BuildDefinition.ExternalParameters.Base = "base"
	p.BuildDefinition.ResolvedDependencies = []provenance.ResourceDescriptor{{Name: "bash-5.2-alt1.x86_64", URI: "alt/x86_64/RPMS.classic/bash.rpm",
		Digest: map[string]string{"sha256": pkgSHA}, Annotations: map[string]string{provenance.AnnKind: "rpm", provenance.AnnRepository: repo, provenance.AnnSigner: "B054"}}}
	b, _ := json.Marshal(p)
	st, _ := signing.NewStatement(subjects, signing.PredicateSLSA, b)
	return st
}

func spdxFor(subjects []signing.Subject, sha string) []byte {
	doc := `{"spdxVersion":"SPDX-2.3","packages":[{"name":"node-os"},{"name":"bash","versionInfo":"5.2-alt1","checksums":[{"algorithm":"SHA256","checksumValue":"` + sha + `"}]}]}`
	st, _ := signing.NewStatement(subjects, signing.PredicateSPDX, []byte(doc))
	return st
}

// attestAll signs and attests the index and each child as a release does.
func attestAll(t *testing.T, ctx context.Context, st oci.Store, s *signing.Signer, repo string, repoOfPackage string) v1.Descriptor {
	t.Helper()
	idx, err := random.Index(256, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WriteIndex(ctx, repo, "1.0", idx); err != nil {
		t.Fatal(err)
	}
	top, err := st.Head(ctx, repo, "1.0")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := idx.IndexManifest()
	targets := append([]v1.Descriptor{*top}, m.Manifests...)
	var subjects []signing.Subject
	for _, d := range targets {
		subjects = append(subjects, signing.Subject{Name: repo, Digest: map[string]string{"sha256": d.Digest.Hex}})
	}
	prov := provenanceFor(subjects, repoOfPackage)
	for _, d := range targets {
		if _, err := s.Sign(ctx, st, repo, d.Digest); err != nil {
			t.Fatal(err)
		}
		one := subjectOf(repo, d.Digest)
		cdx, _ := signing.NewStatement(one, signing.PredicateCycloneDX, []byte(`{"bomFormat":"CycloneDX"}`))
		for pt, b := range map[string][]byte{signing.PredicateSLSA: prov, signing.PredicateSPDX: spdxFor(one, pkgSHA), signing.PredicateCycloneDX: cdx} {
			if _, err := s.Attest(ctx, st, repo, d, pt, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	return *top
}

func TestSignAttestVerify(t *testing.T) {
	ctx := context.Background()
	s := signingtest.Signer(t)
	other := signingtest.Signer(t)
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			top := attestAll(t, ctx, st, s, "installer", "base")
			v, err := Verify(ctx, st, "installer", "1.0", []signing.Verifier{s.Verifier()}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !v.OK() {
				t.Fatalf("verify: %v", v.Problems)
			}
			if len(v.Manifests) != 3 {
				t.Errorf("%d manifests checked, want the index and 2 children", len(v.Manifests))
			}
			for _, m := range v.Manifests {
				if m.Signatures != 1 || m.Referrers != 3 || m.Packages != 1 {
					t.Errorf("%s: %+v", m.Digest, m)
				}
			}
			// Signing and attesting again adds nothing.
			if signed, _ := s.Sign(ctx, st, "installer", top.Digest); signed {
				t.Error("a second signature by the same key was added")
			}
			// The wrong key: every manifest named.
			v, _ = Verify(ctx, st, "installer", "1.0", []signing.Verifier{other.Verifier()}, nil)
			if v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), "no signature verifies with the key") {
				t.Errorf("verify with another key: %v", v.Problems)
			}
			// A policy naming another base refuses the package, named.
			v, _ = Verify(ctx, st, "installer", "1.0", []signing.Verifier{s.Verifier()}, &Policy{Base: "p11"})
			if v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), `package bash-5.2-alt1 comes from repository "base", not the base "p11"`) {
				t.Errorf("verify with another base: %v", v.Problems)
			}
			v, _ = Verify(ctx, st, "installer", "1.0", []signing.Verifier{s.Verifier()}, &Policy{Fingerprints: []string{"FFFF"}})
			if v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), "is signed by") {
				t.Errorf("verify with other package signers: %v", v.Problems)
			}
		})
	}
}

// TestVerifyForeignPackage: an SBOM package from a repository other than
// the base, or unknown to the provenance, fails.
func TestVerifyForeignPackage(t *testing.T) {
	ctx := context.Background()
	s := signingtest.Signer(t)
	st := stores(t)["registry-fallback"]
	attestAll(t, ctx, st, s, "foreign", "overlay")
	v, err := Verify(ctx, st, "foreign", "1.0", []signing.Verifier{s.Verifier()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), `comes from repository "overlay", not the base "base"`) {
		t.Errorf("verify: %v", v.Problems)
	}
}
