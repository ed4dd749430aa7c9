package release

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/nodeforge/builder/internal/progress"
	"github.com/nodeforge/builder/oci"
)

// Kinds of the manifests a mirror carries.
const (
	KindRelease     = "release"     // a tagged repository of the release
	KindChild       = "child"       // a per-architecture manifest of an index
	KindSignature   = "signature"   // cosign's sha256-<hex>.sig image
	KindAttestation = "attestation" // cosign's sha256-<hex>.att image
	KindReferrer    = "referrer"    // an OCI referrer (subject = the manifest)
	KindBase        = "base"        // the package base subset artifact
)

// Item is one manifest of what a mirror carries, in the order it is
// copied: a subject before what refers to it.
type Item struct {
	Repo string `json:"repository"`
	// Tag is empty for manifests addressed only by digest (children,
	// referrers).
	Tag  string `json:"tag,omitempty"`
	Kind string `json:"kind"`
	// Subject is the manifest a signature, attestation, referrer or child
	// belongs to.
	Subject   string `json:"subject,omitempty"`
	Digest    string `json:"digest"`
	MediaType string `json:"mediaType"`
	Size      int64  `json:"size"`
	// ArtifactType and Annotations of a referrer, as its subject's
	// referrers list holds them.
	ArtifactType string            `json:"artifactType,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
}

// ref is the tag or, without one, the digest.
func (it Item) ref() string {
	if it.Tag != "" {
		return it.Tag
	}
	return it.Digest
}

// Collect lists every manifest of the release tagged tag in st: each
// repository named by the lock artifact, the base subset when st has one,
// their children, and for each of these manifests its cosign signatures
// and attestations and its OCI referrers.
func Collect(ctx context.Context, st oci.Store, tag string) ([]Item, error) {
	repos, err := Repositories(ctx, st, tag)
	if err != nil {
		return nil, err
	}
	lists := make([][]Item, len(repos))
	errs := make([]error, len(repos))
	parallel(len(repos), func(i int) { lists[i], errs[i] = CollectRepo(ctx, st, repos[i], tag) })
	var items []Item
	for i := range repos {
		if errs[i] != nil {
			return nil, fmt.Errorf("release %s: %w", tag, errs[i])
		}
		items = append(items, lists[i]...)
	}
	if !slices.Contains(repos, RepoBase) {
		got, err := CollectRepo(ctx, st, RepoBase, tag)
		switch {
		case err == nil:
			items = append(items, got...)
		case !errors.Is(err, oci.ErrNotFound):
			return nil, err
		}
	}
	return items, nil
}

// CollectRepo lists repo:tag in st, its children, and their signatures,
// attestations and referrers.
func CollectRepo(ctx context.Context, st oci.Store, repo, tag string) ([]Item, error) {
	top, children, err := oci.Manifests(ctx, st, repo, tag)
	if err != nil {
		return nil, err
	}
	kind := KindRelease
	if repo == RepoBase {
		kind = KindBase
	}
	items := []Item{{Repo: repo, Tag: tag, Kind: kind, Digest: top.Digest.String(), MediaType: string(top.MediaType), Size: top.Size}}
	for _, c := range children {
		items = append(items, Item{Repo: repo, Kind: KindChild, Subject: top.Digest.String(), Digest: c.Digest.String(), MediaType: string(c.MediaType), Size: c.Size})
	}
	subjects := append([]v1.Descriptor{top}, children...)
	for _, s := range subjects {
		for _, t := range []struct{ tag, kind string }{{oci.SigTag(s.Digest), KindSignature}, {oci.AttTag(s.Digest), KindAttestation}} {
			d, err := st.Head(ctx, repo, t.tag)
			if errors.Is(err, oci.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			items = append(items, Item{Repo: repo, Tag: t.tag, Kind: t.kind, Subject: s.Digest.String(), Digest: d.Digest.String(), MediaType: string(d.MediaType), Size: d.Size})
		}
		refs, err := st.Referrers(ctx, repo, s.Digest)
		if err != nil {
			return nil, err
		}
		slices.SortFunc(refs, func(a, b v1.Descriptor) int { return strings.Compare(a.Digest.String(), b.Digest.String()) })
		for _, r := range refs {
			items = append(items, Item{Repo: repo, Kind: KindReferrer, Subject: s.Digest.String(), Digest: r.Digest.String(), MediaType: string(r.MediaType), Size: r.Size,
				ArtifactType: r.ArtifactType, Annotations: r.Annotations})
		}
	}
	return items, nil
}

// CopyStats says what a copy did.
type CopyStats struct {
	// Copied counts the manifests written (children included); Present
	// those the destination had already.
	Copied  int `json:"copied"`
	Present int `json:"present"`
	// Uploaded is what the destination store was sent.
	Uploaded oci.Stats `json:"uploaded"`
}

// copyJobs is how many groups of manifests are copied (and how many
// repositories listed or checked) at once. A group
// is a tagged repository (an index is written with its children), or the
// signatures, attestations and referrers of one subject, which go one at
// a time: on a registry without the referrers API each referrer rewrites
// its subject's fallback tag.
const copyJobs = 8

// Copy writes every item from src to dst by digest (so signatures stay
// valid whatever the repository prefixes are), tags last. What dst has
// already is not sent again, so an interrupted copy, run again, resumes.
func Copy(ctx context.Context, src, dst oci.Store, items []Item, log func(string, ...any), prog progress.Func) (CopyStats, error) {
	// The workers log one at a time: callers' loggers need not be safe
	// for concurrent use.
	var logMu sync.Mutex
	logf := func(format string, a ...any) {
		if log != nil {
			logMu.Lock()
			defer logMu.Unlock()
			log(format, a...)
		}
	}
	before := dst.Stats()
	var order []string
	groups := map[string][]Item{}
	for _, it := range items {
		key := it.Repo + "@" + it.Subject
		if it.Kind == KindChild {
			continue // written with its index
		}
		if it.Kind == KindRelease || it.Kind == KindBase {
			key = it.Repo + ":" + it.Tag
		}
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], it)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(order))
	var copied atomic.Int64
	var progMu sync.Mutex
	report := func(finished bool) {
		progMu.Lock()
		defer progMu.Unlock()
		prog.Send(progress.Update{Stage: "copying", Unit: "groups", Done: copied.Load(), Total: int64(len(order)),
			Bytes: dst.Stats().BlobBytes - before.BlobBytes, Finished: finished})
	}
	parallel(len(order), func(i int) {
		if errs[i] = copyGroup(ctx, src, dst, groups[order[i]], logf); errs[i] != nil {
			cancel()
		}
		copied.Add(1)
		report(false)
	})
	report(true)
	// The error that stopped the copy, not the cancellations it caused.
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled)) {
			first = err
		}
	}
	var cs CopyStats
	after := dst.Stats()
	cs.Uploaded = oci.Stats{BlobBytes: after.BlobBytes - before.BlobBytes, Blobs: after.Blobs - before.Blobs, Manifests: after.Manifests - before.Manifests}
	cs.Copied = cs.Uploaded.Manifests
	cs.Present = max(0, len(items)-cs.Copied)
	return cs, first
}

// copyGroup copies the items of one group in order. The stores skip what
// the destination has already (a registry store checks each manifest and
// blob before it sends it), so a run after an interruption resumes. Referrers
// a cut run pushed but did not list are listed at the end.
func copyGroup(ctx context.Context, src, dst oci.Store, items []Item, logf func(string, ...any)) error {
	var referrers []Item
	for _, it := range items {
		if err := ctx.Err(); err != nil {
			return err
		}
		if it.Kind == KindRelease || it.Kind == KindBase {
			logf("copying %s", dst.Ref(it.Repo, it.ref()))
		}
		wctx := ctx
		if it.Kind == KindReferrer {
			referrers = append(referrers, it)
			wctx = oci.WithDeferredFallback(ctx)
		}
		err := oci.Retry(ctx, func() error {
			ctx := wctx
			if types.MediaType(it.MediaType).IsIndex() {
				idx, err := src.Index(ctx, it.Repo, it.Digest)
				if err != nil {
					return err
				}
				return dst.WriteIndex(ctx, it.Repo, it.Tag, idx)
			}
			img, err := src.Image(ctx, it.Repo, it.Digest)
			if err != nil {
				return err
			}
			return dst.WriteImage(ctx, it.Repo, it.Tag, img)
		})
		if err != nil {
			return fmt.Errorf("copying %s to %s: %w", src.Ref(it.Repo, it.Digest), dst.Ref(it.Repo, it.ref()), err)
		}
	}
	if len(referrers) > 0 {
		return listReferrers(ctx, dst, referrers)
	}
	return nil
}

// listReferrers makes sure dst lists referrers, the referrer items of one
// subject (see oci.EnsureReferrers).
func listReferrers(ctx context.Context, dst oci.Store, items []Item) error {
	subject, err := v1.NewHash(items[0].Subject)
	if err != nil {
		return err
	}
	refs := make([]v1.Descriptor, len(items))
	for i, it := range items {
		refs[i] = v1.Descriptor{MediaType: types.MediaType(it.MediaType), Size: it.Size, ArtifactType: it.ArtifactType, Annotations: it.Annotations}
		if refs[i].Digest, err = v1.NewHash(it.Digest); err != nil {
			return err
		}
	}
	return oci.EnsureReferrers(ctx, dst, items[0].Repo, subject, refs)
}

// Parity is one line of a parity report: an item with its digest at the
// source and at the destination.
type Parity struct {
	Item
	SourceDigest      string `json:"sourceDigest"`
	DestinationDigest string `json:"destinationDigest"`
	// Status is "ok", "missing" or "different".
	Status string `json:"status"`
}

// CheckParity looks for every item at dst: the tag (or the digest) must
// lead to the same digest, and every referrer must be listed by dst's
// referrers API or its fallback tag. It returns a line per item and the
// problems found.
func CheckParity(ctx context.Context, dst oci.Store, items []Item) ([]Parity, []string) {
	out := make([]Parity, len(items))
	found := make([][]string, len(items))
	var repos []string
	byRepo := map[string][]int{}
	for i, it := range items {
		if _, ok := byRepo[it.Repo]; !ok {
			repos = append(repos, it.Repo)
		}
		byRepo[it.Repo] = append(byRepo[it.Repo], i)
	}
	parallel(len(repos), func(r int) {
		referrers := map[string][]v1.Descriptor{}
		for _, i := range byRepo[repos[r]] {
			out[i], found[i] = parityOf(ctx, dst, items[i], referrers)
		}
	})
	var problems []string
	for _, f := range found {
		problems = append(problems, f...)
	}
	return out, problems
}

// parityOf checks one item; referrers caches the referrers lists of the
// item's repository by subject.
func parityOf(ctx context.Context, dst oci.Store, it Item, referrers map[string][]v1.Descriptor) (Parity, []string) {
	var problems []string
	p := Parity{Item: it, SourceDigest: it.Digest}
	d, err := dst.Head(ctx, it.Repo, it.ref())
	switch {
	case err != nil:
		p.Status = "missing"
		problems = append(problems, fmt.Sprintf("%s %s: missing at the destination: %v", it.Kind, dst.Ref(it.Repo, it.ref()), err))
	case d.Digest.String() != it.Digest:
		p.DestinationDigest = d.Digest.String()
		p.Status = "different"
		problems = append(problems, fmt.Sprintf("%s %s: digest %s at the destination, %s at the source", it.Kind, dst.Ref(it.Repo, it.ref()), d.Digest, it.Digest))
	default:
		p.DestinationDigest = d.Digest.String()
		p.Status = "ok"
	}
	if it.Kind == KindReferrer && p.Status == "ok" {
		list, ok := referrers[it.Subject]
		if !ok {
			h, err := v1.NewHash(it.Subject)
			if err == nil {
				list, err = dst.Referrers(ctx, it.Repo, h)
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("referrers of %s: %v", dst.Ref(it.Repo, it.Subject), err))
			}
			referrers[it.Subject] = list
		}
		if !slices.ContainsFunc(list, func(d v1.Descriptor) bool { return d.Digest.String() == it.Digest }) {
			p.Status = "missing"
			problems = append(problems, fmt.Sprintf("referrer %s of %s: not listed by the destination's referrers (API or fallback tag)", it.Digest, dst.Ref(it.Repo, it.Subject)))
		}
	}
	return p, problems
}

// parallel runs f(0) ... f(n-1) on copyJobs goroutines and waits.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	work := make(chan int)
	for range min(copyJobs, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				f(i)
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}

// VerifyRelease verifies every release repository among items at st with
// keys (signatures, attestations, single-base policy) and returns the
// verifications and every problem. With readBlobs, every layer and config
// is read and checked too (Verify); without, only what the signatures
// vouch through (a source whose bytes are checked as they are copied).
func VerifyRelease(ctx context.Context, st oci.Store, items []Item, keys []signature.Verifier, pol *Policy, readBlobs bool) ([]*Verification, []string) {
	var release []Item
	for _, it := range items {
		if it.Kind == KindRelease {
			release = append(release, it)
		}
	}
	vs := make([]*Verification, len(release))
	errs := make([]error, len(release))
	parallel(len(release), func(i int) { vs[i], errs[i] = verify(ctx, st, release[i].Repo, release[i].Tag, keys, pol, readBlobs) })
	var out []*Verification
	var problems []string
	for i, it := range release {
		if errs[i] != nil {
			problems = append(problems, fmt.Sprintf("verifying %s: %v", st.Ref(it.Repo, it.Tag), errs[i]))
			continue
		}
		out = append(out, vs[i])
		problems = append(problems, vs[i].Problems...)
	}
	return out, problems
}

// MirrorOptions are the inputs of a mirror from one store to another.
type MirrorOptions struct {
	// Version names the release; Images, when set, name repo:tag pairs to
	// carry instead of a release.
	Version string
	Images  []string
	// Items, when set, are what to carry (an archive's manifest lists them).
	Items []Item
	From  oci.Store
	To    oci.Store
	// Keys verify the signatures and attestations at the destination; none
	// means parity only.
	Keys   []signature.Verifier
	Policy *Policy
	// Base, when set, is the package base subset artifact, written to the
	// destination under RepoBase before the copy and carried from then on.
	Base v1.Image
	Log  func(format string, args ...any)
	// Progress hears how far the copy is.
	Progress progress.Func
}

// MirrorReport is the parity report of a mirror.
type MirrorReport struct {
	Version     string `json:"version,omitempty"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	// Items are every manifest carried, with both digests.
	Items []Parity `json:"items"`
	// Verified lists each release repository verified at the destination;
	// SignaturesChecked is false when no key was given.
	SignaturesChecked bool            `json:"signaturesChecked"`
	Verified          []*Verification `json:"verified,omitempty"`
	Copy              CopyStats       `json:"copy"`
	Archive           *ArchiveInfo    `json:"archive,omitempty"`
	// Problems lists every miss; OK is true when there is none.
	Problems []string `json:"problems"`
	OK       bool     `json:"ok"`
}

// ItemList is the items the mirror copied, in the report's order: what an
// archive's seal lists.
func (r *MirrorReport) ItemList() []Item {
	out := make([]Item, len(r.Items))
	for i, p := range r.Items {
		out[i] = p.Item
	}
	return out
}

// Counts sums the items by kind.
func (r *MirrorReport) Counts() map[string]int {
	out := map[string]int{}
	for _, p := range r.Items {
		out[p.Kind]++
	}
	return out
}

// ErrSourceRefused is returned (wrapped) when the source of a mirror does
// not verify; nothing is copied then.
var ErrSourceRefused = errors.New("mirror refused")

// ErrMirrorIncomplete is returned (wrapped) when the destination does not
// match the source after a mirror.
var ErrMirrorIncomplete = errors.New("mirror incomplete")

// Mirror copies a release (or the given images) from o.From to o.To by
// digest, then checks at the destination that every manifest is there
// with the source's digest, that every referrer is listed, and, with
// keys, that every signature and attestation verifies. The report lists
// every item; any miss is an ErrMirrorIncomplete error.
func Mirror(ctx context.Context, o MirrorOptions) (*MirrorReport, error) {
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	rep := &MirrorReport{Version: o.Version, Source: o.From.String(), Destination: o.To.String(), Items: []Parity{}, Problems: []string{}}
	logf("listing %s", o.From)
	items := o.Items
	if items == nil {
		var err error
		if items, err = mirrorItems(ctx, o); err != nil {
			return rep, err
		}
	}
	var baseItem *Item
	if o.Base != nil {
		tag, err := oci.ValidTag(o.Version)
		if err != nil {
			return rep, err
		}
		d, err := o.Base.Digest()
		if err != nil {
			return rep, err
		}
		m, _ := o.Base.MediaType()
		sz, _ := o.Base.Size()
		baseItem = &Item{Repo: RepoBase, Tag: tag, Kind: KindBase, Digest: d.String(), MediaType: string(m), Size: sz}
		items = slices.DeleteFunc(items, func(it Item) bool { return it.Repo == RepoBase })
	}
	if len(o.Keys) > 0 {
		// The source is verified before anything is sent: a release that
		// fails its own signatures must not reach a perimeter at all.
		logf("verifying signatures and attestations at %s", o.From)
		if _, probs := VerifyRelease(ctx, o.From, items, o.Keys, o.Policy, false); len(probs) > 0 {
			rep.Problems = probs
			return rep, fmt.Errorf("%w: the source %s does not verify (%d problems), nothing was copied:\n  %s", ErrSourceRefused, o.From, len(probs), strings.Join(probs, "\n  "))
		}
	}
	var err error
	rep.Copy, err = Copy(ctx, o.From, o.To, items, logf, o.Progress)
	if err != nil {
		if oci.RerunHelps(err) {
			return rep, fmt.Errorf("%w (run it again to resume)", err)
		}
		return rep, err
	}
	if baseItem != nil {
		// Written directly: it comes from the package base, not the source.
		logf("writing the package base subset to %s", o.To.Ref(RepoBase, baseItem.Tag))
		before := o.To.Stats()
		if err := oci.Retry(ctx, func() error { return o.To.WriteImage(ctx, RepoBase, baseItem.Tag, o.Base) }); err != nil {
			return rep, fmt.Errorf("writing the package base subset: %w", err)
		}
		after := o.To.Stats()
		rep.Copy.Uploaded.Blobs += after.Blobs - before.Blobs
		rep.Copy.Uploaded.BlobBytes += after.BlobBytes - before.BlobBytes
		rep.Copy.Copied += after.Manifests - before.Manifests
		items = append(items, *baseItem)
	}
	logf("checking %d manifests at %s", len(items), o.To)
	rep.Items, rep.Problems = CheckParity(ctx, o.To, items)
	if rep.Problems == nil {
		rep.Problems = []string{} // a list, never null
	}
	if len(o.Keys) > 0 {
		logf("verifying signatures and attestations at %s", o.To)
		rep.SignaturesChecked = true
		var probs []string
		rep.Verified, probs = VerifyRelease(ctx, o.To, items, o.Keys, o.Policy, true)
		rep.Problems = append(rep.Problems, probs...)
	}
	rep.OK = len(rep.Problems) == 0
	if !rep.OK {
		return rep, fmt.Errorf("%w: %d problems at %s", ErrMirrorIncomplete, len(rep.Problems), o.To)
	}
	return rep, nil
}

// mirrorItems lists the release or the named images at the source.
func mirrorItems(ctx context.Context, o MirrorOptions) ([]Item, error) {
	if len(o.Images) == 0 {
		tag, err := oci.ValidTag(o.Version)
		if err != nil {
			return nil, err
		}
		return Collect(ctx, o.From, tag)
	}
	var items []Item
	for _, ref := range o.Images {
		repo, tag, ok := strings.Cut(ref, ":")
		if !ok || repo == "" || tag == "" {
			return nil, fmt.Errorf("image %q: want REPOSITORY:TAG relative to the source prefix", ref)
		}
		got, err := CollectRepo(ctx, o.From, repo, tag)
		if err != nil {
			return nil, err
		}
		items = append(items, got...)
	}
	return items, nil
}
