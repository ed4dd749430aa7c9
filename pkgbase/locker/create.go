// Package locker makes locks: it resolves a spec against its package base,
// fetches and verifies every chosen package, and pins it by digest.
package locker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/keyring"
	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/pkgbase/resolve"
	"github.com/nodeforge/builder/pkgbase/rpmfile"
)

// Options tunes Create.
type Options struct {
	Cache  *cache.Cache
	Source repo.SourceOptions
	// Log receives one line per step (loading, resolving, fetching).
	Log func(format string, args ...any)
}

// loadedRepo is one dist of one spec repository.
type loadedRepo struct {
	spec    *specs.Repository
	display string // the URL as the lock records it (spec-relative for local repositories)
	loaded  *repo.Loaded
	keyring *keyring.Keyring
}

// Create resolves the spec against its package base for every
// architecture, fetches each chosen package through the verified cache,
// checks its digests and signature, and returns the lock.
func Create(ctx context.Context, s *specs.Spec, opts Options) (*lock.Lock, error) {
	logf := logger(opts)
	sum := sha256.Sum256(s.Raw)
	l := &lock.Lock{
		LockVersion:   lock.FormatVersion,
		Spec:          lock.SpecRef{Name: s.Name, Branch: s.Branch, Version: s.Version, SHA256: hex.EncodeToString(sum[:])},
		Architectures: map[string]*lock.Arch{},
		Repositories:  []lock.Repository{},
		Keyrings:      []lock.Keyring{},
	}
	keyrings, err := loadKeyrings(s)
	if err != nil {
		return nil, err
	}
	for _, r := range s.Repositories {
		if kr := keyrings[r.Name]; kr != nil {
			l.Keyrings = append(l.Keyrings, lock.Keyring{Repository: r.Name, Fingerprints: kr.Fingerprints()})
		}
	}
	l.Resolution = &lock.Resolution{Requests: map[string][]string{}, Excludes: append([]string{}, s.Excludes...), MultiVersion: s.MultiVersion}
	for _, c := range s.ComponentNames() {
		l.Resolution.Requests[c] = append([]string{}, s.Components[c].Packages...)
	}
	for _, name := range s.ImageNames() {
		if l.Resolution.Images == nil {
			l.Resolution.Images = map[string][]string{}
		}
		l.Resolution.Images[name] = append([]string{}, s.Images[name].Packages...)
	}
	seenRepo := map[string]bool{}
	for _, arch := range s.Architectures {
		all, loaded, err := loadArch(ctx, s, arch, keyrings, indexCacheDir(opts), opts.Source, logf)
		if err != nil {
			return nil, err
		}
		for _, lr := range loaded {
			ld := lr.loaded
			if seenRepo[ld.URL] {
				continue
			}
			seenRepo[ld.URL] = true
			rl := lock.Repository{Name: lr.spec.Name, Format: ld.Format, URL: lr.display,
				Release: lock.Digest{Algorithm: "sha256", Value: ld.ReleaseSHA256}, Indexes: []lock.Index{}, Signers: ld.Signers}
			if lr.spec.Verify == specs.VerifyPackages {
				rl.Verify = lr.spec.Verify
			}
			if rl.Signers == nil {
				rl.Signers = []string{}
			}
			for _, ix := range ld.Indexes {
				rl.Indexes = append(rl.Indexes, lock.Index(ix))
			}
			l.Repositories = append(l.Repositories, rl)
		}
		a, err := resolveArch(ctx, s, arch, all, loaded, opts, logf)
		if err != nil {
			return nil, err
		}
		l.Architectures[arch] = a
		for _, p := range a.Packages {
			if p.BuildTime > l.SourceDateEpoch {
				l.SourceDateEpoch = p.BuildTime
			}
		}
	}
	l.Sort()
	return l, nil
}

// loadKeyrings reads the keyring of every spec repository that has one.
func loadKeyrings(s *specs.Spec) (map[string]*keyring.Keyring, error) {
	keyrings := map[string]*keyring.Keyring{}
	for i := range s.Repositories {
		r := &s.Repositories[i]
		if len(r.Keyring) == 0 {
			continue
		}
		kr, err := keyring.Load(r.Keyring...)
		if err != nil {
			return nil, fmt.Errorf("repository %s: %w", r.Name, err)
		}
		keyrings[r.Name] = kr
	}
	return keyrings, nil
}

// loadArch reads (and verifies) every dist of the spec's repositories that
// arch installs from.
func loadArch(ctx context.Context, s *specs.Spec, arch string, keyrings map[string]*keyring.Keyring, indexCache string, src repo.SourceOptions, logf func(string, ...any)) ([]*repo.Package, []loadedRepo, error) {
	var all []*repo.Package
	var loaded []loadedRepo
	for i := range s.Repositories {
		r := &s.Repositories[i]
		urls, shown := []string{r.URL}, []string{r.SpecURL}
		if r.Format == repo.FormatALT {
			urls, shown = r.DistURLs(arch), nil
			for _, d := range r.DistNames(arch) {
				shown = append(shown, strings.TrimRight(r.SpecURL, "/")+"/"+d)
			}
		}
		for ui, u := range urls {
			logf("reading %s (%s)", u, r.Format)
			ld, err := repo.Load(ctx, u, repo.AnyOptions{Format: r.Format, Keyring: keyrings[r.Name],
				InsecureSkipVerify: r.InsecureSkipVerify, UnsignedIndex: r.Verify == specs.VerifyPackages,
				Components: r.Components, Source: src, IndexCache: indexCache})
			if err != nil {
				return nil, nil, fmt.Errorf("repository %s: %w", r.Name, err)
			}
			if err := checkPinned(r, ld.Signers); err != nil {
				return nil, nil, fmt.Errorf("repository %s at %s: %w", r.Name, u, err)
			}
			loaded = append(loaded, loadedRepo{spec: r, display: shown[ui], loaded: ld, keyring: keyrings[r.Name]})
			all = append(all, ld.Packages...)
		}
	}
	return all, loaded, nil
}

// checkPinned enforces the spec's fingerprint pins on the release signers
// (under verify: packages there are none: the pins apply to each package's
// signer, in pinPackage).
func checkPinned(r *specs.Repository, signers []string) error {
	if len(r.Fingerprints) == 0 || r.InsecureSkipVerify || r.Verify == specs.VerifyPackages {
		return nil
	}
	if pinned(r, signers...) {
		return nil
	}
	return fmt.Errorf("signed by %v, but the spec pins %v", signers, r.Fingerprints)
}

// pinned reports whether one of the signers is a fingerprint the spec pins.
func pinned(r *specs.Repository, signers ...string) bool {
	for _, s := range signers {
		for _, f := range r.Fingerprints {
			if strings.EqualFold(s, f) {
				return true
			}
		}
	}
	return false
}

func resolveArch(ctx context.Context, s *specs.Spec, arch string, all []*repo.Package, loaded []loadedRepo, opts Options, logf func(string, ...any)) (*lock.Arch, error) {
	pl, err := planArch(s, arch, all, loaded, logf)
	if err != nil {
		return nil, err
	}
	a := &lock.Arch{Components: map[string][]string{}}
	for c, res := range pl.components {
		a.Components[c] = nevras(res.Packages)
	}
	for name, res := range pl.images {
		if a.Images == nil {
			a.Images = map[string][]string{}
		}
		a.Images[name] = nevras(res.Packages)
	}
	whole := pl.fetch
	// Fetch and verify every package.
	srcOf := map[string]loadedRepo{}
	for _, lr := range loaded {
		srcOf[lr.loaded.URL] = lr
	}
	wants := make([]cache.Want, len(whole))
	for i, p := range whole {
		lr, ok := srcOf[p.Repo]
		if !ok {
			return nil, fmt.Errorf("%s: repository %s unknown", p.NEVRA(), p.Repo)
		}
		if wants[i], err = cache.WantFor(p, lr.loaded.Source); err != nil {
			return nil, err
		}
	}
	logf("fetching %d packages for %s", len(wants), arch)
	paths, err := opts.Cache.Fetch(ctx, wants)
	if err != nil {
		return nil, err
	}
	// Packages are checked on every core: reading and hashing them is the
	// work of a lock once they are downloaded.
	pinned := make([]lock.Package, len(whole))
	errs := make([]error, len(whole))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, p := range whole {
		g.Go(func() error {
			pinned[i], errs[i] = pinPackage(p, paths[i], srcOf[p.Repo], wants[i])
			return nil // every refusal is reported, not only the first
		})
	}
	g.Wait()
	var problems []string
	for i := range whole {
		if errs[i] != nil {
			problems = append(problems, errs[i].Error())
			continue
		}
		a.Packages = append(a.Packages, pinned[i])
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return nil, fmt.Errorf("%s: %d package(s) refused:\n%s", arch, len(problems), strings.Join(problems, "\n"))
	}
	return a, nil
}

// plan is one architecture's resolution: the whole set, each
// component's closure drawn from it, each container image's own closure,
// and every package to fetch (the whole set and the images').
type plan struct {
	opts       resolve.Options
	whole      *resolve.Result
	components map[string]*resolve.Result
	images     map[string]*resolve.Result
	fetch      []*repo.Package
}

// nevras are the packages' NEVRAs (an empty list, not nil, for none).
func nevras(ps []*repo.Package) []string {
	names := []string{}
	for _, p := range ps {
		names = append(names, p.NEVRA())
	}
	return names
}

func planArch(s *specs.Spec, arch string, all []*repo.Package, loaded []loadedRepo, logf func(string, ...any)) (*plan, error) {
	sem := evr.ALT
	if len(loaded) > 0 && loaded[0].loaded.Format == repo.FormatRPMMD {
		sem = evr.RPM
	}
	ropts := resolve.Options{Arch: arch, Semantics: sem, TargetBranch: s.Branch, Excludes: s.Excludes, MultiVersion: s.MultiVersion}
	for _, lr := range loaded {
		if !lr.loaded.FullFiles {
			if ropts.PartialFiles == nil {
				ropts.PartialFiles = map[string]string{}
			}
			ropts.PartialFiles[lr.loaded.URL] = lr.spec.Name
		}
	}
	var requests []string
	for _, c := range s.ComponentNames() {
		requests = append(requests, s.Components[c].Packages...)
	}
	logf("resolving %d requests for %s among %d packages", len(requests), arch, len(all))
	whole, err := resolve.Resolve(all, dedupe(requests), ropts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", arch, err)
	}
	pl := &plan{opts: ropts, whole: whole, components: map[string]*resolve.Result{}}
	// Each component's closure, drawn from the consistent whole.
	for _, c := range s.ComponentNames() {
		res, err := resolve.Resolve(whole.Packages, s.Components[c].Packages, ropts)
		if err != nil {
			return nil, fmt.Errorf("%s component %s: %w", arch, c, err)
		}
		pl.components[c] = res
	}
	return pl, planImages(s, arch, all, pl, logf)
}

// planImages resolves each container image built for arch on its own, from
// every candidate of the base (an image is a system of its own: the node's
// choices do not bind it), and adds its packages to those to fetch.
func planImages(s *specs.Spec, arch string, all []*repo.Package, pl *plan, logf func(string, ...any)) error {
	pl.fetch = append([]*repo.Package(nil), pl.whole.Packages...)
	seen := map[*repo.Package]bool{}
	for _, p := range pl.fetch {
		seen[p] = true
	}
	for _, name := range s.ImageNames() {
		im := s.Images[name]
		if !slices.Contains(im.Architectures, arch) {
			continue
		}
		logf("resolving image %s for %s", name, arch)
		res, err := resolve.Resolve(all, dedupe(im.Packages), pl.opts)
		if err != nil {
			return fmt.Errorf("%s image %s: %w", arch, name, err)
		}
		if pl.images == nil {
			pl.images = map[string]*resolve.Result{}
		}
		pl.images[name] = res
		for _, p := range res.Packages {
			if !seen[p] {
				seen[p] = true
				pl.fetch = append(pl.fetch, p)
			}
		}
	}
	return nil
}

// pinPackage opens a verified download, checks that it is the package the
// index described, that its digests hold and that its signature verifies.
func pinPackage(p *repo.Package, path string, lr loadedRepo, w cache.Want) (lock.Package, error) {
	f, err := os.Open(path)
	if err != nil {
		return lock.Package{}, err
	}
	defer f.Close()
	// The file's sha256 is taken on the one read that Verify makes to the end.
	whole := sha256.New()
	rp, err := rpmfile.Open(io.TeeReader(f, whole))
	if err != nil {
		return lock.Package{}, fmt.Errorf("%s: %w", p.NEVRA(), err)
	}
	info, err := rpmfile.ReadInfo(rp.Header)
	if err != nil {
		return lock.Package{}, fmt.Errorf("%s: %w", p.NEVRA(), err)
	}
	got, _ := repo.PackageFromHeader(rp.Header, p.Semantics)
	if got.Name != p.Name || got.Arch != p.Arch || got.EVR != p.EVR {
		return lock.Package{}, fmt.Errorf("%s: the file %s holds %s instead", p.NEVRA(), p.Location, got.NEVRA())
	}
	// Digests and signatures as rpm -K checks them; the build walks the
	// payload's archive when it lays the package.
	v, err := rp.Verify(rpmfile.VerifyOptions{Keyring: lr.keyring, DigestsOnly: true})
	if err != nil {
		return lock.Package{}, fmt.Errorf("%s: %w", p.NEVRA(), err)
	}
	// Every digest and signature must hold, as rpm -K requires; the
	// message names the file and each failed signature.
	requireSig := !lr.spec.InsecureSkipVerify
	if err := v.Err(requireSig); err != nil {
		return lock.Package{}, fmt.Errorf("%s: package file %s refused: %w", p.NEVRA(), p.Location, err)
	}
	if lr.spec.Verify == specs.VerifyPackages {
		if err := packageTrusted(lr.spec, v); err != nil {
			return lock.Package{}, fmt.Errorf("%s: %w", p.NEVRA(), err)
		}
	}
	sha := hex.EncodeToString(whole.Sum(nil))
	lp := lock.Package{
		Name: p.Name, Version: p.EVR.Version, Release: p.EVR.Release, Disttag: p.EVR.Disttag, Arch: p.Arch,
		NEVRA: p.NEVRA(), SourceRPM: info.SourceRPM, License: info.License, BuildTime: info.BuildTime,
		Repository: lr.spec.Name, URL: lr.display, Location: p.Location, Size: p.FileSize, SHA256: sha,
		IndexDigest: lock.Digest{Algorithm: w.Algo, Value: strings.ToLower(w.Hash)},
	}
	if p.EVR.HasEpoch {
		e := p.EVR.Epoch
		lp.Epoch = &e
	}
	for _, s := range v.Signatures {
		if s.Verified {
			lp.SignerKeyID, lp.SignerFingerprint = s.KeyID, s.Signer
			break
		}
	}
	if lp.SignerKeyID == "" && len(v.Signatures) > 0 {
		lp.SignerKeyID = v.Signatures[0].KeyID
	}
	return lp, nil
}

// packageTrusted is what verify: packages asks beyond a verified
// signature, since no signed index vouches for the file's hash: that a
// signature covers the payload, and that its signer is pinned when the
// spec pins keys.
func packageTrusted(r *specs.Repository, v *rpmfile.Verification) error {
	if !v.PayloadSigned() {
		return errors.New("no verified signature covers the payload (the header has no payload digest and no header+payload signature verified), and the index is unsigned (verify: packages)")
	}
	if len(r.Fingerprints) == 0 {
		return nil
	}
	var signers []string
	for _, s := range v.Signatures {
		if s.Verified {
			signers = append(signers, s.Signer)
		}
	}
	if !pinned(r, signers...) {
		return fmt.Errorf("signed by %v, but the spec pins %v", signers, r.Fingerprints)
	}
	return nil
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// Write writes the lock to path atomically (temp file, then rename),
// placed (lock.Place) for the spec in specDir so that it reads the same
// repositories wherever path is, and returns the bytes written.
func Write(path string, l *lock.Lock, specDir string) ([]byte, error) {
	if err := l.Place(path, specDir); err != nil {
		return nil, err
	}
	b, err := l.Marshal()
	if err != nil {
		return nil, err
	}
	return b, atomicfile.Put(path, b)
}
