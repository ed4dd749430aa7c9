// Package provenance writes SLSA v1 provenance for a release: what was
// asked for (spec, branch, version, channel), everything the build read
// (every RPM by sha256, every repository index by digest, the keyrings),
// and which builder made it. The bytes depend only on those inputs: no
// clock, host or user reaches them.
package provenance

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/nodeforge/builder/api/lock"
)

// BuildType names how a nodeforge release is built.
const BuildType = "https://nodeforge.dev/builder/release/v1"

// Predicate is SLSA provenance v1.
type Predicate struct {
	BuildDefinition BuildDefinition `json:"buildDefinition"`
	RunDetails      RunDetails      `json:"runDetails"`
}

// BuildDefinition is what was built and from what.
type BuildDefinition struct {
	BuildType            string               `json:"buildType"`
	ExternalParameters   ExternalParameters   `json:"externalParameters"`
	InternalParameters   InternalParameters   `json:"internalParameters"`
	ResolvedDependencies []ResourceDescriptor `json:"resolvedDependencies"`
}

// ExternalParameters are the release engineer's inputs.
type ExternalParameters struct {
	Spec    Artifact `json:"spec"`
	Branch  string   `json:"branch"`
	Version string   `json:"version"`
	Channel string   `json:"channel"`
	// Base is the repository the release must come from: the spec's first.
	Base string `json:"base"`
}

// Artifact names an input file by digest.
type Artifact struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// InternalParameters are the builder's own choices.
type InternalParameters struct {
	SourceDateEpoch int64        `json:"sourceDateEpoch"`
	Lock            Artifact     `json:"lock"`
	Repositories    []Repository `json:"repositories"`
}

// Repository is one repository of the lock.
type Repository struct {
	Name    string   `json:"name"`
	URL     string   `json:"url"`
	Format  string   `json:"format"`
	Signers []string `json:"signers"`
}

// ResourceDescriptor is an in-toto resource descriptor.
type ResourceDescriptor struct {
	Name        string            `json:"name,omitempty"`
	URI         string            `json:"uri,omitempty"`
	Digest      map[string]string `json:"digest,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// RunDetails names the builder.
type RunDetails struct {
	Builder Builder `json:"builder"`
}

// Builder is the builder's identity.
type Builder struct {
	ID      string            `json:"id"`
	Version map[string]string `json:"version"`
	// BuilderDependencies holds the builder binary by digest.
	BuilderDependencies []ResourceDescriptor `json:"builderDependencies,omitempty"`
}

// Input is what a release's provenance is made from.
type Input struct {
	SpecName, SpecSHA256      string
	Branch, Version, Channel  string
	Lock                      *lock.Lock
	LockName, LockSHA256      string
	SourceDateEpoch           int64
	BuilderID, BuilderVersion string
	BuilderSHA256             string // of the builder executable
}

// Annotations of each RPM's resource descriptor, read by the policy.
const (
	AnnRepository = "repository"
	AnnSigner     = "signer"
	AnnKind       = "kind" // "rpm", "index", "release", "keyring"
)

// New returns the predicate for in.
func New(in Input) Predicate {
	l := in.Lock
	p := Predicate{
		BuildDefinition: BuildDefinition{
			BuildType: BuildType,
			ExternalParameters: ExternalParameters{
				Spec:   Artifact{Name: in.SpecName, Digest: map[string]string{"sha256": in.SpecSHA256}},
				Branch: in.Branch, Version: in.Version, Channel: in.Channel,
			},
			InternalParameters: InternalParameters{
				SourceDateEpoch: in.SourceDateEpoch,
				Lock:            Artifact{Name: in.LockName, Digest: map[string]string{"sha256": in.LockSHA256}},
			},
		},
		RunDetails: RunDetails{Builder: Builder{ID: in.BuilderID, Version: map[string]string{"nodeforge-builder": in.BuilderVersion}}},
	}
	if in.BuilderSHA256 != "" {
		p.RunDetails.Builder.BuilderDependencies = []ResourceDescriptor{{Name: "nodeforge-builder", Digest: map[string]string{"sha256": in.BuilderSHA256}}}
	}
	if len(l.Repositories) > 0 {
		p.BuildDefinition.ExternalParameters.Base = l.Repositories[0].Name
	}
	var deps []ResourceDescriptor
	for _, r := range l.Repositories {
		p.BuildDefinition.InternalParameters.Repositories = append(p.BuildDefinition.InternalParameters.Repositories,
			Repository{Name: r.Name, URL: r.URL, Format: r.Format, Signers: r.Signers})
		if r.Release.Value != "" {
			deps = append(deps, ResourceDescriptor{URI: join(r.URL, "release"), Digest: digest(r.Release),
				Annotations: map[string]string{AnnKind: "release", AnnRepository: r.Name}})
		}
		for _, ix := range r.Indexes {
			deps = append(deps, ResourceDescriptor{URI: join(r.URL, ix.Path), Digest: map[string]string{algo(ix.Algorithm): ix.Hash},
				Annotations: map[string]string{AnnKind: "index", AnnRepository: r.Name}})
		}
	}
	for _, k := range l.Keyrings {
		fps := slices.Clone(k.Fingerprints)
		sort.Strings(fps)
		deps = append(deps, ResourceDescriptor{Name: "keyring:" + k.Repository, URI: "keyring:" + k.Repository,
			Annotations: map[string]string{AnnKind: "keyring", AnnRepository: k.Repository, "fingerprints": strings.Join(fps, ",")}})
	}
	seen := map[string]bool{}
	for _, arch := range slices.Sorted(maps.Keys(l.Architectures)) {
		for _, pk := range l.Architectures[arch].Packages {
			if seen[pk.SHA256] {
				continue
			}
			seen[pk.SHA256] = true
			deps = append(deps, ResourceDescriptor{Name: pk.NEVRA, URI: join(pk.URL, pk.Location), Digest: map[string]string{"sha256": pk.SHA256},
				Annotations: map[string]string{AnnKind: "rpm", AnnRepository: pk.Repository, AnnSigner: pk.SignerFingerprint}})
		}
	}
	p.BuildDefinition.ResolvedDependencies = deps
	return p
}

// JSON marshals the predicate (encoding/json: stable bytes).
func (p Predicate) JSON() ([]byte, error) { return json.Marshal(p) }

func join(base, rel string) string {
	if base == "" {
		return rel
	}
	return strings.TrimSuffix(base, "/") + "/" + strings.TrimPrefix(rel, "/")
}

func digest(d lock.Digest) map[string]string {
	return map[string]string{algo(d.Algorithm): d.Value}
}

// algo maps the lock's algorithm names to in-toto's digest set keys.
func algo(a string) string {
	a = strings.ToLower(strings.ReplaceAll(a, "-", ""))
	switch a {
	case "sha256", "sha512", "sha1", "md5":
		return a
	}
	return a
}
