package locker

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/pkgbase/repo"
)

// A lock with no directory to read its relative repositories from (a
// published release's) refuses them instead of reading the working
// directory; an override or an absolute URL needs none.
func TestLockedURLWithoutDir(t *testing.T) {
	rel := lock.Repository{Name: "base", Format: repo.FormatRPMMD, URL: "repo/x86_64"}
	abs := lock.Repository{Name: "abs", Format: repo.FormatRPMMD, URL: "/srv/repo"}
	for _, c := range []struct {
		r         lock.Repository
		urls      map[string]string
		dir, want string
	}{
		{rel, nil, "/spec", filepath.Join("/spec", "repo/x86_64")},
		{rel, map[string]string{"base": "https://mirror/repo"}, "", "https://mirror/repo"},
		{abs, nil, "", "/srv/repo"},
	} {
		if got, err := lockedURL(c.r, c.urls, c.dir); err != nil || got != c.want {
			t.Errorf("%s from %q: %q, %v; want %q", c.r.URL, c.dir, got, err, c.want)
		}
	}
	l := &lock.Lock{Repositories: []lock.Repository{rel}, Resolution: &lock.Resolution{},
		Architectures: map[string]*lock.Arch{"x86_64": {}}}
	_, err := NewLockExplainer(l, "", Options{}).Shortest(context.Background(), "x86_64", "rootfs", []string{"a-1-1.x86_64"})
	if want := "repository base is relative (repo/x86_64) to a spec not given"; err == nil || err.Error() != want {
		t.Errorf("a relative repository without a directory: %v, want %q", err, want)
	}
}
