package factory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/release"
)

// catalog is what a factory serves: its verified releases, and the
// stores and versions that failed. It is replaced whole when a retry
// serves more, so a reader holds one consistent view without locks; a
// version once served stays.
type catalog struct {
	releases map[string]*VerifiedRelease // versionKey -> verified release
	versions []string                    // the keys, sorted
	failures []failure                   // what is not served, and why
}

// failure is a store, or one version in it, that is not served.
type failure struct {
	store   int    // index in Options.Releases
	version string // "" when the store could not be listed
	cause   error
}

// served is the factory's current catalog.
func (s *Service) served() *catalog { return s.cat.Load() }

// load lists and verifies the release stores, keeping what c serves
// already (nil: nothing yet) and trying again only what failed there.
func (s *Service) load(ctx context.Context, c *catalog) *catalog {
	next := &catalog{releases: map[string]*VerifiedRelease{}}
	retry := map[int]bool{} // stores to list again
	if c != nil {
		maps.Copy(next.releases, c.releases)
		for _, f := range c.failures {
			retry[f.store] = true
		}
	}
	for i, rs := range s.o.Releases {
		if c != nil && !retry[i] {
			continue // nothing of it failed
		}
		tags, err := rs.Store.Tags(ctx, release.RepoLock)
		if err != nil {
			next.failures = append(next.failures, failure{store: i, cause: fmt.Errorf("no releases listed: %w", err)})
			continue
		}
		for _, v := range tags {
			// Served already (by an earlier store or tag, either spelling);
			// referrer fallback tags.
			if _, dup := next.releases[versionKey(v)]; dup || strings.HasPrefix(v, "sha256-") {
				continue
			}
			rel, err := open(ctx, rs.Store, v, rs.Keys)
			if err != nil {
				next.failures = append(next.failures, failure{store: i, version: v, cause: err})
				s.o.Log.Warn("release not served", "version", v, "store", rs.Store.String(), "err", err)
				continue
			}
			next.releases[versionKey(v)] = rel
			go rel.prefetch(context.WithoutCancel(ctx))
		}
	}
	next.versions = slices.Sorted(maps.Keys(next.releases))
	return next
}

// talosVersions are the versions served as /versions names them.
func (c *catalog) talosVersions() []string {
	out := make([]string, len(c.versions))
	for i, v := range c.versions {
		out[i] = TalosVersion(v)
	}
	return out
}

// unverified are the versions listed but not served (gc keeps their
// entries).
func (c *catalog) unverified() []string {
	var out []string
	for _, f := range c.failures {
		if f.version != "" {
			out = append(out, f.version)
		}
	}
	return out
}

// unlisted are the stores (their indexes) whose versions could not be
// listed.
func (c *catalog) unlisted() []int {
	var out []int
	for _, f := range c.failures {
		if f.version == "" {
			out = append(out, f.store)
		}
	}
	return out
}

// errNothingServed: no release of any store verifies.
var errNothingServed = errors.New("factory: no release to serve")

// startError is NewServer's refusal when nothing verifies: the first
// cause on the first line.
func (s *Service) startError(c *catalog) error {
	if len(c.failures) == 0 {
		return fmt.Errorf("%w: the release stores hold no release (no tag in their %s repository)", errNothingServed, release.RepoLock)
	}
	var lines []string
	for _, f := range c.failures {
		lines = append(lines, f.cause.Error())
	}
	return fmt.Errorf("%w: %s", errNothingServed, strings.Join(lines, "\n"))
}

// RetryFailed lists and verifies again, every interval (doubling up to an
// hour), the stores and versions that failed, until none fails or ctx
// ends; what verifies is served from then on.
func (s *Service) RetryFailed(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Minute
	}
	for len(s.served().failures) > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
		before := s.served()
		next := s.load(ctx, before)
		if ctx.Err() != nil {
			return
		}
		s.cat.Store(next)
		if added := len(next.versions) - len(before.versions); added > 0 {
			s.o.Log.Info("releases now served", "versions", strings.Join(next.talosVersions(), ", "), "added", added)
		}
		interval = min(2*interval, time.Hour)
	}
}

// Readiness is /readyz's body: the versions served, then one short line
// per failure (its store as the operator named it, without credentials or
// local directories, and the first line of its cause).
//
// A tool a request can need that is not on PATH (compose.Tools) makes the
// factory not ready, a line naming it and what needs it: a replica that
// would fail every ISO is taken out of the balancer rather than answering
// 500; a tool that is there is named too ("on PATH": no local directory
// is shown). PATH is looked at on every call, so installing the tool is
// enough.
func (s *Service) Readiness() (ready bool, body string) {
	c := s.served()
	missing := compose.MissingTools()
	var b strings.Builder
	switch {
	case len(c.versions) == 0:
		b.WriteString("not ready: no release served\n")
	case len(missing) > 0:
		fmt.Fprintf(&b, "not ready: a tool is missing (serving %s)\n", strings.Join(c.talosVersions(), ", "))
	default:
		fmt.Fprintf(&b, "ready: %s\n", strings.Join(c.talosVersions(), ", "))
	}
	for _, t := range compose.Tools {
		if _, err := exec.LookPath(t.Name); err == nil {
			fmt.Fprintf(&b, "tool %s: on PATH\n", t.Name)
		}
	}
	for _, t := range missing {
		fmt.Fprintf(&b, "tool %s: not on PATH\n", t)
	}
	for _, f := range c.failures {
		name := s.storeName(f.store)
		cause, _, _ := strings.Cut(f.cause.Error(), "\n")
		cause = strings.ReplaceAll(cause, s.o.Releases[f.store].Store.String(), name)
		if f.version == "" {
			fmt.Fprintf(&b, "store %s: %s\n", name, cause)
			continue
		}
		fmt.Fprintf(&b, "store %s, version %s: %s\n", name, TalosVersion(f.version), strings.TrimPrefix(cause, "release "+f.version+" in "+name+" "))
	}
	return len(c.versions) > 0 && len(missing) == 0, b.String()
}

// storeName is how a release store is named to clients: as the operator
// gave it, without credentials, a local directory by its last element.
func (s *Service) storeName(i int) string {
	rs := s.o.Releases[i]
	return PublicStoreName(cmp.Or(rs.Name, rs.Store.String()))
}

// PublicStoreName is a store location without what a client should not
// see: user and password in a URL, and the directories of a local path
// (oci:/srv/nodeforge/release/dev -> oci:dev).
func PublicStoreName(loc string) string {
	for _, kind := range []string{"oci:", "oci-archive:"} {
		if p, ok := strings.CutPrefix(loc, kind); ok {
			p, frag, _ := strings.Cut(p, "#")
			out := kind + path.Base(path.Clean(strings.TrimRight(p, "/")))
			if frag != "" {
				out += "#" + frag
			}
			return out
		}
	}
	scheme, rest, ok := strings.Cut(loc, "://")
	if !ok {
		scheme, rest = "", loc
	}
	if host, _, _ := strings.Cut(rest, "/"); strings.Contains(host, "@") {
		rest = rest[strings.LastIndex(host, "@")+1:]
		if scheme != "" {
			return scheme + "://" + rest
		}
		return rest
	}
	if strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, ".") {
		return path.Base(loc)
	}
	return loc
}
