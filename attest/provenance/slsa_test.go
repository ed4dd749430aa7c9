package provenance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nodeforge/builder/api/lock"
)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// testInput is a release of two architectures from two repositories, one
// package shared by both architectures.
func testInput() Input {
	shared := lock.Package{NEVRA: "filesystem-3.1-alt1.noarch", URL: "http://mirror.example/p11/branch/", Location: "noarch/RPMS.classic/filesystem-3.1-alt1.noarch.rpm",
		SHA256: sum("filesystem"), Repository: "base", SignerFingerprint: "AAAA"}
	kernel := func(arch string) lock.Package {
		return lock.Package{NEVRA: "kernel-6.12-alt1." + arch, URL: "http://mirror.example/p11/branch", Location: "/" + arch + "/RPMS.classic/kernel.rpm",
			SHA256: sum("kernel-" + arch), Repository: "base", SignerFingerprint: "AAAA"}
	}
	return Input{
		SpecName: "spec.yaml", SpecSHA256: sum("spec"),
		Branch: "p11", Version: "1.11.0", Channel: "stable",
		Lock: &lock.Lock{
			Repositories: []lock.Repository{
				{Name: "base", Format: "alt", URL: "http://mirror.example/p11/branch/", Signers: []string{"AAAA"},
					Release: lock.Digest{Algorithm: "SHA256", Value: sum("release")},
					Indexes: []lock.Index{{Path: "x86_64/base/pkglist.classic.xz", Algorithm: "SHA256", Hash: sum("pkglist")}}},
				{Name: "extra", Format: "rpm-md", URL: "file:///srv/extra", Signers: []string{"BBBB"},
					Indexes: []lock.Index{{Path: "repodata/primary.xml.gz", Algorithm: "sha256", Hash: sum("primary")}}},
			},
			Keyrings: []lock.Keyring{{Repository: "base", Fingerprints: []string{"CCCC", "AAAA"}}},
			Architectures: map[string]*lock.Arch{
				"x86_64":  {Packages: []lock.Package{shared, kernel("x86_64")}},
				"aarch64": {Packages: []lock.Package{shared, kernel("aarch64")}},
			},
		},
		LockName: "spec.lock.json", LockSHA256: sum("lock"),
		SourceDateEpoch: 1700000000,
		BuilderID:       "https://nodeforge.dev/builder", BuilderVersion: "v1.2.3", BuilderSHA256: sum("builder"),
	}
}

// TestInTotoAccepts: in-toto's own SLSA v1 provenance type (protobuf, the
// reference implementation of the predicate) reads our predicate without
// an unknown field and validates it.
func TestInTotoAccepts(t *testing.T) {
	b, err := New(testInput()).JSON()
	if err != nil {
		t.Fatal(err)
	}
	var p slsa.Provenance
	if err := protojson.Unmarshal(b, &p); err != nil {
		t.Fatalf("in-toto's provenance type refuses the predicate: %v\n%s", err, b)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("in-toto's validation: %v", err)
	}
	if got := p.GetBuildDefinition().GetBuildType(); got != BuildType {
		t.Errorf("buildType %q", got)
	}
	if got := p.GetRunDetails().GetBuilder().GetId(); got != "https://nodeforge.dev/builder" {
		t.Errorf("builder id %q", got)
	}
	// A release index, two indexes, a keyring and three distinct RPMs.
	if n := len(p.GetBuildDefinition().GetResolvedDependencies()); n != 7 {
		t.Errorf("%d resolved dependencies, want 7", n)
	}
}

// TestDependencies: every RPM once (by digest) with its repository and
// signer, indexes under their repository's URL with the algorithm named as
// in-toto's digest sets do, the keyring's fingerprints sorted, the base
// the spec's first repository.
func TestDependencies(t *testing.T) {
	p := New(testInput())
	byURI := map[string]ResourceDescriptor{}
	kinds := map[string]int{}
	for _, d := range p.BuildDefinition.ResolvedDependencies {
		if _, dup := byURI[d.URI]; dup {
			t.Errorf("%s listed twice", d.URI)
		}
		byURI[d.URI] = d
		kinds[d.Annotations[AnnKind]]++
	}
	if want := map[string]int{"release": 1, "index": 2, "keyring": 1, "rpm": 3}; !maps.Equal(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
	rpm, ok := byURI["http://mirror.example/p11/branch/noarch/RPMS.classic/filesystem-3.1-alt1.noarch.rpm"]
	if !ok {
		t.Fatalf("no filesystem RPM among %v", slices.Sorted(maps.Keys(byURI)))
	}
	if rpm.Digest["sha256"] != sum("filesystem") || rpm.Annotations[AnnRepository] != "base" || rpm.Annotations[AnnSigner] != "AAAA" {
		t.Errorf("filesystem RPM: %+v", rpm)
	}
	if _, ok := byURI["http://mirror.example/p11/branch/x86_64/RPMS.classic/kernel.rpm"]; !ok {
		t.Errorf("the kernel's URL is not joined with one slash: %v", slices.Sorted(maps.Keys(byURI)))
	}
	if d := byURI["http://mirror.example/p11/branch/release"]; d.Digest["sha256"] != sum("release") {
		t.Errorf("release digest %v (the lock's SHA256 is in-toto's sha256)", d.Digest)
	}
	if d := byURI["file:///srv/extra/repodata/primary.xml.gz"]; d.Digest["sha256"] != sum("primary") || d.Annotations[AnnRepository] != "extra" {
		t.Errorf("rpm-md index %+v", d)
	}
	if d := byURI["keyring:base"]; d.Annotations["fingerprints"] != "AAAA,CCCC" {
		t.Errorf("keyring fingerprints %q, want sorted", d.Annotations["fingerprints"])
	}
	if p.BuildDefinition.ExternalParameters.Base != "base" {
		t.Errorf("base %q", p.BuildDefinition.ExternalParameters.Base)
	}
	if got := p.RunDetails.Builder.BuilderDependencies; len(got) != 1 || got[0].Digest["sha256"] != sum("builder") {
		t.Errorf("builder dependencies %+v", got)
	}
	in := testInput()
	in.BuilderSHA256 = ""
	if got := New(in).RunDetails.Builder.BuilderDependencies; got != nil {
		t.Errorf("builder dependencies without a digest: %+v", got)
	}
}

// TestStableBytes: the same inputs give the same bytes whatever the order
// of the lock's maps and keyring (nothing of the run reaches them).
func TestStableBytes(t *testing.T) {
	a, err := New(testInput()).JSON()
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		in := testInput()
		in.Lock.Keyrings[0].Fingerprints = []string{"AAAA", "CCCC"}
		b, err := New(in).JSON()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("two predicates of the same release differ:\n%s\n%s", a, b)
		}
	}
	if !json.Valid(a) || strings.Contains(string(a), "\n") {
		t.Errorf("not compact JSON: %s", a)
	}
}
