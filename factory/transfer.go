package factory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/nodeforge/builder/attest/signing"

	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/release"
)

// CachePrefix is where a factory's cache lives beside its release in one
// store: below a registry's prefix (PREFIX/factory-cache/artifacts) and
// inside a transfer's archive.
const CachePrefix = "factory-cache/"

// TransferOptions say what moves from one factory instance to another:
// the verified release and the cache entries of its schematics.
type TransferOptions struct {
	// Version is the release's, either spelling; the report names the
	// store's.
	Version string
	// Schematics are the IDs to carry; with Cached, every schematic with
	// a cached entry of Version is carried too.
	Schematics []string
	Cached     bool
	// FromRelease, FromCache, ToRelease and ToCache are the two
	// instances' stores.
	FromRelease, FromCache oci.Store
	ToRelease, ToCache     oci.Store
	// SourceItems, when the source is an archive, are what its sealed
	// manifest lists: the release's and, below CachePrefix, the cache's.
	SourceItems []release.Item
	// Keys verify the release at the source, before anything is copied,
	// and at the destination.
	Keys []signature.Verifier
	Log  func(format string, args ...any)
}

// TransferReport is what a transfer carried and checked.
type TransferReport struct {
	Version    string                `json:"version"`
	Schematics []string              `json:"schematics"`
	Entries    int                   `json:"entries"` // cached artifacts and installers
	Release    *release.MirrorReport `json:"release"`
	Cache      *release.MirrorReport `json:"cache"`
	Problems   []string              `json:"problems"`
	OK         bool                  `json:"ok"`
}

// Transfer carries a verified release and the cache entries of its
// schematics from one factory instance to another with the mirror's copy
// routine (by digest, resumable, parity checked), so the destination
// serves them at once: the release is verified at the source before
// anything is copied and at the destination after; the cache entries keep
// the source factory's signatures (a destination factory with another
// key rebuilds them: sign them for it with SignEntries).
func Transfer(ctx context.Context, o TransferOptions) (*TransferReport, error) {
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	o.Version = storeVersion(ctx, o.FromRelease, o.SourceItems, o.Version)
	rep := &TransferReport{Version: o.Version, Schematics: []string{}, Problems: []string{}}
	relItems, cacheItems, err := o.items(ctx, rep)
	if err != nil {
		return rep, err
	}
	logf("transferring release %s", o.Version)
	rep.Release, err = release.Mirror(ctx, release.MirrorOptions{Version: o.Version, Items: relItems, From: o.FromRelease, To: o.ToRelease, Keys: o.Keys, Log: logf})
	if rep.Release != nil {
		rep.Problems = append(rep.Problems, rep.Release.Problems...)
	}
	if err != nil {
		return rep, err
	}
	if len(cacheItems) > 0 {
		logf("transferring %d schematics and %d cached entries", len(rep.Schematics), rep.Entries)
		rep.Cache, err = release.Mirror(ctx, release.MirrorOptions{Version: o.Version, Items: cacheItems, From: o.FromCache, To: o.ToCache, Log: logf})
		if rep.Cache != nil {
			rep.Problems = append(rep.Problems, rep.Cache.Problems...)
		}
	}
	rep.OK = err == nil && len(rep.Problems) == 0
	return rep, err
}

// storeVersion is the tag the source holds version v under, either
// spelling (v1.11.0 or 1.11.0); v itself when none matches (the mirror
// then says what is missing).
func storeVersion(ctx context.Context, st oci.Store, items []release.Item, v string) string {
	var tags []string
	if items != nil {
		for _, it := range items {
			if it.Repo == release.RepoLock {
				tags = append(tags, it.Tag)
			}
		}
	} else if st != nil {
		tags, _ = st.Tags(ctx, release.RepoLock)
	}
	if t, ok := matchVersion(tags, v); ok {
		return t
	}
	return v
}

// items are what moves: the release's (nil: the mirror collects them) and
// the cache's.
func (o TransferOptions) items(ctx context.Context, rep *TransferReport) (rel, cache []release.Item, err error) {
	if o.SourceItems != nil {
		for _, it := range o.SourceItems {
			if r, ok := strings.CutPrefix(it.Repo, CachePrefix); ok {
				it.Repo = r
				cache = append(cache, it)
				continue
			}
			rel = append(rel, it)
		}
		for _, it := range cache {
			switch {
			case it.Repo == RepoSchematics && it.Tag != "":
				rep.Schematics = append(rep.Schematics, it.Tag)
			case it.Kind == release.KindRelease:
				rep.Entries++
			}
		}
		return rel, cache, nil
	}
	cache, err = collectCache(ctx, o, rep)
	return nil, cache, err
}

// collectCache lists the cache entries of the version for the schematics
// (chosen by their manifests' annotations: a key is a hash) and the
// schematics themselves.
func collectCache(ctx context.Context, o TransferOptions, rep *TransferReport) ([]release.Item, error) {
	want := map[string]bool{}
	for _, id := range o.Schematics {
		want[id] = true
	}
	var items []release.Item
	for _, repo := range []string{RepoArtifacts, RepoInstallers} {
		tags, err := o.FromCache.Tags(ctx, repo)
		if err != nil && !errors.Is(err, oci.ErrNotFound) {
			return nil, fmt.Errorf("listing %s: %w", o.FromCache.Ref(repo, ""), err)
		}
		for _, tag := range tags {
			if !isCacheKey(tag) {
				continue // signatures
			}
			e, err := readEntry(ctx, o.FromCache, repo, tag)
			if err != nil {
				return nil, err
			}
			if e.Version != o.Version || !(want[e.Schematic] || o.Cached) {
				continue
			}
			want[e.Schematic] = true
			got, err := release.CollectRepo(ctx, o.FromCache, repo, tag)
			if err != nil {
				return nil, err
			}
			items = append(items, got...)
			rep.Entries++
		}
	}
	rep.Schematics = slices.Sorted(maps.Keys(want))
	var schItems []release.Item
	for _, id := range rep.Schematics {
		got, err := release.CollectRepo(ctx, o.FromCache, RepoSchematics, id)
		if errors.Is(err, oci.ErrNotFound) {
			return nil, fmt.Errorf("schematic %s is not in %s", id, o.FromCache)
		}
		if err != nil {
			return nil, err
		}
		schItems = append(schItems, got...)
	}
	return append(schItems, items...), nil
}

// CacheItems prefixes the cache's items for an archive that holds both.
func CacheItems(items []release.Item) []release.Item {
	out := make([]release.Item, len(items))
	for i, it := range items {
		it.Repo = CachePrefix + it.Repo
		out[i] = it
	}
	return out
}

// SignEntry signs a transferred cache entry (item, at st) with another
// factory's key as that factory signs its own: an installer index with
// the claim of its cache key (the tag it is carried under) and the
// reference users pull it by, without a host (the destination's is not
// known here); anything else as a release is signed.
func SignEntry(ctx context.Context, signer *signing.Signer, st oci.Store, it release.Item) error {
	d, err := v1.NewHash(it.Digest)
	if err != nil {
		return err
	}
	o := signing.SignOptions{}
	if it.Repo == RepoInstallers && isCacheKey(it.Tag) {
		e, err := readEntry(ctx, st, it.Repo, it.Digest)
		if err != nil {
			return err
		}
		k, ok := ParseInstallerRepo(e.Artifact)
		if !ok {
			return fmt.Errorf("installer entry %s: %q names no installer repository", it.Digest, e.Artifact)
		}
		o.Identity = k.ref(e.Schematic, e.Version)
		o.Claims = map[string]string{AnnotationEntryKey: it.Tag}
	}
	_, err = signer.SignWith(ctx, st, it.Repo, d, o)
	return err
}

// isCacheKey says whether a tag is a cache key (64 hex digits), not a
// signature's or a schematic's.
func isCacheKey(tag string) bool {
	return len(tag) == 64 && strings.Trim(tag, "0123456789abcdef") == ""
}
