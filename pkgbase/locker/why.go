package locker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/pkgbase/resolve"
)

// WhyOptions narrow an explanation.
type WhyOptions struct {
	Options
	Arch      string // "": every architecture
	Component string // "": every component that holds the package
	// Image, when set, explains the package in that container image of
	// the spec (and in no component).
	Image string
}

// Answer explains a package of one component of one architecture.
type Answer struct {
	Arch      string `json:"arch"`
	Component string `json:"component,omitempty"`
	Image     string `json:"image,omitempty"` // a container image's answer (no component)
	resolve.Explanation
}

// NotLockedError says the package is in no component asked about.
type NotLockedError struct {
	Name, Where string
}

func (e *NotLockedError) Error() string {
	return fmt.Sprintf("%s is not in %s", e.Name, e.Where)
}

// WhySpec explains why target is in the packages the spec resolves to:
// the repositories are read and the spec resolved as builder lock does
// (nothing is downloaded), then the requirement graph is walked.
func WhySpec(ctx context.Context, s *specs.Spec, target string, o WhyOptions) ([]Answer, error) {
	logf := logger(o.Options)
	keyrings, err := loadKeyrings(s)
	if err != nil {
		return nil, err
	}
	var out []Answer
	for _, arch := range s.Architectures {
		if o.Arch != "" && arch != o.Arch {
			continue
		}
		all, loaded, err := loadArch(ctx, s, arch, keyrings, indexCacheDir(o.Options), o.Source, logf)
		if err != nil {
			return nil, err
		}
		pl, err := planArch(s, arch, all, loaded, logf)
		if err != nil {
			return nil, err
		}
		if o.Image != "" {
			ans, err := whyImage(all, pl, s, arch, target, o.Image)
			if err != nil {
				return nil, err
			}
			out = append(out, ans...)
			continue
		}
		for _, c := range s.ComponentNames() {
			if o.Component != "" && c != o.Component {
				continue
			}
			set := map[*repo.Package]bool{}
			for _, p := range pl.components[c].Packages {
				set[p] = true
			}
			ans, err := explain(all, s.Components[c].Packages, func(p *repo.Package) bool { return set[p] }, target, pl.opts)
			if err != nil {
				return nil, fmt.Errorf("%s component %s: %w", arch, c, err)
			}
			for _, e := range ans {
				out = append(out, Answer{Arch: arch, Component: c, Explanation: e})
			}
		}
	}
	return found(out, target, o, s.Architectures)
}

// whyImage explains target in the container image of the spec's plan for
// arch (none when the image is not built for arch).
func whyImage(all []*repo.Package, pl *plan, s *specs.Spec, arch, target, image string) ([]Answer, error) {
	im, ok := s.Images[image]
	if !ok {
		return nil, fmt.Errorf("the spec has no container image %s", image)
	}
	res := pl.images[image]
	if res == nil {
		return nil, nil
	}
	set := map[*repo.Package]bool{}
	for _, p := range res.Packages {
		set[p] = true
	}
	ans, err := explain(all, im.Packages, func(p *repo.Package) bool { return set[p] }, target, pl.opts)
	if err != nil {
		return nil, fmt.Errorf("%s image %s: %w", arch, image, err)
	}
	var out []Answer
	for _, e := range ans {
		out = append(out, Answer{Arch: arch, Image: image, Explanation: e})
	}
	return out, nil
}

// WhyLock explains from a lock alone: the repositories it records are read
// again (relative URLs from the lock's base, lock.Lock.Base, or as urls
// overrides them by repository name) and must be the very indexes it
// pinned; the sets are its components and the requests those it recorded.
func WhyLock(ctx context.Context, l *lock.Lock, lockPath string, urls map[string]string, target string, o WhyOptions) ([]Answer, error) {
	if l.Resolution == nil {
		return nil, errNoResolution
	}
	logf := logger(o.Options)
	archs := slices.Sorted(maps.Keys(l.Architectures))
	var out []Answer
	for _, arch := range archs {
		if o.Arch != "" && arch != o.Arch {
			continue
		}
		all, ropts, err := loadLocked(ctx, l, l.Base(lockPath, ""), urls, arch, o.Options, logf)
		if err != nil {
			return nil, err
		}
		a := l.Architectures[arch]
		if o.Image != "" {
			if _, ok := a.Images[o.Image]; !ok {
				continue
			}
			ans, err := explain(all, l.Resolution.Images[o.Image], inSet(a, a.Images[o.Image]), target, ropts)
			if err != nil {
				return nil, fmt.Errorf("%s image %s: %w", arch, o.Image, err)
			}
			for _, e := range ans {
				out = append(out, Answer{Arch: arch, Image: o.Image, Explanation: e})
			}
			continue
		}
		for _, c := range slices.Sorted(maps.Keys(a.Components)) {
			if o.Component != "" && c != o.Component {
				continue
			}
			ans, err := explain(all, l.Resolution.Requests[c], inComponent(a, c), target, ropts)
			if err != nil {
				return nil, fmt.Errorf("%s component %s: %w", arch, c, err)
			}
			for _, e := range ans {
				out = append(out, Answer{Arch: arch, Component: c, Explanation: e})
			}
		}
	}
	return found(out, target, o, archs)
}

var errNoResolution = errors.New("this lock records no resolution (made by an older builder): explain from the spec (--spec), or lock again")

// inComponent says which packages of the base are in component c of a
// lock: its NEVRAs, each of the locked build (its disttag).
func inComponent(a *lock.Arch, c string) func(*repo.Package) bool { return inSet(a, a.Components[c]) }

// inSet says which packages of the base are the NEVRAs of a lock's list
// (a component's, an image's), each of the locked build (its disttag).
func inSet(a *lock.Arch, nevras []string) func(*repo.Package) bool {
	disttag := map[string]string{}
	for _, p := range a.Packages {
		disttag[p.NEVRA] = p.Disttag
	}
	set := map[string]bool{}
	for _, n := range nevras {
		set[n] = true
	}
	return func(p *repo.Package) bool { n := p.NEVRA(); return set[n] && disttag[n] == p.EVR.Disttag }
}

// LockExplainer answers why from a lock alone, as WhyLock does, for many
// packages: each architecture's repositories are read once.
type LockExplainer struct {
	lock   *lock.Lock
	dir    string
	o      Options
	arches map[string]*lockedArch
}

// lockedArch is an architecture's base as the lock pinned it (or why it
// could not be read).
type lockedArch struct {
	all  []*repo.Package
	opts resolve.Options
	err  error
}

// NewLockExplainer explains from l: relative repository URLs are read from
// dir (the lock's base, lock.Lock.Base; "" refuses them).
func NewLockExplainer(l *lock.Lock, dir string, o Options) *LockExplainer {
	return &LockExplainer{lock: l, dir: dir, o: o, arches: map[string]*lockedArch{}}
}

// Shortest gives, for each package of the NEVRAs that component of arch
// holds, the shortest chain from one of the component's recorded requests
// to it (the first of the shortest, requests sorted: resolve.ShortestEach).
func (x *LockExplainer) Shortest(ctx context.Context, arch, component string, nevras []string) (map[string]resolve.Path, error) {
	if x.lock.Resolution == nil {
		return nil, errNoResolution
	}
	a := x.lock.Architectures[arch]
	if a == nil {
		return nil, fmt.Errorf("the lock has no architecture %s", arch)
	}
	la := x.arches[arch]
	if la == nil {
		la = &lockedArch{}
		la.all, la.opts, la.err = loadLocked(ctx, x.lock, x.dir, nil, arch, x.o, logger(x.o))
		x.arches[arch] = la
	}
	if la.err != nil {
		return nil, la.err
	}
	out, err := resolve.ShortestEach(la.all, x.lock.Resolution.Requests[component], inComponent(a, component), nevras, la.opts)
	if err != nil {
		return nil, fmt.Errorf("%s component %s: %w", arch, component, err)
	}
	return out, nil
}

// loadLocked reads the repositories of a lock that arch installs from and
// checks that each is the one the lock pinned (its release file's digest,
// which pins its indexes).
func loadLocked(ctx context.Context, l *lock.Lock, dir string, urls map[string]string, arch string, o Options, logf func(string, ...any)) ([]*repo.Package, resolve.Options, error) {
	ropts := resolve.Options{Arch: arch, Semantics: evr.RPM, TargetBranch: l.Spec.Branch,
		Excludes: l.Resolution.Excludes, MultiVersion: l.Resolution.MultiVersion}
	var all []*repo.Package
	for _, r := range l.Repositories {
		if r.Format == repo.FormatALT {
			ropts.Semantics = evr.ALT
			// An ALT dist is one architecture's (or noarch).
			if d := filepath.Base(strings.TrimRight(r.URL, "/")); d != arch && d != "noarch" && l.Architectures[d] != nil {
				continue
			}
		}
		u, err := lockedURL(r, urls, dir)
		if err != nil {
			return nil, ropts, err
		}
		logf("reading %s (%s)", u, r.Format)
		ld, err := repo.Load(ctx, u, repo.AnyOptions{Format: r.Format, InsecureSkipVerify: true, UnsignedIndex: r.Verify == specs.VerifyPackages,
			Source: o.Source, IndexCache: indexCacheDir(o)})
		if err != nil {
			return nil, ropts, fmt.Errorf("repository %s: %w", r.Name, err)
		}
		if ld.ReleaseSHA256 != r.Release.Value {
			return nil, ropts, fmt.Errorf("repository %s at %s changed since the lock was made (%s sha256 %s, the lock pins %s): explain from the spec (--spec), or lock again",
				r.Name, u, ld.ReleasePath, ld.ReleaseSHA256, r.Release.Value)
		}
		all = append(all, ld.Packages...)
	}
	return all, ropts, nil
}

// lockedURL is where a locked repository is read from: its override, or
// its URL, a relative one from dir (the lock's base, lock.Lock.Base: the
// spec's directory, wherever the lock is). With no dir (a published
// release's lock), a relative URL is refused rather than read from the
// working directory.
func lockedURL(r lock.Repository, urls map[string]string, dir string) (string, error) {
	u := r.URL
	if o, ok := urls[r.Name]; ok {
		// An ALT dist keeps its last element under the new base.
		if r.Format == repo.FormatALT {
			return strings.TrimRight(o, "/") + "/" + filepath.Base(strings.TrimRight(u, "/")), nil
		}
		return o, nil
	}
	if !lock.IsRelative(u) {
		return u, nil
	}
	if dir == "" {
		return "", fmt.Errorf("repository %s is relative (%s) to a spec not given", r.Name, u)
	}
	return filepath.Join(dir, u), nil
}

// explain runs the explanation; a package outside the set is no answer.
func explain(all []*repo.Package, requests []string, inSet func(*repo.Package) bool, target string, ropts resolve.Options) ([]resolve.Explanation, error) {
	ans, err := resolve.Why(all, requests, inSet, target, ropts)
	if nf := (*resolve.NotInSetError)(nil); errors.As(err, &nf) {
		return nil, nil
	}
	return ans, err
}

// found is the answers, or the error that there are none.
func found(out []Answer, target string, o WhyOptions, archs []string) ([]Answer, error) {
	if len(out) > 0 {
		return out, nil
	}
	where := "any component of " + strings.Join(archs, ", ")
	switch {
	case o.Image != "":
		where = "image " + o.Image
		if o.Arch != "" {
			where += " of " + o.Arch
		}
	case o.Arch != "" && o.Component != "":
		where = "component " + o.Component + " of " + o.Arch
	case o.Arch != "":
		where = "any component of " + o.Arch
	case o.Component != "":
		where = "component " + o.Component
	}
	return nil, &NotLockedError{Name: target, Where: where}
}

func logger(o Options) func(string, ...any) {
	if o.Log == nil {
		return func(string, ...any) {}
	}
	return o.Log
}

// indexCacheDir keeps parsed indexes beside the downloads, keyed by the
// digest of the release file each was verified against.
func indexCacheDir(o Options) string {
	if o.Cache != nil && o.Cache.Dir != "" {
		return filepath.Join(o.Cache.Dir, "repo-index")
	}
	return ""
}
