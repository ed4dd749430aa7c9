package factory

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"

	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/oci"
)

// annImageVersion is the release's version on an installer index (the
// release's own annotation, kept by the factory's installer images).
const annImageVersion = "org.opencontainers.image.version"

// CollectOptions say what a collection of the cache store keeps.
type CollectOptions struct {
	// KeepVersions is how many served versions keep their entries: the
	// newest by source date (the release's SOURCE_DATE_EPOCH), ties by
	// version (compareVersions: rpm's, a pre-release before its release);
	// versions marked broken are not counted and keep theirs. At least
	// one.
	KeepVersions int
	// DryRun lists what would go and deletes nothing.
	DryRun bool
	// PruneGrace: after the deletions, the blobs of a layout cache that
	// nothing leads to any more and older than this are removed (a
	// writer's blobs are younger until their entry names them). A
	// registry frees blobs in its own garbage collection.
	PruneGrace time.Duration
}

// CollectedEntry is a cache entry of a version not kept.
type CollectedEntry struct {
	Repo      string `json:"repo"` // artifacts or installers
	Key       string `json:"key"`  // its tag; "" for what a collection cut short left
	Digest    string `json:"digest"`
	Version   string `json:"version"`
	Schematic string `json:"schematic"`
	Artifact  string `json:"artifact"`            // metal-x86_64.iso, installer, aws-installer
	Signature string `json:"signature,omitempty"` // its signature's tag
}

// CollectReport says what a collection kept and removed (or, dry, would
// remove).
type CollectReport struct {
	Store  string `json:"store"`
	DryRun bool   `json:"dryRun"`
	// Kept are the versions kept, newest first; Broken are marked broken
	// (Options.BrokenVersions): not served, but their entries stay,
	// so unmarking one serves them again; Unverified are listed in a
	// release store but do not verify: their entries stay (they may verify
	// again).
	Kept       []string `json:"keptVersions"`
	Broken     []string `json:"brokenVersions,omitempty"`
	Unverified []string `json:"unverifiedVersions,omitempty"`
	// Dropped are the versions of the entries removed.
	Dropped     []string         `json:"droppedVersions"`
	Entries     []CollectedEntry `json:"entries"`
	KeptEntries int              `json:"keptEntries"`
	// Unlabelled are the keys of entries that name no version (written
	// before entries were annotated): kept, since what they hold is
	// unknown.
	Unlabelled []string    `json:"unlabelled,omitempty"`
	Pruned     *oci.Pruned `json:"pruned,omitempty"`
}

// Collect removes the cache entries (artifacts and installer images, with
// their signatures) of every version but the KeepVersions newest this
// factory serves, through the store's delete API. Schematics stay: they
// are small and belong to no version. A release store that could not be
// listed stops it (what it serves is unknown); a version that is listed
// but does not verify, or is marked broken, keeps its entries. Each entry
// goes tag first, then its manifest, then its signature, so no tag ever
// names an unsigned entry, and a collection cut short is finished by the
// next one.
func (s *Service) Collect(ctx context.Context, o CollectOptions) (*CollectReport, error) {
	if o.KeepVersions < 1 {
		return nil, fmt.Errorf("keeping %d versions: at least one must stay", o.KeepVersions)
	}
	c := s.served()
	if unlisted := c.unlisted(); len(unlisted) > 0 {
		var names []string
		for _, i := range unlisted {
			names = append(names, s.o.Releases[i].Store.String())
		}
		return nil, fmt.Errorf("release stores %s could not be listed: which versions they serve is unknown, so nothing is collected", strings.Join(names, ", "))
	}
	rep := &CollectReport{Store: s.o.Cache.String(), DryRun: o.DryRun, Unverified: c.unverified(),
		Kept: []string{}, Dropped: []string{}, Entries: []CollectedEntry{}}
	rels := make([]*VerifiedRelease, 0, len(c.releases))
	for _, v := range c.versions {
		if rel := c.releases[v]; s.broken(rel.Version) {
			rep.Broken = append(rep.Broken, rel.Version)
		} else {
			rels = append(rels, rel)
		}
	}
	slices.SortFunc(rels, newestFirst)
	for _, r := range rels[:min(o.KeepVersions, len(rels))] {
		rep.Kept = append(rep.Kept, r.Version)
	}
	if err := collect(ctx, s.o.Cache, slices.Concat(rep.Kept, rep.Broken, rep.Unverified), o, rep); err != nil {
		return rep, err
	}
	return rep, nil
}

// newestFirst orders releases newest first: by source date, then as
// /versions orders versions (compareVersions, a total order).
func newestFirst(a, b *VerifiedRelease) int {
	return cmp.Or(cmp.Compare(b.SourceDate, a.SourceDate), compareVersions(b.Version, a.Version))
}

// collect removes from st the entries of every version not in keep.
func collect(ctx context.Context, st oci.Store, keep []string, o CollectOptions, rep *CollectReport) error {
	del, ok := st.(oci.Deleter)
	if !ok && !o.DryRun {
		return fmt.Errorf("the cache store %s cannot delete", st)
	}
	dropped := map[string]bool{}
	for _, repo := range []string{RepoArtifacts, RepoInstallers} {
		drop, keptDigests, err := listDropped(ctx, st, repo, keep, rep)
		if err != nil {
			return err
		}
		for _, e := range drop {
			if !o.DryRun {
				if err := removeEntry(ctx, st, del, e, keptDigests[e.Digest]); err != nil {
					return err
				}
			}
			rep.Entries = append(rep.Entries, e)
			if e.Version != "" {
				dropped[e.Version] = true
			}
		}
	}
	for v := range dropped {
		rep.Dropped = append(rep.Dropped, v)
	}
	slices.Sort(rep.Dropped)
	if lay, ok := st.(oci.Pruner); ok && !o.DryRun {
		p, err := lay.Prune(ctx, o.PruneGrace)
		if err != nil {
			return err
		}
		rep.Pruned = &p
	}
	return nil
}

// listDropped reads every entry of repo (its tags that are keys) and
// returns those of versions not kept, with the digests kept entries name.
// A signature whose entry is gone or of a version not kept (what a
// collection cut short leaves) goes too; one whose entry is untagged and
// of a kept version is a write in progress and stays.
func listDropped(ctx context.Context, st oci.Store, repo string, keep []string, rep *CollectReport) ([]CollectedEntry, map[string]bool, error) {
	tags, err := st.Tags(ctx, repo)
	if errors.Is(err, oci.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing %s: %w", st.Ref(repo, ""), err)
	}
	keys := slices.DeleteFunc(slices.Clone(tags), func(t string) bool { return !isKey(t) })
	entries, err := readEntries(ctx, st, repo, keys)
	if err != nil {
		return nil, nil, err
	}
	var drop []CollectedEntry
	keptDigests, named := map[string]bool{}, map[string]bool{}
	for _, e := range entries {
		if e == nil {
			continue // removed since listed
		}
		named[e.Digest] = true
		switch {
		case e.Version == "":
			rep.Unlabelled = append(rep.Unlabelled, e.Key)
		case slices.Contains(keep, e.Version):
			keptDigests[e.Digest] = true
			rep.KeptEntries++
		default:
			if sig := sigTagOf(e.Digest); slices.Contains(tags, sig) {
				e.Signature = sig
			}
			drop = append(drop, *e)
		}
	}
	for _, t := range tags {
		if !IsSigTag(t) {
			continue
		}
		subject := "sha256:" + strings.TrimSuffix(strings.TrimPrefix(t, "sha256-"), ".sig")
		if named[subject] {
			continue
		}
		e, err := readEntry(ctx, st, repo, subject)
		switch {
		case errors.Is(err, oci.ErrNotFound):
			drop = append(drop, CollectedEntry{Repo: repo, Digest: subject, Signature: t, Artifact: "(signature of a removed entry)"})
		case err != nil:
			return nil, nil, err
		case e.Version != "" && !slices.Contains(keep, e.Version):
			e.Signature = t
			drop = append(drop, *e)
		}
	}
	return drop, keptDigests, nil
}

// isKey says whether a tag is a cache key (64 hex digits).
func isKey(tag string) bool {
	return len(tag) == 64 && strings.Trim(tag, "0123456789abcdef") == ""
}

func sigTagOf(digest string) string {
	h, err := v1.NewHash(digest)
	if err != nil {
		return ""
	}
	return oci.SigTag(h)
}

// readEntries reads the entries of keys, a few at a time (a registry
// answers each in a round trip); one removed since listed is nil.
func readEntries(ctx context.Context, st oci.Store, repo string, keys []string) ([]*CollectedEntry, error) {
	out := make([]*CollectedEntry, len(keys))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, k := range keys {
		g.Go(func() error {
			e, err := readEntry(gctx, st, repo, k)
			if errors.Is(err, oci.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			e.Key = k
			out[i] = e
			return nil
		})
	}
	return out, g.Wait()
}

// readEntry reads what a cache entry (by key or digest) says it holds:
// an artifact's manifest annotations, or an installer index's.
func readEntry(ctx context.Context, st oci.Store, repo, ref string) (*CollectedEntry, error) {
	var m interface {
		Digest() (v1.Hash, error)
		RawManifest() ([]byte, error)
	}
	var err error
	if repo == RepoInstallers {
		m, err = st.Index(ctx, repo, ref)
	} else {
		m, err = st.Image(ctx, repo, ref)
	}
	if err != nil {
		return nil, err
	}
	raw, err := m.RawManifest()
	if err != nil {
		return nil, err
	}
	d, err := m.Digest()
	if err != nil {
		return nil, err
	}
	var mf struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(raw, &mf); err != nil {
		return nil, fmt.Errorf("%s: not a manifest: %w", st.Ref(repo, ref), err)
	}
	ann := mf.Annotations
	e := &CollectedEntry{Repo: repo, Digest: d.String(), Schematic: ann[AnnotationEntrySchematic],
		Artifact: ann[AnnotationEntryArtifact], Version: ann[AnnotationEntryVersion]}
	if repo == RepoInstallers {
		// An index carries the release's annotations: its version (as
		// its tag says it), and the platform.
		e.Artifact, e.Version = InstallerKind{Platform: ann[AnnotationPlatform], SecureBoot: ann[compose.AnnotationSecureBoot] != ""}.Repo(), ""
		if v, err := oci.ValidTag(ann[annImageVersion]); err == nil {
			e.Version = v
		}
	}
	return e, nil
}

// removeEntry deletes an entry: its tag, its manifest (unless a kept
// entry names the same one), then its signature's tag and manifest.
// What is gone already is done; a registry that deletes only by digest
// loses the tags with the manifests.
func removeEntry(ctx context.Context, st oci.Store, del oci.Deleter, e CollectedEntry, shared bool) error {
	gone := func(err error) error {
		if err == nil || errors.Is(err, oci.ErrNotFound) || errors.Is(err, oci.ErrTagDeleteUnsupported) {
			return nil
		}
		return fmt.Errorf("removing cache entry %s (%s %s of %s): %w", cmp.Or(e.Key, e.Digest), e.Artifact, e.Version, e.Schematic, err)
	}
	if e.Key != "" {
		if err := gone(del.Delete(ctx, e.Repo, e.Key)); err != nil {
			return err
		}
	}
	if !shared {
		if err := gone(del.Delete(ctx, e.Repo, e.Digest)); err != nil {
			return err
		}
	}
	if e.Signature == "" {
		return nil
	}
	sig, err := st.Head(ctx, e.Repo, e.Signature)
	if errors.Is(err, oci.ErrNotFound) {
		return nil
	}
	if err != nil {
		return gone(err)
	}
	if err := gone(del.Delete(ctx, e.Repo, e.Signature)); err != nil {
		return err
	}
	return gone(del.Delete(ctx, e.Repo, sig.Digest.String()))
}

// IsSigTag says whether ref is cosign's tag of a signature.
func IsSigTag(ref string) bool {
	hexPart, ok := strings.CutSuffix(strings.TrimPrefix(ref, "sha256-"), ".sig")
	return ok && strings.HasPrefix(ref, "sha256-") && len(hexPart) == 64 && strings.Trim(hexPart, "0123456789abcdef") == ""
}
