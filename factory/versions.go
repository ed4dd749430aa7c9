package factory

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nodeforge/builder/pkgbase/evr"
)

// Talos writes its versions with a "v" (v1.11.0) and so do upstream's
// factory and talosctl; a release's version is its spec's (1.11.0-demo).
// Every route and tag takes either spelling; what the factory lists and
// links is Talos's.

// TalosVersion is a version as Talos writes it: "v" first.
func TalosVersion(v string) string { return "v" + strings.TrimPrefix(v, "v") }

// versionKey is what both spellings of a version share: the catalog's
// key, so a store tagged 1.11.0 and another tagged v1.11.0 serve one
// release.
func versionKey(v string) string { return strings.TrimPrefix(v, "v") }

// SameVersion says whether two spellings name one version.
func SameVersion(a, b string) bool { return versionKey(a) == versionKey(b) }

// matchVersion is the tag of tags that names v: v itself, else its other
// spelling; false when none does.
func matchVersion(tags []string, v string) (string, bool) {
	if slices.Contains(tags, v) {
		return v, true
	}
	if i := slices.IndexFunc(tags, func(t string) bool { return SameVersion(t, v) }); i >= 0 {
		return tags[i], true
	}
	return "", false
}

// find is the release a client's version names (either spelling), or nil.
func (c *catalog) find(v string) *VerifiedRelease { return c.releases[versionKey(v)] }

// checkBrokenVersions refuses a broken-version entry that names nothing.
func checkBrokenVersions(vs []string) error {
	for _, v := range vs {
		if strings.TrimPrefix(v, "v") == "" || strings.ContainsAny(v, " \t\n/") {
			return fmt.Errorf("broken version %q: not a version", v)
		}
	}
	return nil
}

// broken says whether the operator marked a version broken: as upstream,
// a broken version is neither listed nor served (its entries stay, so
// unmarking it serves them again).
func (s *Service) broken(v string) bool {
	_, ok := matchVersion(s.o.BrokenVersions, v)
	return ok
}

// Available is the release a client's version names when it is served
// and not broken, or nil.
func (s *Service) Available(v string) *VerifiedRelease {
	rel := s.served().find(v)
	if rel == nil || s.broken(rel.Version) {
		return nil
	}
	return rel
}

// Listed are the releases /versions lists, oldest first.
func (s *Service) Listed() []*VerifiedRelease {
	c := s.served()
	var out []*VerifiedRelease
	for _, v := range c.versions {
		if !s.broken(v) {
			out = append(out, c.releases[v])
		}
	}
	slices.SortFunc(out, func(a, b *VerifiedRelease) int { return compareVersions(a.Version, b.Version) })
	return out
}

// Latest is the release the "Latest" tag names: the newest listed that
// is not a pre-release, as upstream picks it; nil when there is none.
func (s *Service) Latest() *VerifiedRelease { return LatestOf(s.Listed()) }

// LatestOf is latest among rels, as listed orders them.
func LatestOf(rels []*VerifiedRelease) *VerifiedRelease {
	for i := len(rels) - 1; i >= 0; i-- {
		if !prerelease(rels[i].Version) {
			return rels[i]
		}
	}
	return nil
}

// VersionTags are the tags of a schematic's installer repositories: the
// listed versions, Talos's way, and latest when there is one.
func (s *Service) VersionTags() []string {
	tags := []string{}
	listed := s.Listed()
	for _, rel := range listed {
		tags = append(tags, TalosVersion(rel.Version))
	}
	if LatestOf(listed) != nil {
		tags = append(tags, "latest")
	}
	return tags
}

// preKinds are the pre-release suffixes Talos publishes (v1.12.0-alpha.1,
// -beta.0, -rc.2); any other suffix (1.11.0-demo) names a build of the
// release, not a version before it.
var preKinds = []string{"alpha", "beta", "rc"}

// prerelease says whether v is a pre-release.
func prerelease(v string) bool {
	_, suffix, ok := strings.Cut(strings.TrimPrefix(v, "v"), "-")
	if !ok {
		return false
	}
	for _, k := range preKinds {
		if rest, ok := strings.CutPrefix(suffix, k); ok && (rest == "" || rest[0] == '.' || rest[0] >= '0' && rest[0] <= '9') {
			return true
		}
	}
	return false
}

// compareVersions orders versions as rpm does (the order gc keeps
// versions by), a pre-release before its release (1.12.0-rc.1 < 1.12.0,
// as semver); equal ones by their spelling, so the order is total.
func compareVersions(a, b string) int {
	key := func(v string) string {
		v = strings.TrimPrefix(v, "v")
		if prerelease(v) {
			v = strings.Replace(v, "-", "~", 1) // rpm's "before the release"
		}
		return v
	}
	if c := evr.Vercmp(evr.RPM, key(a), key(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}
