// Package certification writes the certification audit report of a
// release: it verifies the release as published (signatures,
// attestations, the single-base policy), then proves from the verified
// lock and build report that every file of every artifact comes from a
// package of the certified base or from a declared builder generator, and
// says so as JSON, Markdown and a self-contained HTML page.
package certification

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/attest/provenance"
	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/release"
)

// SchemaVersion is the version of the audit.json format (docs/audit.schema.json).
const SchemaVersion = 1

// Options are the inputs of an audit.
type Options struct {
	Store   oci.Reader
	Version string
	Keys    []signing.Verifier
	Policy  *release.Policy
	// Previous, when set, is the release to list the changes against.
	Previous        oci.Reader
	PreviousVersion string
	// Reproduced, when set, is the build report of a second, independent
	// build of the same lock (builder build elsewhere, or builder repro).
	Reproduced     *report.Report
	ReproducedFrom string
	Log            func(format string, args ...any)
}

// Report is the audit, as audit.json holds it.
type Report struct {
	SchemaVersion int `json:"schemaVersion"`
	// Verdict is "pass" or "fail": the exit status, and the verification
	// summary's result.
	Verdict string `json:"verdict"`
	// Outcome is the verdict in three states: "pass" (no caveat),
	// "pass-with-caveats" (a pass a certifier must weigh) or "fail".
	Outcome string   `json:"outcome"`
	Reasons []string `json:"reasons"`
	// Caveats are what a certifier must know of a release that passes
	// (or fails): evidence not given, scriptlets not handled, findings the
	// policy makes caveats.
	Caveats    []string     `json:"caveats"`
	Identity   Identity     `json:"identity"`
	Artifacts  []Artifact   `json:"artifacts"`
	Packages   []Package    `json:"packages"`
	Files      Files        `json:"files"`
	Policy     PolicyChecks `json:"policy"`
	Licenses   []License    `json:"licenses"`
	Changes    *Changes     `json:"changes,omitempty"`
	Promotions []Promotion  `json:"promotions"`
	// UKIs are the release's signed unified kernel images (Secure Boot).
	UKIs []UKI `json:"ukis"`
	// Images are the release's container images (the spec's images).
	Images []ContainerImage `json:"images,omitempty"`
}

// Identity says what the release is.
type Identity struct {
	Name            string `json:"name"`
	Version         string `json:"version"`
	Branch          string `json:"branch"`
	Channel         string `json:"channel"`
	Store           string `json:"store"`
	SpecSHA256      string `json:"specSha256"`
	LockDigest      string `json:"lockDigest"` // the lock artifact's manifest
	LockSHA256      string `json:"lockSha256"` // the lock file
	BuilderID       string `json:"builderId"`
	BuilderVersion  string `json:"builderVersion"`
	BuilderSHA256   string `json:"builderSha256"`
	SourceDateEpoch int64  `json:"sourceDateEpoch"`
	Base            []Repo `json:"base"`
}

// Repo is one repository of the package base.
type Repo struct {
	Name         string   `json:"name"`
	URL          string   `json:"url"`
	Format       string   `json:"format"`
	Release      string   `json:"release"` // algorithm:digest of the signed release file
	Indexes      []string `json:"indexes"` // path algorithm:digest
	Fingerprints []string `json:"fingerprints"`
}

// Artifact is one published manifest (an index, a child, the lock) or a
// boot asset inside one.
type Artifact struct {
	Repository   string         `json:"repository"`
	Ref          string         `json:"ref"`
	Digest       string         `json:"digest"`
	Kind         string         `json:"kind"` // index, image, artifact, boot-asset
	Platform     string         `json:"platform,omitempty"`
	Name         string         `json:"name,omitempty"` // a boot asset's file name
	Size         int64          `json:"size"`
	SignedBy     []string       `json:"signedBy"`
	Attestations map[string]int `json:"attestations"`
	Verified     bool           `json:"verified"`
	Problems     []string       `json:"problems,omitempty"`
	// manifest is the digest of the manifest a boot asset is a layer of.
	manifest string
}

// Package is one locked package.
type Package struct {
	NEVRA      string   `json:"nevra"`
	Name       string   `json:"name"`
	Version    string   `json:"version"` // [E:]V-R
	Arch       string   `json:"arch"`
	Disttag    string   `json:"disttag"`
	SourceRPM  string   `json:"sourceRpm"`
	Repository string   `json:"repository"`
	SHA256     string   `json:"sha256"`
	SignedBy   string   `json:"signedBy"` // OpenPGP fingerprint
	License    string   `json:"license"`
	Size       int64    `json:"installedSize"` // bytes of its files in the artifacts
	In         []string `json:"in"`            // artifacts holding its files
}

// Files is the file traceability section.
type Files struct {
	Total     int `json:"total"`
	Packaged  int `json:"fromPackages"`
	Generated int `json:"fromGenerators"`
	Unowned   int `json:"unowned"`
	// Unpacked counts the paths of the published root filesystem images
	// and container image layers that were unpacked and compared with the
	// report's entries.
	Unpacked int `json:"unpacked"`
	// Relocated counts the extensions' files their definitions relocated,
	// each still traced to its package (see relocated).
	Relocated int `json:"relocated"`
	// Generators are the builder generators declared by the build.
	Generators map[string]string `json:"generators"`
	// List is every file of every artifact with its origin.
	List []File `json:"list"`
}

// File is one file of one artifact.
type File struct {
	Artifact  string `json:"artifact"` // rootfs/x86_64, initramfs/x86_64, extension/zfs/x86_64, image/etcd/x86_64
	Path      string `json:"path"`
	Type      string `json:"type"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256,omitempty"`
	Package   string `json:"package,omitempty"`
	RPMDigest string `json:"rpmDigest,omitempty"` // the digest the package header records
	Generator string `json:"generator,omitempty"`
	Problem   string `json:"problem,omitempty"`
	// RelocatedFrom is where the package put an extension's file that
	// the extension's definition relocated (the report's origin path).
	RelocatedFrom string `json:"relocatedFrom,omitempty"`
	// rpmSHA256 is the sha256 of the .rpm the file was laid from.
	rpmSHA256 string
}

// PolicyChecks are the checks of section 6.
type PolicyChecks struct {
	Base            BaseCheck        `json:"singleBase"`
	Signatures      SignatureCheck   `json:"signatures"`
	Scriptlets      []Scriptlet      `json:"scriptlets"`
	Setuid          []string         `json:"setuid"`
	SetuidStripped  []string         `json:"setuidStripped"`
	Capabilities    []string         `json:"capabilities"`
	WorldWritable   []string         `json:"worldWritable"`
	Reproducibility ReproducibleEvid `json:"reproducibility"`
}

// BaseCheck: every package from the named base, and built for the
// release's branch.
type BaseCheck struct {
	Base    string   `json:"base"`
	OK      bool     `json:"ok"` // every package from the base's repository
	Outside []string `json:"outside"`
	// Branch is the release's; Branches count the packages by the branch
	// their disttag names ("" for none), as the check saw them.
	Branch   string        `json:"branch"`
	Branches []BranchCount `json:"branches"`
	// OtherBranch are the packages built for another branch: caveats or,
	// as the policy says, failures.
	OtherBranch []string `json:"otherBranch"`
	// Result is the row's state, as Outcome is the report's.
	Result string `json:"result"`
}

// BranchCount is how many packages were built for one branch.
type BranchCount struct {
	Branch   string `json:"branch"`
	Packages int    `json:"packages"`
}

// The three states of a verdict (Report.Outcome, BaseCheck.Result).
const (
	OutcomePass    = "pass"
	OutcomeCaveats = "pass-with-caveats"
	OutcomeFail    = "fail"
)

// outcome is the state of a check that failed or not, with caveats or not.
func outcome(failed, caveats bool) string {
	switch {
	case failed:
		return OutcomeFail
	case caveats:
		return OutcomeCaveats
	}
	return OutcomePass
}

// SignatureCheck: every package and repository signature valid (as the
// lock recorded them when it verified each, against the pinned keys).
type SignatureCheck struct {
	OK           bool     `json:"ok"`
	Packages     int      `json:"packagesSigned"`
	Unsigned     []string `json:"unsigned"`
	Repositories int      `json:"repositoriesSigned"`
	Problems     []string `json:"problems"`
}

// Scriptlet is how one scriptlet was handled (never executed).
type Scriptlet struct {
	Arch string `json:"arch"`
	// Image is the container image whose assembly met it ("": the node's).
	Image   string   `json:"image,omitempty"`
	Package string   `json:"package"`
	Kind    string   `json:"kind"`
	Handled bool     `json:"handled"`
	How     []string `json:"how,omitempty"`
	Pending []string `json:"notHandled,omitempty"`
}

// ReproducibleEvid is the reproducibility evidence.
type ReproducibleEvid struct {
	Evidence  string   `json:"evidence"` // "none" or where the second build came from
	OK        bool     `json:"ok"`
	Compared  int      `json:"compared"`
	Different []string `json:"different"`
	// Like says whether both builds' reports name the same compressors
	// (like with like): "same", "different" (then different digests are
	// no evidence either way, never a failure) or "unrecorded" (a report
	// of a builder that did not name them: compared as before).
	Like string `json:"like,omitempty"`
	// Compressors are, for "same", the compressors both builds used and,
	// for "different", those that differ, as each build used them.
	Compressors []string `json:"compressors,omitempty"`
	// Tools are the host tools (report.Report.Tools: xorriso for the ISO,
	// the squashfs writer) whose versions differ between the two builds,
	// as each build's report names them: an artifact they wrote may
	// differ for that reason alone.
	Tools []string `json:"tools,omitempty"`
}

// Comparable says whether the second build's digests are evidence: its
// compressors are the release's, or are not named.
func (e ReproducibleEvid) Comparable() bool { return e.Like != "different" }

// toolsNote is "; the host tools' versions differ: ..." when they do.
func (e ReproducibleEvid) toolsNote() string {
	if len(e.Tools) == 0 {
		return ""
	}
	return "; the host tools' versions differ: " + strings.Join(e.Tools, "; ")
}

// likeWithLike fills in which compressors the release's build (a) and the
// second build (b) used.
func (e *ReproducibleEvid) likeWithLike(a, b *report.Report) {
	switch unlike := report.Unlike(a.Compressors, b.Compressors); {
	case len(a.Compressors) == 0 || len(b.Compressors) == 0:
		e.Like = "unrecorded"
	case len(unlike) == 0:
		e.Like = "same"
		for _, k := range slices.Sorted(maps.Keys(a.Compressors)) {
			e.Compressors = append(e.Compressors, k+": "+a.Compressors[k])
		}
	default:
		e.Like = "different"
		for _, u := range unlike {
			e.Compressors = append(e.Compressors, fmt.Sprintf("%s: %s here, %s in the second build", u[0], u[1], u[2]))
		}
	}
	for _, u := range report.Unlike(a.Tools, b.Tools) {
		e.Tools = append(e.Tools, fmt.Sprintf("%s: %s here, %s in the second build", u[0], u[1], u[2]))
	}
}

// License counts the packages under one license expression.
type License struct {
	License  string `json:"license"`
	Packages int    `json:"packages"`
}

// Changes are the differences from the previous release.
type Changes struct {
	Previous     string          `json:"previous"`
	Added        []string        `json:"added"`
	Removed      []string        `json:"removed"`
	Updated      []PackageUpdate `json:"updated"`
	FilesAdded   int             `json:"filesAdded"`
	FilesRemoved int             `json:"filesRemoved"`
	FilesChanged int             `json:"filesChanged"`
}

// PackageUpdate is a package whose version changed.
type PackageUpdate struct {
	Name string `json:"name"`
	Arch string `json:"arch"`
	From string `json:"from"`
	To   string `json:"to"`
	// SizeDelta is the bytes of its files in every artifact, new minus old.
	SizeDelta int64 `json:"sizeDelta"`
}

// Promotion is a verified promotion attestation.
type Promotion struct {
	Repository string `json:"repository"`
	Digest     string `json:"digest"`
	From       string `json:"from"`
	To         string `json:"to"`
	Key        string `json:"key"`
	Time       string `json:"time"`
}

// auditedRelease is what the audit reads of one release.
type auditedRelease struct {
	lock       *lock.Lock
	lockSHA    string
	report     *report.Report
	prov       *provenance.Predicate
	verified   []*release.Verification
	lockDigest string
}

// Audit verifies the release and writes the report. An error means the
// audit could not be made (the store unreachable, no such release); a
// release that fails its checks gives a report with verdict "fail".
func Audit(ctx context.Context, o Options) (*Report, error) {
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	r := &Report{SchemaVersion: SchemaVersion, Reasons: []string{}, Caveats: []string{}, Promotions: []Promotion{}, UKIs: []UKI{}, Images: []ContainerImage{}}
	fail := func(format string, a ...any) { r.Reasons = append(r.Reasons, fmt.Sprintf(format, a...)) }

	logf("verifying %s %s", o.Store, o.Version)
	rel, err := readRelease(ctx, o.Store, o.Version, o.Keys, o.Policy, r, fail)
	if err != nil {
		return nil, err
	}
	identity(r, o, rel)
	packages(r, rel, o.Policy, fail)
	files(r, rel, fail)
	relocated(r, fail)
	r.Files.Unpacked = unpacked(ctx, o.Store, r, rel, fail) + containerImages(ctx, o.Store, r, rel, fail)
	ukis(ctx, o.Store, r, rel, fail)
	policy(r, rel, fail)
	reproducibility(r, rel, o, fail)
	licenses(r)
	caveats(r, rel, o.Policy, fail)
	if o.Previous != nil {
		logf("comparing with %s %s", o.Previous, o.PreviousVersion)
		prev, err := readRelease(ctx, o.Previous, o.PreviousVersion, o.Keys, o.Policy, nil, func(string, ...any) {})
		if err != nil {
			return nil, fmt.Errorf("previous release: %w", err)
		}
		r.Changes = changes(ctx, rel, prev, o.Previous.Ref(release.RepoLock, o.PreviousVersion))
	}
	conclude(r)
	return r, nil
}

// conclude gives the verdict: a pass has no reason to fail; a pass with
// caveats still exits 0, but says so.
func conclude(r *Report) {
	r.Verdict = "pass"
	if len(r.Reasons) > 0 {
		r.Verdict = "fail"
	}
	r.Outcome = outcome(len(r.Reasons) > 0, len(r.Caveats) > 0)
}

// buildReport is the build report of what was published. The same lock
// released again (by another builder, or after a change that left the
// lock alone) carries one report per release; this release's is the one
// whose boot index is the published one.
func buildReport(reports []*report.Report, boot string) (*report.Report, error) {
	if len(reports) <= 1 {
		if len(reports) == 0 {
			return nil, nil
		}
		return reports[0], nil
	}
	var match *report.Report
	for _, r := range reports {
		if r.OCIIndex == boot {
			match = r
		}
	}
	if match == nil {
		return nil, fmt.Errorf("%d build report attestations, none of the published boot index %s", len(reports), boot)
	}
	return match, nil
}

// provenanceOf is the provenance made with the build report (by the same
// builder version), or the first when none says so.
func provenanceOf(provs []*provenance.Predicate, rep *report.Report) *provenance.Predicate {
	for _, p := range provs {
		if rep != nil && p.RunDetails.Builder.Version["nodeforge-builder"] == rep.Builder {
			return p
		}
	}
	if len(provs) > 0 {
		return provs[0]
	}
	return nil
}

// readRelease verifies every repository of the release and reads the
// lock, the provenance and the build report from verified attestations.
// With r set, it fills the artifacts section and the promotions.
func readRelease(ctx context.Context, st oci.Reader, version string, keys []signing.Verifier, pol *release.Policy, r *Report, fail func(string, ...any)) (*auditedRelease, error) {
	repos, err := release.Repositories(ctx, st, version)
	if err != nil {
		return nil, err
	}
	rel := &auditedRelease{}
	lockBytes, err := release.LockBytes(ctx, st, version)
	if err != nil {
		return nil, err
	}
	if rel.lock, err = lock.Parse(lockBytes, st.Ref(release.RepoLock, version)); err != nil {
		return nil, err
	}
	rel.lockSHA = digest.SHA256Hex(lockBytes)
	var reports []*report.Report
	var provs []*provenance.Predicate
	var boot string // the published boot index's digest
	for _, repo := range repos {
		v, err := release.Verify(ctx, st, repo, version, keys, pol)
		if err != nil {
			fail("%s: %v", st.Ref(repo, version), err)
			continue
		}
		rel.verified = append(rel.verified, v)
		for _, p := range v.Problems {
			fail("%s", p)
		}
		switch repo {
		case release.RepoLock:
			rel.lockDigest = v.Digest
		case release.RepoBoot:
			boot = v.Digest
		}
		for _, m := range v.Manifests {
			for _, s := range m.Statements {
				switch s.PredicateType {
				case signing.PredicateSLSA:
					var p provenance.Predicate
					if json.Unmarshal(s.Predicate, &p) == nil {
						provs = append(provs, &p)
					}
				case signing.PredicateBuildReport:
					var br report.Report
					if err := json.Unmarshal(s.Predicate, &br); err != nil {
						fail("%s: the build report attestation: %v", st.Ref(repo, m.Digest), err)
					} else {
						reports = append(reports, &br)
					}
				case signing.PredicatePromotion:
					if r != nil {
						var p release.PromotionPredicate
						if json.Unmarshal(s.Predicate, &p) == nil {
							r.Promotions = append(r.Promotions, Promotion{Repository: repo, Digest: m.Digest, From: p.From, To: p.To, Key: p.Key, Time: p.Time.UTC().Format("2006-01-02T15:04:05Z")})
						}
					}
				}
			}
		}
		if r != nil {
			if err := artifacts(ctx, st, repo, version, v, r, fail); err != nil {
				return nil, err
			}
		}
	}
	if rel.report, err = buildReport(reports, boot); err != nil {
		fail("%s: %v", st.Ref(release.RepoLock, version), err)
	} else if rel.report == nil {
		fail("%s: no verified build report attestation (%s): the files of the artifacts cannot be traced", st.Ref(release.RepoLock, version), signing.PredicateBuildReport)
	}
	rel.prov = provenanceOf(provs, rel.report)
	if rel.prov == nil {
		fail("%s: no verified SLSA provenance", st.Ref(release.RepoLock, version))
	}
	if rel.report != nil && rel.report.LockSHA256 != rel.lockSHA {
		fail("the build report is of lock sha256 %s, the release's lock is %s", rel.report.LockSHA256, rel.lockSHA)
	}
	return rel, nil
}

// readManifest reads an image manifest of the store.
func readManifest(ctx context.Context, st oci.Reader, repo, digest string) (*v1.Manifest, error) {
	img, err := st.Image(ctx, repo, digest)
	if err != nil {
		return nil, err
	}
	return img.Manifest()
}

// artifacts adds the manifests of one repository, and the boot assets.
func artifacts(ctx context.Context, st oci.Reader, repo, version string, v *release.Verification, r *Report, fail func(string, ...any)) error {
	top, children, err := oci.Manifests(ctx, st, repo, version)
	if err != nil {
		return err
	}
	platforms := map[string]string{}
	for _, c := range children {
		if c.Platform != nil {
			platforms[c.Digest.String()] = c.Platform.OS + "/" + c.Platform.Architecture
		}
	}
	for _, m := range v.Manifests {
		a := Artifact{Repository: repo, Ref: st.Ref(repo, version), Digest: m.Digest, Kind: "image", SignedBy: m.SignedBy, Attestations: m.Attestations, Verified: true}
		switch {
		case m.Digest != top.Digest.String():
			a.Ref, a.Platform = st.Ref(repo, m.Digest), platforms[m.Digest]
		case top.MediaType.IsIndex():
			a.Kind = "index"
		}
		if repo == release.RepoLock || (repo == release.RepoBoot && a.Kind == "image") {
			a.Kind = "artifact"
		}
		if a.SignedBy == nil {
			a.SignedBy = []string{}
		}
		for _, p := range v.Problems {
			if strings.Contains(p, m.Digest) || strings.Contains(p, st.Ref(repo, version)+":") {
				a.Verified = false
				a.Problems = append(a.Problems, p)
			}
		}
		var layers []v1.Descriptor
		if a.Kind != "index" {
			// A manifest that cannot be read (damaged, missing) is an
			// artifact that fails, not an audit that cannot be made.
			mf, err := readManifest(ctx, st, repo, m.Digest)
			if err != nil {
				p := fmt.Sprintf("%s: %v", st.Ref(repo, m.Digest), err)
				if !slices.Contains(a.Problems, p) {
					fail("%s", p)
				}
				a.Verified = false
				a.Problems = append(a.Problems, p)
			} else {
				layers = mf.Layers
			}
		}
		for _, l := range layers {
			a.Size += l.Size
		}
		r.Artifacts = append(r.Artifacts, a)
		if repo != release.RepoBoot {
			continue
		}
		for _, l := range layers {
			r.Artifacts = append(r.Artifacts, Artifact{Repository: repo, Ref: a.Ref, Digest: l.Digest.String(), Kind: "boot-asset",
				Platform: a.Platform, Name: l.Annotations["org.opencontainers.image.title"], Size: l.Size, SignedBy: a.SignedBy,
				Attestations: map[string]int{}, Verified: a.Verified, manifest: m.Digest})
		}
	}
	return nil
}

func identity(r *Report, o Options, rel *auditedRelease) {
	l := rel.lock
	id := Identity{Name: l.Spec.Name, Version: l.Spec.Version, Branch: l.Spec.Branch, Store: o.Store.String(),
		SpecSHA256: l.Spec.SHA256, LockDigest: rel.lockDigest, LockSHA256: rel.lockSHA, SourceDateEpoch: l.SourceDateEpoch, Base: []Repo{}}
	if p := rel.prov; p != nil {
		id.Channel = p.BuildDefinition.ExternalParameters.Channel
		id.BuilderID = p.RunDetails.Builder.ID
		id.BuilderVersion = p.RunDetails.Builder.Version["nodeforge-builder"]
		for _, d := range p.RunDetails.Builder.BuilderDependencies {
			if d.Digest["sha256"] != "" && id.BuilderSHA256 == "" {
				id.BuilderSHA256 = d.Digest["sha256"]
			}
		}
	}
	if rel.report != nil && id.BuilderVersion == "" {
		id.BuilderVersion = rel.report.Builder
	}
	for _, repo := range l.Repositories {
		rp := Repo{Name: repo.Name, URL: repo.URL, Format: repo.Format, Release: repo.Release.Algorithm + ":" + repo.Release.Value, Indexes: []string{}, Fingerprints: repo.Signers}
		if rp.Fingerprints == nil {
			rp.Fingerprints = []string{}
		}
		for _, ix := range repo.Indexes {
			rp.Indexes = append(rp.Indexes, ix.Path+" "+ix.Algorithm+":"+ix.Hash)
		}
		id.Base = append(id.Base, rp)
	}
	r.Identity = id
}

// baseName is the repository the policy or the provenance names.
func baseName(rel *auditedRelease, pol *release.Policy) string {
	if pol != nil && pol.Base != "" {
		return pol.Base
	}
	if rel.prov != nil && rel.prov.BuildDefinition.ExternalParameters.Base != "" {
		return rel.prov.BuildDefinition.ExternalParameters.Base
	}
	if len(rel.lock.Repositories) > 0 {
		return rel.lock.Repositories[0].Name
	}
	return ""
}

func packages(r *Report, rel *auditedRelease, pol *release.Policy, fail func(string, ...any)) {
	base := baseName(rel, pol)
	r.Policy.Base = BaseCheck{Base: base, OK: true, Outside: []string{}, Branch: rel.lock.Spec.Branch, Branches: []BranchCount{}, OtherBranch: []string{}}
	r.Policy.Signatures = SignatureCheck{OK: true, Unsigned: []string{}, Problems: []string{}}
	pinned := map[string]map[string]bool{}
	for _, k := range rel.lock.Keyrings {
		pinned[k.Repository] = map[string]bool{}
		for _, f := range k.Fingerprints {
			pinned[k.Repository][strings.ToUpper(f)] = true
		}
	}
	for _, repo := range rel.lock.Repositories {
		switch {
		case len(repo.Signers) > 0:
			r.Policy.Signatures.Repositories++
		case repo.Verify == "packages":
			// An rpm-md index left unsigned by the spec's trust mode: the
			// lock verified every package's signature over its payload,
			// and each package must name its signer (checked below).
		default:
			r.Policy.Signatures.OK = false
			r.Policy.Signatures.Problems = append(r.Policy.Signatures.Problems, fmt.Sprintf("repository %s (%s): release not signed", repo.Name, repo.URL))
			fail("repository %s (%s): its release file was not verified by a signature", repo.Name, repo.URL)
		}
	}
	sizes, where := packageUse(rel.report)
	seen := map[string]bool{}
	for _, arch := range slices.Sorted(maps.Keys(rel.lock.Architectures)) {
		for _, p := range rel.lock.Architectures[arch].Packages {
			if seen[p.NEVRA] {
				continue
			}
			seen[p.NEVRA] = true
			ver := p.Version + "-" + p.Release
			if p.Epoch != nil {
				ver = fmt.Sprintf("%d:%s", *p.Epoch, ver)
			}
			pk := Package{NEVRA: p.NEVRA, Name: p.Name, Version: ver, Arch: p.Arch, Disttag: p.Disttag, SourceRPM: p.SourceRPM,
				Repository: p.Repository, SHA256: p.SHA256, SignedBy: p.SignerFingerprint, License: p.License,
				Size: sizes[p.NEVRA], In: where[p.NEVRA]}
			if pk.In == nil {
				pk.In = []string{}
			}
			r.Packages = append(r.Packages, pk)
			if p.Repository != base {
				r.Policy.Base.OK = false
				r.Policy.Base.Outside = append(r.Policy.Base.Outside, p.NEVRA)
				fail("package %s comes from repository %q, not the certified base %q", p.NEVRA, p.Repository, base)
			}
			switch {
			case p.SignerFingerprint == "":
				r.Policy.Signatures.OK = false
				r.Policy.Signatures.Unsigned = append(r.Policy.Signatures.Unsigned, p.NEVRA)
				fail("package %s: no verified OpenPGP signature recorded", p.NEVRA)
			case len(pinned[p.Repository]) > 0 && !pinned[p.Repository][strings.ToUpper(p.SignerFingerprint)]:
				r.Policy.Signatures.OK = false
				msg := fmt.Sprintf("package %s: signed by %s, not a key pinned for %s", p.NEVRA, p.SignerFingerprint, p.Repository)
				r.Policy.Signatures.Problems = append(r.Policy.Signatures.Problems, msg)
				fail("%s", msg)
			default:
				r.Policy.Signatures.Packages++
			}
		}
	}
	sort.Slice(r.Packages, func(i, j int) bool { return r.Packages[i].NEVRA < r.Packages[j].NEVRA })
	count := map[string]int{}
	for _, p := range r.Packages {
		count[evr.BranchOf(p.Disttag)]++
	}
	// The release's own branch first: the others are what stands out.
	branches := slices.Sorted(maps.Keys(count))
	if i := slices.Index(branches, r.Policy.Base.Branch); i > 0 {
		branches = append([]string{r.Policy.Base.Branch}, slices.Delete(branches, i, i+1)...)
	}
	for _, b := range branches {
		r.Policy.Base.Branches = append(r.Policy.Base.Branches, BranchCount{Branch: b, Packages: count[b]})
	}
}

// packageUse sums the file sizes of each package and lists the artifacts
// holding its files.
func packageUse(rep *report.Report) (map[string]int64, map[string][]string) {
	sizes, where := map[string]int64{}, map[string][]string{}
	if rep == nil {
		return sizes, where
	}
	for _, f := range reportFiles(rep) {
		if f.Package == "" {
			continue
		}
		sizes[f.Package] += f.Size
		if !slices.Contains(where[f.Package], f.Artifact) {
			where[f.Package] = append(where[f.Package], f.Artifact)
		}
	}
	for _, w := range where {
		sort.Strings(w)
	}
	return sizes, where
}

// reportFiles lists every file the build report records, per artifact.
func reportFiles(rep *report.Report) []File {
	var out []File
	add := func(artifact string, list []report.FileEntry) {
		for _, e := range list {
			out = append(out, File{Artifact: artifact, Path: e.Path, Type: e.Type, Size: e.Size, SHA256: e.SHA256,
				Package: e.Origin.Package, RPMDigest: e.RPMDigest, Generator: e.Origin.Generator, rpmSHA256: e.Origin.RPMSHA256,
				RelocatedFrom: e.Origin.Path})
		}
	}
	for _, arch := range slices.Sorted(maps.Keys(rep.Architectures)) {
		a := rep.Architectures[arch]
		add("rootfs/"+arch, a.Rootfs)
		add("initramfs/"+arch, a.Initramfs)
		for _, name := range slices.Sorted(maps.Keys(a.Extensions)) {
			add("extension/"+name+"/"+arch, a.Extensions[name].Files)
		}
		for _, name := range slices.Sorted(maps.Keys(a.Images)) {
			add("image/"+name+"/"+arch, a.Images[name].Files)
		}
	}
	return out
}

func files(r *Report, rel *auditedRelease, fail func(string, ...any)) {
	r.Files = Files{Generators: map[string]string{}, List: []File{}}
	if rel.report == nil {
		return
	}
	r.Files.Generators = rel.report.Generators
	locked := map[string]string{} // NEVRA -> sha256
	for _, a := range rel.lock.Architectures {
		for _, p := range a.Packages {
			locked[p.NEVRA] = p.SHA256
		}
	}
	unowned := 0
	for _, f := range reportFiles(rel.report) {
		r.Files.Total++
		switch {
		case f.Package != "":
			sha, ok := locked[f.Package]
			switch {
			case !ok:
				f.Problem = "package not in the lock"
			case f.rpmSHA256 != "" && f.rpmSHA256 != sha:
				f.Problem = "laid from an RPM other than the locked one"
			case f.Type == "file" && f.RPMDigest != "" && f.SHA256 != "" && !strings.EqualFold(f.RPMDigest, f.SHA256):
				f.Problem = "content differs from the digest the package records"
			}
			if f.Problem == "" {
				r.Files.Packaged++
			}
		case f.Generator != "":
			if _, ok := rel.report.Generators[f.Generator]; !ok {
				f.Problem = "generator " + f.Generator + " is not declared"
			} else {
				r.Files.Generated++
			}
		default:
			f.Problem = "no package and no generator"
		}
		if f.Problem != "" {
			unowned++
		}
		r.Files.List = append(r.Files.List, f)
	}
	r.Files.Unowned = unowned
	if unowned > 0 {
		var names []string
		for _, f := range r.Files.List {
			if f.Problem != "" && len(names) < 10 {
				names = append(names, f.Artifact+":"+f.Path+" ("+f.Problem+")")
			}
		}
		fail("%d files are not traced to a locked package or a declared generator: %s", unowned, strings.Join(names, ", "))
	}
	// The report must describe the published boot assets.
	for _, a := range r.Artifacts {
		if a.Kind != "boot-asset" {
			continue
		}
		_, goarch, _ := strings.Cut(a.Platform, "/")
		arch := rpmArch(rel.report, goarch)
		info, ok := rel.report.Artifacts[arch+"/"+a.Name]
		if ok && "sha256:"+info.SHA256 != a.Digest {
			fail("boot asset %s %s is %s, the build report says sha256:%s", arch, a.Name, a.Digest, info.SHA256)
		}
	}
}

// rpmArch maps an OCI architecture back to the report's rpm name.
func rpmArch(rep *report.Report, goarch string) string {
	for a := range rep.Architectures {
		if specs.GoArch(a) == goarch {
			return a
		}
	}
	return goarch
}

func policy(r *Report, rel *auditedRelease, fail func(string, ...any)) {
	p := &r.Policy
	p.Scriptlets, p.Setuid, p.SetuidStripped, p.Capabilities, p.WorldWritable = []Scriptlet{}, []string{}, []string{}, []string{}, []string{}
	if rel.report == nil {
		return
	}
	for _, arch := range slices.Sorted(maps.Keys(rel.report.Architectures)) {
		a := rel.report.Architectures[arch]
		for _, s := range append(append([]report.ScriptletOutcome{}, a.Scriptlets...), a.Triggers...) {
			p.Scriptlets = append(p.Scriptlets, Scriptlet{Arch: arch, Package: s.Package, Kind: s.Kind, Handled: s.Handled, How: s.How, Pending: s.Pending})
		}
		p.Setuid = append(p.Setuid, prefixed(arch, a.Policy.Setuid)...)
		p.SetuidStripped = append(p.SetuidStripped, prefixed(arch, a.Policy.Stripped)...)
		p.Capabilities = append(p.Capabilities, prefixed(arch, a.Policy.Capabilities)...)
		p.WorldWritable = append(p.WorldWritable, prefixed(arch, a.Policy.WorldWritable)...)
		imagePolicy(p, arch, a)
	}
}

// imagePolicy adds what the container images of an architecture met:
// their scriptlets, and their setuid files, capabilities and
// world-writable paths under ARCH/image/NAME.
func imagePolicy(p *PolicyChecks, arch string, a *report.ArchReport) {
	for _, name := range slices.Sorted(maps.Keys(a.Images)) {
		im := a.Images[name]
		for _, s := range im.Scriptlets {
			p.Scriptlets = append(p.Scriptlets, Scriptlet{Arch: arch, Image: name, Package: s.Package, Kind: s.Kind, Handled: s.Handled, How: s.How, Pending: s.Pending})
		}
		where := arch + "/image/" + name
		p.Setuid = append(p.Setuid, prefixed(where, im.Policy.Setuid)...)
		p.SetuidStripped = append(p.SetuidStripped, prefixed(where, im.Policy.Stripped)...)
		p.Capabilities = append(p.Capabilities, prefixed(where, im.Policy.Capabilities)...)
		p.WorldWritable = append(p.WorldWritable, prefixed(where, im.Policy.WorldWritable)...)
	}
}

func prefixed(arch string, list []string) []string {
	out := []string{}
	for _, s := range list {
		out = append(out, arch+":"+s)
	}
	return out
}

func reproducibility(r *Report, rel *auditedRelease, o Options, fail func(string, ...any)) {
	ev := ReproducibleEvid{Evidence: "none", Different: []string{}}
	if o.Reproduced != nil && rel.report != nil {
		ev.Evidence = o.ReproducedFrom
		a, b := rel.report, o.Reproduced
		cmp := func(what, x, y string) {
			ev.Compared++
			if x != y {
				ev.Different = append(ev.Different, fmt.Sprintf("%s: %s here, %s in the second build", what, x, y))
			}
		}
		if b.LockSHA256 != a.LockSHA256 {
			ev.Different = append(ev.Different, "the second build is of another lock (sha256 "+b.LockSHA256+")")
		}
		for _, k := range slices.Sorted(maps.Keys(a.Artifacts)) {
			cmp(k, a.Artifacts[k].SHA256, b.Artifacts[k].SHA256)
		}
		cmp("OCI index", a.OCIIndex, b.OCIIndex)
		cmp("installer", a.Installer, b.Installer)
		for _, k := range slices.Sorted(maps.Keys(a.Extensions)) {
			cmp("extension "+k, a.Extensions[k], b.Extensions[k])
		}
		for _, k := range slices.Sorted(maps.Keys(a.Images)) {
			cmp("image "+k, a.Images[k], b.Images[k])
		}
		ev.OK = len(ev.Different) == 0
		ev.likeWithLike(a, b)
		if !ev.OK && ev.Comparable() {
			fail("not reproduced: %s%s", strings.Join(ev.Different, "; "), ev.toolsNote())
		}
	}
	r.Policy.Reproducibility = ev
}

// caveats records what a certifier must know beyond the verdict's checks:
// no reproducibility evidence, scriptlets the build did not handle,
// packages built for another branch than the release's and licenses
// outside the policy's list (each a caveat or a failure, as the policy
// says).
func caveats(r *Report, rel *auditedRelease, pol *release.Policy, fail func(string, ...any)) {
	caveat := func(format string, a ...any) { r.Caveats = append(r.Caveats, fmt.Sprintf(format, a...)) }
	finding := func(how string) func(string, ...any) {
		if how == release.FindingFail {
			return fail
		}
		return caveat
	}
	if ev := r.Policy.Reproducibility; ev.Evidence == "none" {
		caveat("no reproducibility evidence: no second, independent build was compared (builder repro, or audit --reproduced)")
	} else if !ev.OK && !ev.Comparable() {
		caveat("no reproducibility evidence: the second build's compressors are not the release's (%s), so a difference of its digests says nothing either way; compare a build by a builder with the release's compressors", strings.Join(ev.Compressors, "; "))
	}
	pending := 0
	for _, s := range r.Policy.Scriptlets {
		if !s.Handled {
			pending++
		}
	}
	if pending > 0 {
		caveat("%d scriptlets or triggers were not handled (never run; what they would do is not in the image): see the scriptlets section", pending)
	}
	branch := rel.lock.Spec.Branch
	foreign := finding(release.FindingCaveat)
	var allowed []string
	badLicense := finding(release.FindingFail)
	if pol != nil {
		if pol.ForeignBranch != "" {
			foreign = finding(pol.ForeignBranch)
		}
		if pol.Licenses != nil {
			allowed = pol.Licenses.Allowed
			if pol.Licenses.Otherwise != "" {
				badLicense = finding(pol.Licenses.Otherwise)
			}
		}
	}
	foreignFails := pol != nil && pol.ForeignBranch == release.FindingFail
	for _, p := range r.Packages {
		if b := evr.BranchOf(p.Disttag); b != "" && branch != "" && b != branch {
			foreign("%s was built for branch %s (disttag %s), not the release's %s", p.NEVRA, b, p.Disttag, branch)
			r.Policy.Base.OtherBranch = append(r.Policy.Base.OtherBranch, p.NEVRA)
		}
		if allowed != nil && !slices.Contains(allowed, p.License) {
			badLicense("%s is under %q, which the policy does not allow", p.NEVRA, p.License)
		}
	}
	other := len(r.Policy.Base.OtherBranch) > 0
	r.Policy.Base.Result = outcome(!r.Policy.Base.OK || (other && foreignFails), other)
}

func licenses(r *Report) {
	count := map[string]int{}
	for _, p := range r.Packages {
		l := p.License
		if l == "" {
			l = "(none declared)"
		}
		count[l]++
	}
	r.Licenses = []License{}
	for _, l := range slices.Sorted(maps.Keys(count)) {
		r.Licenses = append(r.Licenses, License{License: l, Packages: count[l]})
	}
}

// changes are the audit's view of builder diff's comparison (one code
// path): NEVRAs added and removed, versions updated with their size
// change, files counted.
func changes(ctx context.Context, cur, prev *auditedRelease, prevRef string) *Changes {
	d := Compare(ctx, &Side{Ref: prevRef, Lock: prev.lock, Report: prev.report}, &Side{Lock: cur.lock, Report: cur.report}, nil, nil)
	c := &Changes{Previous: prevRef, Added: []string{}, Removed: []string{}, Updated: []PackageUpdate{}}
	for _, p := range d.Added {
		c.Added = append(c.Added, p.NEVRA)
	}
	for _, p := range d.Removed {
		c.Removed = append(c.Removed, p.NEVRA)
	}
	for _, u := range d.Updated {
		var delta int64
		for _, n := range u.SizeDelta {
			delta += n
		}
		c.Updated = append(c.Updated, PackageUpdate{Name: u.Name, Arch: u.Arch, From: u.From, To: u.To, SizeDelta: delta})
	}
	for _, a := range d.Artifacts {
		c.FilesAdded += len(a.FilesAdded)
		c.FilesRemoved += len(a.FilesRemoved)
		c.FilesChanged += len(a.FilesChanged)
	}
	return c
}

// PreviousVersion picks the newest release in st older than version (by
// ALT's version order), for --previous without a version.
func PreviousVersion(ctx context.Context, st oci.Reader, version string) (string, error) {
	tags, err := st.Tags(ctx, release.RepoLock)
	if err != nil {
		return "", err
	}
	best := ""
	for _, t := range tags {
		if t == version || strings.HasPrefix(t, "sha256-") {
			continue
		}
		if evr.Vercmp(evr.ALT, t, version) < 0 && (best == "" || evr.Vercmp(evr.ALT, t, best) > 0) {
			best = t
		}
	}
	if best == "" {
		return "", fmt.Errorf("%s holds no release older than %s: give --previous-version", st, version)
	}
	return best, nil
}

// PredicateVSA is the SLSA verification summary predicate type.
const PredicateVSA = "https://slsa.dev/verification_summary/v1"

// VSA is the SLSA verification summary of an audit: who verified what,
// when, against which policy, with which result.
type VSA struct {
	Verifier struct {
		ID      string            `json:"id"`
		Version map[string]string `json:"version,omitempty"`
	} `json:"verifier"`
	TimeVerified       string         `json:"timeVerified"`
	ResourceURI        string         `json:"resourceUri"`
	Policy             VSAPolicy      `json:"policy"`
	InputAttestations  []VSAInput     `json:"inputAttestations,omitempty"`
	VerificationResult string         `json:"verificationResult"` // PASSED or FAILED
	VerifiedLevels     []string       `json:"verifiedLevels"`
	DependencyLevels   map[string]int `json:"dependencyLevels,omitempty"`
	SLSAVersion        string         `json:"slsaVersion"`
	Reasons            []string       `json:"reasons,omitempty"`
	Extra              map[string]any `json:"nodeforge,omitempty"`
}

// VSAPolicy names the policy the verifier applied.
type VSAPolicy struct {
	URI    string            `json:"uri"`
	Digest map[string]string `json:"digest,omitempty"`
}

// VSAInput is an attestation the verdict rests on.
type VSAInput struct {
	URI    string            `json:"uri"`
	Digest map[string]string `json:"digest"`
}

// VSAPredicate is the verification summary of r; auditJSON is the report
// it summarises (its digest names the policy outcome in full).
func (r *Report) VSAPredicate(when, builderVersion string, auditJSON []byte) ([]byte, error) {
	var v VSA
	v.Verifier.ID = "https://nodeforge.dev/builder/audit"
	v.Verifier.Version = map[string]string{"nodeforge-builder": builderVersion}
	v.TimeVerified = when
	v.ResourceURI = r.Identity.Store + "#" + r.Identity.Name + "@" + r.Identity.Version
	v.Policy = VSAPolicy{URI: "https://nodeforge.dev/audit/v1"}
	v.VerificationResult = "FAILED"
	v.VerifiedLevels = []string{}
	if r.Verdict == "pass" {
		v.VerificationResult = "PASSED"
		v.VerifiedLevels = []string{"SLSA_BUILD_LEVEL_1"}
	}
	v.SLSAVersion = "1.0"
	v.Reasons = r.Reasons
	v.Extra = map[string]any{"auditSha256": digest.SHA256Hex(auditJSON), "unownedFiles": r.Files.Unowned, "packages": len(r.Packages), "outcome": r.Outcome}
	if r.Identity.LockDigest != "" {
		v.InputAttestations = append(v.InputAttestations, VSAInput{URI: r.Identity.Store + "#lock", Digest: map[string]string{"sha256": strings.TrimPrefix(r.Identity.LockDigest, "sha256:")}})
	}
	return json.Marshal(v)
}
