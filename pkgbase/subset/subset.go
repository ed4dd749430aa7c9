// Package subset writes the package base subset of a release: exactly the
// packages its lock pins, laid out as ALT repositories whose indexes are
// regenerated for them and signed with the perimeter's key, beside the
// spec and the lock. Carried into a closed perimeter, it lets a builder
// there rebuild the release without the original base.
package subset

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/keyring"
	"github.com/nodeforge/builder/pkgbase/repo"
)

// Names inside a subset.
const (
	SpecFile    = "spec.yaml"
	LockFile    = "lock.json"
	KeyFile     = "keys/perimeter.asc"
	BaseKeysDir = "keys/base" // BaseKeysDir/REPO/N-FILE: the base's keyrings, as the spec names them
	ReadmeFile  = "README.txt"
	ReposDir    = "repos"
	readmeTitle = "Package base subset"
)

// Options are the inputs of a subset.
type Options struct {
	Spec      *specs.Spec
	Lock      *lock.Lock
	LockBytes []byte
	// Cache holds (or fetches) the packages, verified by the lock's sha256.
	Cache         *cache.Cache
	SourceOptions repo.SourceOptions
	// Signer is the perimeter's OpenPGP key signing the regenerated
	// indexes (its private key must be decrypted).
	Signer *openpgp.Entity
}

// File is one file of a subset.
type File struct {
	// Path is relative to the subset's root, slash-separated.
	Path string
	Kind string // "rpm", "index", "spec", "lock", "key", "readme"
}

// Write writes the subset into dir (which must not exist or be empty) and
// lists its files in a stable order. Nothing depends on the clock: the
// indexes are dated the lock's SOURCE_DATE_EPOCH (or the key's creation,
// when later).
func Write(ctx context.Context, dir string, o Options) ([]File, error) {
	s, l := o.Spec, o.Lock
	if sum := sha256.Sum256(s.Raw); l.Spec.SHA256 != hex.EncodeToString(sum[:]) {
		got := hex.EncodeToString(sum[:])
		return nil, fmt.Errorf("spec %s (sha256 %s) is not the spec of the lock (sha256 %s)", s.Name, got, l.Spec.SHA256)
	}
	if o.Signer == nil || o.Signer.PrivateKey == nil {
		return nil, fmt.Errorf("the base subset needs the perimeter's OpenPGP private key to sign its indexes")
	}
	if o.Signer.PrivateKey.Encrypted {
		return nil, fmt.Errorf("the perimeter's OpenPGP key is encrypted: decrypt it first")
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%s is not empty", dir)
	}
	all, err := placePackages(s, l)
	if err != nil {
		return nil, err
	}
	wants := make([]cache.Want, 0, len(all))
	sources := map[string]repo.Source{}
	for _, pl := range all {
		// A published lock is no file: relative URLs are the spec's.
		u := l.Locate(pl.p.URL, "", s.Path("."))
		src, ok := sources[u]
		if !ok {
			var err error
			if src, err = repo.NewSource(u, o.SourceOptions); err != nil {
				return nil, fmt.Errorf("%s: %w", pl.p.NEVRA, err)
			}
			sources[u] = src
		}
		wants = append(wants, cache.Want{Name: pl.p.NEVRA, Source: src, Location: pl.p.Location, Size: pl.p.Size, Algo: "sha256", Hash: pl.p.SHA256})
	}
	paths, err := o.Cache.Fetch(ctx, wants)
	if err != nil {
		return nil, err
	}
	var files []File
	put := func(rel string, data []byte, kind string) error {
		name := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(name, data, 0o644); err != nil {
			return err
		}
		files = append(files, File{Path: rel, Kind: kind})
		return nil
	}
	byDist := map[string]map[string][]string{}
	var rpmFiles []string
	for i, pl := range all {
		rel := path.Join(pl.dist, "RPMS."+pl.comp, path.Base(pl.p.Location))
		name := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return nil, err
		}
		if err := copyFile(paths[i], name); err != nil {
			return nil, err
		}
		files = append(files, File{Path: rel, Kind: "rpm"})
		if byDist[pl.dist] == nil {
			byDist[pl.dist] = map[string][]string{}
		}
		byDist[pl.dist][pl.comp] = append(byDist[pl.dist][pl.comp], name)
		rpmFiles = append(rpmFiles, name)
	}
	required, err := repo.RPMFileRequires(rpmFiles)
	if err != nil {
		return nil, err
	}
	idx, err := writeIndexes(dir, s, l, o.Signer, byDist, required)
	if err != nil {
		return nil, err
	}
	files = append(files, idx...)
	if err := writeMeta(put, s, o); err != nil {
		return nil, err
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

// writeMeta writes the keys (the perimeter's and, per repository, the
// base's keyrings, which still verify the packages), the spec, the lock
// and the README saying how to use them.
func writeMeta(put func(rel string, data []byte, kind string) error, s *specs.Spec, o Options) error {
	pub, err := keyring.ArmoredPublic(o.Signer)
	if err != nil {
		return err
	}
	if err := put(KeyFile, pub, "key"); err != nil {
		return err
	}
	baseKeys := map[string][]string{}
	for _, r := range s.Repositories {
		for i, k := range r.Keyring {
			data, err := os.ReadFile(k)
			if errors.Is(err, fs.ErrNotExist) {
				// A shipped spec names the branch host's keyring
				// (/usr/lib/alt-gpgkeys/...): inside, it is there or
				// given by hand, as outside.
				baseKeys[r.Name] = append(baseKeys[r.Name], k)
				continue
			}
			if err != nil {
				return fmt.Errorf("repository %s: keyring: %w", r.Name, err)
			}
			rel := path.Join(BaseKeysDir, r.Name, fmt.Sprintf("%d-%s", i+1, filepath.Base(k)))
			if err := put(rel, data, "key"); err != nil {
				return err
			}
			baseKeys[r.Name] = append(baseKeys[r.Name], rel)
		}
	}
	if err := put(SpecFile, s.Raw, "spec"); err != nil {
		return err
	}
	if err := put(LockFile, o.LockBytes, "lock"); err != nil {
		return err
	}
	return put(ReadmeFile, readme(s, o.Signer, baseKeys), "readme")
}

// placed is a locked package with its place in the subset.
type placed struct {
	p    lock.Package
	dist string // repos/<name>/<dist>
	comp string
}

// placePackages lists every locked package once (architectures share
// noarch packages) with the ALT dist and component it goes to.
func placePackages(s *specs.Spec, l *lock.Lock) ([]placed, error) {
	var all []placed
	seen := map[string]bool{}
	for _, arch := range slices.Sorted(maps.Keys(l.Architectures)) {
		for _, p := range l.Architectures[arch].Packages {
			if seen[p.SHA256] {
				continue
			}
			seen[p.SHA256] = true
			r := specRepo(s, p.Repository)
			if r == nil {
				return nil, fmt.Errorf("%s: repository %q is not in spec %s", p.NEVRA, p.Repository, s.Name)
			}
			if r.Format != "alt" {
				return nil, fmt.Errorf("%s: repository %q is %s: the base subset is written for ALT repositories only", p.NEVRA, r.Name, r.Format)
			}
			rest, ok := strings.CutPrefix(p.URL, strings.TrimRight(origURL(r), "/")+"/")
			if !ok || !filepath.IsLocal(filepath.FromSlash(rest)) {
				return nil, fmt.Errorf("%s: its URL %s is not a dist of repository %s (%s)", p.NEVRA, p.URL, r.Name, origURL(r))
			}
			compDir, file := path.Split(p.Location)
			comp, ok := strings.CutPrefix(strings.TrimSuffix(compDir, "/"), "RPMS.")
			if !ok || file == "" || strings.Contains(comp, "/") {
				return nil, fmt.Errorf("%s: location %s is not RPMS.<component>/<file>", p.NEVRA, p.Location)
			}
			all = append(all, placed{p: p, dist: path.Join(ReposDir, r.Name, rest), comp: comp})
		}
	}
	return all, nil
}

// writeIndexes writes and signs the ALT indexes of every dist of the
// subset, dated the lock's source date (or the key's creation, when
// later), and lists their files.
func writeIndexes(dir string, s *specs.Spec, l *lock.Lock, signer *openpgp.Entity, byDist map[string]map[string][]string, required []string) ([]File, error) {
	var files []File
	date := time.Unix(l.SourceDateEpoch, 0).UTC()
	if created := signer.PrimaryKey.CreationTime; created.After(date) {
		date = created.UTC()
	}
	archs := append(slices.Sorted(maps.Keys(l.Architectures)), "noarch")
	for _, dist := range slices.Sorted(maps.Keys(byDist)) {
		err := repo.WriteALTDist(repo.ALTDist{
			Dir: filepath.Join(dir, filepath.FromSlash(dist)), Components: byDist[dist], Archs: archs,
			Origin: "Nodeforge base subset", Label: s.Name, Suite: s.Branch,
			Date: date, Signer: signer, RequiredPaths: required,
		})
		if err != nil {
			return nil, fmt.Errorf("base subset %s: %w", dist, err)
		}
		idx, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(dist), "base"))
		if err != nil {
			return nil, err
		}
		for _, f := range idx {
			files = append(files, File{Path: path.Join(dist, "base", f.Name()), Kind: "index"})
		}
	}
	return files, nil
}

// origURL is the repository URL the lock recorded (before any override).
func origURL(r *specs.Repository) string {
	if r.OriginalURL != "" {
		return r.OriginalURL
	}
	return r.SpecURL
}

func specRepo(s *specs.Spec, name string) *specs.Repository {
	for i := range s.Repositories {
		if s.Repositories[i].Name == name {
			return &s.Repositories[i]
		}
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func readme(s *specs.Spec, signer *openpgp.Entity, baseKeys map[string][]string) []byte {
	var b strings.Builder
	fpr := fmt.Sprintf("%X", signer.PrimaryKey.Fingerprint)
	fmt.Fprintf(&b, "%s of %s %s (branch %s)\n\n", readmeTitle, s.Name, s.Version, s.Branch)
	fmt.Fprintf(&b, "The packages the lock pins, as ALT repositories under %s/, their indexes\n", ReposDir)
	fmt.Fprintf(&b, "regenerated and signed by the perimeter's key %s (%s).\n\n", fpr, KeyFile)
	b.WriteString("Rebuild the release from it, offline, with the lock as it is (from this\ndirectory):\n\n")
	b.WriteString("  builder build --spec spec.yaml --lock lock.json")
	for _, r := range s.Repositories {
		fmt.Fprintf(&b, " \\\n      --repo-url %s=%s/%s", r.Name, ReposDir, r.Name)
	}
	b.WriteString(" --out out\n\nThe packages keep their original signatures; the build checks each by the\nsha256 the lock pins.\n\n")
	b.WriteString("Resolve against it (to check the lock, or to relock after editing the spec):\n\n")
	b.WriteString("  builder lock --spec spec.yaml -o relock.json")
	for _, r := range s.Repositories {
		fmt.Fprintf(&b, " \\\n      --repo-url %s=%s/%s --repo-keyring %s=%s", r.Name, ReposDir, r.Name, r.Name, KeyFile)
		for _, k := range baseKeys[r.Name] {
			fmt.Fprintf(&b, " --repo-keyring %s=%s", r.Name, k)
		}
		if len(r.Fingerprints) > 0 {
			fmt.Fprintf(&b, " --repo-fingerprint %s=%s", r.Name, fpr)
		}
	}
	fmt.Fprintf(&b, "\n\nThe perimeter's key signs the indexes and the base's keys (%s/) the\n", BaseKeysDir)
	b.WriteString("packages, so each repository's keyring holds both; where the spec pins its\nkeys, the perimeter's is pinned beside them.\n")
	return []byte(b.String())
}
