// Package build is the build pipeline: from a lock file to the node OS
// artifacts (kernel, initramfs, root filesystem), their OCI layout and the
// build report. It never resolves: it builds what the lock pins.
package builder

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/repo"
)

// fetchArch makes every locked package of an architecture present in the
// cache, verified against the sha256 the lock pins, and returns NEVRA ->
// cache path.
func fetchArch(ctx context.Context, o Options, a *lock.Arch) (map[string]string, error) {
	sources := map[string]repo.Source{}
	wants := make([]cache.Want, 0, len(a.Packages))
	for _, p := range a.Packages {
		u, err := packageURL(o, &p)
		if err != nil {
			return nil, err
		}
		src, ok := sources[u]
		if !ok {
			var err error
			if src, err = repo.NewSource(u, o.Source); err != nil {
				return nil, fmt.Errorf("%s: %w", p.NEVRA, err)
			}
			sources[u] = src
		}
		wants = append(wants, cache.Want{Name: p.NEVRA, Source: src, Location: p.Location, Size: p.Size, Algo: "sha256", Hash: p.SHA256})
	}
	paths, err := o.Cache.Fetch(ctx, wants)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(paths))
	for i, p := range a.Packages {
		out[p.NEVRA] = paths[i]
	}
	return out, nil
}

// packageURL is where a locked package's dist is: the lock's URL, or,
// when --repo-url moved its repository (a mirror, a base subset inside a
// closed perimeter), the same dist under the new URL. Relative URLs in the
// lock are from its base (lock.Lock.Base: the spec's directory, wherever
// the lock is); a relative override from the working directory, as
// command-line paths are.
func packageURL(o Options, p *lock.Package) (string, error) {
	s := o.Spec
	u := p.URL
	for _, r := range s.Repositories {
		if r.Name != p.Repository || r.OriginalURL == "" || r.OriginalURL == r.SpecURL {
			continue
		}
		orig := strings.TrimRight(r.OriginalURL, "/")
		if u != orig && !strings.HasPrefix(u, orig+"/") {
			break // locked with the override already
		}
		u = strings.TrimRight(r.URL, "/") + u[len(orig):]
		if lock.IsRelative(u) {
			abs, err := filepath.Abs(u)
			if err != nil {
				return "", err
			}
			return abs, nil
		}
		return u, nil
	}
	return o.Lock.Locate(u, o.LockPath, s.Path(".")), nil
}

// componentPackages returns the sorted NEVRAs of the components of the
// given kinds.
func componentPackages(s *specs.Spec, a *lock.Arch, kinds ...string) []string {
	set := map[string]bool{}
	for _, name := range s.ComponentNames() {
		c := s.Components[name]
		for _, k := range kinds {
			if c.Kind == k {
				for _, n := range a.Components[name] {
					set[n] = true
				}
			}
		}
	}
	out := slices.Sorted(maps.Keys(set))
	return out
}

// lockedByName finds the locked package of a name (the newest NEVRA when
// several are locked, as kernels may be).
func lockedByName(a *lock.Arch, name string) *lock.Package {
	var same []*lock.Package
	for i := range a.Packages {
		if a.Packages[i].Name == name {
			same = append(same, &a.Packages[i])
		}
	}
	return newest(same)
}
