// Package release is the release logic over OCI stores: it publishes a
// build's output to a store (package oci) with its signatures, SBOMs and
// provenance (package attest/signing), verifies a published release,
// promotes it from one channel to another by digest, and mirrors it
// between stores and through signed archives.
package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/attest/provenance"
	"github.com/nodeforge/builder/attest/sbom"
	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/internal/progress"
	"github.com/nodeforge/builder/oci"
)

// Repositories of a release, relative to the channel's prefix.
const (
	RepoBoot      = "boot"      // the boot assets artifact (OUT/oci)
	RepoInstaller = "installer" // OUT/installer
	RepoLock      = "lock"      // the lock file as an artifact
	RepoExtension = "extensions/"
	RepoImage     = "images/" // a container image of the spec's images section
	RepoBase      = "base"    // the package base subset a mirror may carry
	// LockArtifactType is the artifactType of the lock artifact.
	LockArtifactType = "application/vnd.nodeforge.lock.v1+json"
	// BaseArtifactType is the artifactType of a package base subset (one
	// layer per file, named by its title annotation).
	BaseArtifactType = "application/vnd.nodeforge.base-subset.v1"
	// AnnRepositories, on the lock artifact, lists every repository of the
	// release (comma-separated): promote and mirror read it.
	AnnRepositories = "dev.nodeforge.repositories"
)

// Inputs is a built release to publish.
type Inputs struct {
	Spec      *specs.Spec
	Lock      *lock.Lock
	LockBytes []byte
	Report    *report.Report
	// ReportJSON is the report as the build wrote it: attested as it is.
	ReportJSON []byte
	// Boot, Installer, Extensions and Images are the build's images: the
	// boot assets, the installer, each extension and each container image
	// (the spec's images section) by name.
	Boot, Installer    v1.ImageIndex
	Extensions, Images map[string]v1.ImageIndex
	Channel            string
	// BuilderID names the builder in the provenance (one per channel).
	BuilderID, BuilderVersion, BuilderSHA256 string
	Log                                      func(format string, args ...any) // Progress hears how far the push and the signing are.
	Progress                                 progress.Func
}

// Published is what a release put in the store.
type Published struct {
	Store    string    `json:"store"`
	Version  string    `json:"version"`
	Tag      string    `json:"tag"`
	Channel  string    `json:"channel"`
	Images   []Image   `json:"images"`
	Signed   int       `json:"signaturesAdded"`
	Attested int       `json:"attestationsAdded"`
	Stats    oci.Stats `json:"uploaded"`
	Subjects []string  `json:"subjects"`
	KeyID    string    `json:"keyId"`
}

// Image is one published repository.
type Image struct {
	Repo     string   `json:"repo"`
	Ref      string   `json:"ref"`
	Digest   string   `json:"digest"`
	Children []string `json:"children,omitempty"`
}

// unit is one repository of the release and the packages of each child.
type unit struct {
	repo     string
	index    v1.ImageIndex // nil for the lock artifact
	image    v1.Image
	packages map[string]map[string][]string // child digest -> arch -> NEVRAs
	name     string                         // SBOM document name
}

// Publish pushes every artifact of r to st under its version tag, then
// signs each manifest (index and children) and attaches the SPDX and
// CycloneDX SBOMs and the SLSA provenance as attestations. Manifests are
// written only after their blobs; tags only point at complete images.
func Publish(ctx context.Context, st oci.Store, signer *signing.Signer, r Inputs) (*Published, error) {
	logf := r.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	tag, err := oci.ValidTag(r.Spec.Version)
	if err != nil {
		return nil, err
	}
	units, err := releaseUnits(r)
	if err != nil {
		return nil, err
	}
	out := &Published{Store: st.String(), Version: r.Spec.Version, Tag: tag, Channel: r.Channel, KeyID: signer.KeyID, Images: []Image{}, Subjects: []string{}}
	var all []pushed
	for i, u := range units {
		p, err := push(ctx, st, u, tag, r.Spec.Version, logf)
		if err != nil {
			return nil, err
		}
		r.Progress.Send(progress.Update{Stage: "pushing", Unit: "images", Done: int64(i + 1), Total: int64(len(units)),
			Bytes: st.Stats().BlobBytes, Finished: i == len(units)-1})
		all = append(all, p)
		img := Image{Repo: u.repo, Ref: st.Ref(u.repo, tag), Digest: p.desc.Digest.String()}
		for _, c := range p.child {
			img.Children = append(img.Children, c.Digest.String())
		}
		out.Images = append(out.Images, img)
	}

	// One provenance for the release, naming every manifest as a subject.
	var subjects []signing.Subject
	for _, p := range all {
		subjects = append(subjects, signing.Subject{Name: st.Ref(p.u.repo, tag), Digest: map[string]string{"sha256": p.desc.Digest.Hex}})
		for _, c := range p.child {
			subjects = append(subjects, signing.Subject{Name: st.Ref(p.u.repo, tag), Digest: map[string]string{"sha256": c.Digest.Hex}})
		}
	}
	for _, s := range subjects {
		out.Subjects = append(out.Subjects, s.Name+"@sha256:"+s.Digest["sha256"])
	}
	stmts, err := releaseStatements(r, subjects)
	if err != nil {
		return nil, err
	}
	for i, p := range all {
		r.Progress.Send(progress.Update{Stage: "signing and attesting", Unit: "images", Done: int64(i), Total: int64(len(all))})
		logf("signing and attesting %s", st.Ref(p.u.repo, tag))
		for _, t := range append([]v1.Descriptor{p.desc}, p.child...) {
			err := oci.Retry(ctx, func() error {
				signed, attested, err := signAndAttest(ctx, st, signer, r, p, t, tag, stmts)
				out.Signed += signed
				out.Attested += attested
				return err
			})
			if err != nil {
				return nil, err
			}
		}
	}
	r.Progress.Send(progress.Update{Stage: "signing and attesting", Unit: "images", Done: int64(len(all)), Total: int64(len(all)), Finished: true})
	out.Stats = st.Stats()
	return out, nil
}

// pushed is a unit in the store: its descriptor there and its children's.
type pushed struct {
	u     unit
	desc  v1.Descriptor
	child []v1.Descriptor
}

// push writes one unit under tag, retrying what a rerun would fix.
func push(ctx context.Context, st oci.Store, u unit, tag, version string, logf func(string, ...any)) (pushed, error) {
	logf("pushing %s", st.Ref(u.repo, tag))
	err := oci.Retry(ctx, func() error {
		if u.index != nil {
			return st.WriteIndex(ctx, u.repo, tag, u.index)
		}
		return st.WriteImage(ctx, u.repo, tag, u.image)
	})
	if err != nil {
		if oci.RerunHelps(err) {
			return pushed{}, fmt.Errorf("release %s not complete (run it again to finish): %w", version, err)
		}
		return pushed{}, fmt.Errorf("release %s not complete: %w", version, err)
	}
	p := pushed{u: u}
	d, err := st.Head(ctx, u.repo, tag)
	if err != nil {
		return pushed{}, err
	}
	p.desc = *d
	if u.index != nil {
		m, err := u.index.IndexManifest()
		if err != nil {
			return pushed{}, err
		}
		p.child = m.Manifests
	}
	return p, nil
}

// statements are the release-wide attestations: the SLSA provenance, on
// every manifest, and the build report, on the lock.
type statements struct{ provenance, report []byte }

func releaseStatements(r Inputs, subjects []signing.Subject) (statements, error) {
	lockSum := sha256.Sum256(r.LockBytes)
	pred := provenance.New(provenance.Input{SpecName: r.Spec.Name + ".yaml", SpecSHA256: r.Report.Spec.SHA256,
		Branch: r.Spec.Branch, Version: r.Spec.Version, Channel: r.Channel, Lock: r.Lock,
		LockName: r.Spec.Name + ".lock.json", LockSHA256: hex.EncodeToString(lockSum[:]), SourceDateEpoch: r.Report.SourceDateEpoch,
		BuilderID: r.BuilderID, BuilderVersion: r.BuilderVersion, BuilderSHA256: r.BuilderSHA256})
	predJSON, err := pred.JSON()
	if err != nil {
		return statements{}, err
	}
	var st statements
	if st.provenance, err = signing.NewStatement(subjects, signing.PredicateSLSA, predJSON); err != nil {
		return statements{}, err
	}
	// The build report (every file of every artifact with its package or
	// generator) goes with the lock, for the certification audit.
	if st.report, err = signing.NewStatement(subjects, signing.PredicateBuildReport, r.ReportJSON); err != nil {
		return statements{}, err
	}
	return st, nil
}

// signAndAttest signs manifest t of p and attaches its attestations: the
// provenance, the build report on the lock, and SBOMs of an image with
// packages. It counts what it added (a rerun adds nothing twice).
func signAndAttest(ctx context.Context, st oci.Store, signer *signing.Signer, r Inputs, p pushed, t v1.Descriptor, tag string, stmts statements) (signed, attested int, err error) {
	ok, err := signer.Sign(ctx, st, p.u.repo, t.Digest)
	if err != nil {
		return 0, 0, err
	}
	if ok {
		signed++
	}
	type attestation struct {
		predicateType string
		statement     []byte
	}
	atts := []attestation{{signing.PredicateSLSA, stmts.provenance}}
	if p.u.repo == RepoLock {
		atts = append(atts, attestation{signing.PredicateBuildReport, stmts.report})
	}
	if p.u.packages != nil {
		spdx, cdx, err := imageSBOMs(r, p.u, t, subjectOf(st.Ref(p.u.repo, tag), t.Digest))
		if err != nil {
			return signed, 0, err
		}
		atts = append(atts, attestation{signing.PredicateSPDX, spdx}, attestation{signing.PredicateCycloneDX, cdx})
	}
	for _, a := range atts {
		added, err := signer.Attest(ctx, st, p.u.repo, t, a.predicateType, a.statement)
		if err != nil {
			return signed, attested, err
		}
		if added {
			attested++
		}
	}
	return signed, attested, nil
}

func subjectOf(name string, d v1.Hash) []signing.Subject {
	return []signing.Subject{{Name: name, Digest: map[string]string{"sha256": d.Hex}}}
}

// imageSBOMs are the SPDX and CycloneDX statements about manifest t of u:
// a child describes its architecture's packages, an index all of them.
func imageSBOMs(r Inputs, u unit, t v1.Descriptor, subjects []signing.Subject) (spdxSt, cdxSt []byte, err error) {
	pk, ok := u.packages[t.Digest.String()]
	if !ok {
		pk = map[string][]string{}
		for _, m := range u.packages {
			for arch, list := range m {
				pk[arch] = append(pk[arch], list...)
			}
		}
	}
	name := u.name
	if ok && len(pk) == 1 {
		for arch := range pk {
			name += "-" + arch
		}
	}
	doc := sbom.FromLock(r.Spec, r.Lock, name, pk, r.Report.LockSHA256, r.Report.SourceDateEpoch, "nodeforge-builder-"+r.BuilderVersion)
	spdx, err := sbom.SPDX(doc)
	if err != nil {
		return nil, nil, err
	}
	cdx, err := sbom.CycloneDX(doc)
	if err != nil {
		return nil, nil, err
	}
	if spdxSt, err = signing.NewStatement(subjects, signing.PredicateSPDX, spdx); err != nil {
		return nil, nil, err
	}
	if cdxSt, err = signing.NewStatement(subjects, signing.PredicateCycloneDX, cdx); err != nil {
		return nil, nil, err
	}
	return spdxSt, cdxSt, nil
}

// releaseUnits opens the build's OCI layouts and says which packages each
// per-architecture manifest holds.
func releaseUnits(r Inputs) ([]unit, error) {
	rep := r.Report
	archOf := map[string]string{} // OCI arch -> rpm arch
	for arch := range rep.Architectures {
		archOf[specs.GoArch(arch)] = arch
	}
	perChild := func(idx v1.ImageIndex, pk func(arch string) []string) (map[string]map[string][]string, error) {
		m, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		out := map[string]map[string][]string{}
		for _, c := range m.Manifests {
			if c.Platform == nil || archOf[c.Platform.Architecture] == "" {
				return nil, fmt.Errorf("manifest %s has no platform of the release", c.Digest)
			}
			arch := archOf[c.Platform.Architecture]
			out[c.Digest.String()] = map[string][]string{arch: pk(arch)}
		}
		return out, nil
	}
	var units []unit
	add := func(repo string, idx v1.ImageIndex, name string, pk func(arch string) []string) error {
		if idx == nil {
			return fmt.Errorf("%s: the build handed over no image", repo)
		}
		packages, err := perChild(idx, pk)
		if err != nil {
			return fmt.Errorf("%s: %w", repo, err)
		}
		units = append(units, unit{repo: repo, index: idx, packages: packages, name: name})
		return nil
	}
	base := r.Spec.Name + "-" + r.Spec.Version
	node := func(arch string) []string { return rep.Architectures[arch].Packages }
	if err := add(RepoBoot, r.Boot, base, node); err != nil {
		return nil, err
	}
	if err := add(RepoInstaller, r.Installer, base+"-installer", func(arch string) []string {
		pk := slices.Clone(node(arch))
		if a := r.Lock.Architectures[arch]; a != nil {
			pk = append(pk, a.Components["installer"]...)
		}
		return pk
	}); err != nil {
		return nil, err
	}
	// Each extension and each container image: its packages per
	// architecture, as the report lists them.
	named := []struct {
		repo, doc string
		digests   map[string]string
		indexes   map[string]v1.ImageIndex
		packages  func(a *report.ArchReport, name string) []string
	}{
		{RepoExtension, "-", rep.Extensions, r.Extensions, func(a *report.ArchReport, name string) []string {
			if e := a.Extensions[name]; e != nil {
				return e.Packages
			}
			return nil
		}},
		{RepoImage, "-image-", rep.Images, r.Images, func(a *report.ArchReport, name string) []string {
			if im := a.Images[name]; im != nil {
				return im.Packages
			}
			return nil
		}},
	}
	for _, n := range named {
		for _, name := range slices.Sorted(maps.Keys(n.digests)) {
			pk := func(arch string) []string { return n.packages(rep.Architectures[arch], name) }
			if err := add(n.repo+name, n.indexes[name], base+n.doc+name, pk); err != nil {
				return nil, err
			}
		}
	}
	var repos []string
	for _, u := range units {
		repos = append(repos, u.repo)
	}
	lockArt, err := oci.NewArtifact(LockArtifactType, LockArtifactType, r.LockBytes, nil, map[string]string{
		AnnRepositories:                    strings.Join(append(repos, RepoLock), ","),
		"org.opencontainers.image.title":   r.Spec.Name + ".lock.json",
		"org.opencontainers.image.version": r.Spec.Version,
		"org.opencontainers.image.created": time.Unix(rep.SourceDateEpoch, 0).UTC().Format(time.RFC3339),
	})
	if err != nil {
		return nil, err
	}
	units = append(units, unit{repo: RepoLock, image: lockArt})
	return units, nil
}
