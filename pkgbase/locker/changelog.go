package locker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/pkgbase/rpmfile"
)

// Changelog reads the changelog of a locked package: from the package
// cache when the package is there (entered only once its digest held),
// else fetched through it from the repository the lock names (a relative
// URL from dir, the lock's base, lock.Lock.Base; "" when unknown).
func Changelog(ctx context.Context, c *cache.Cache, p *lock.Package, dir string, src repo.SourceOptions) ([]rpmfile.Change, error) {
	if p.SHA256 == "" {
		return nil, fmt.Errorf("%s: no digest to find it by", p.NEVRA)
	}
	path := ""
	if c != nil && c.Dir != "" {
		if fi, err := os.Stat(c.Path("sha256", p.SHA256)); err == nil && fi.Mode().IsRegular() {
			path = c.Path("sha256", p.SHA256)
		}
	}
	if path == "" {
		if c == nil || p.URL == "" || p.Location == "" {
			return nil, fmt.Errorf("%s is not in the package cache", p.NEVRA)
		}
		u := p.URL
		if lock.IsRelative(u) {
			if dir == "" {
				return nil, fmt.Errorf("%s is not in the package cache, and its repository %s is relative to a spec not given", p.NEVRA, u)
			}
			u = filepath.Join(dir, u)
		}
		s, err := repo.NewSource(u, src)
		if err != nil {
			return nil, err
		}
		paths, err := c.Fetch(ctx, []cache.Want{{Name: p.NEVRA, Source: s, Location: p.Location, Size: p.Size, Algo: "sha256", Hash: p.SHA256}})
		if err != nil {
			return nil, err
		}
		path = paths[0]
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pkg, err := rpmfile.Open(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.NEVRA, err)
	}
	log, err := rpmfile.Changelog(pkg.Header)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.NEVRA, err)
	}
	if len(log) == 0 {
		return nil, errors.New("the package has no changelog")
	}
	return log, nil
}
