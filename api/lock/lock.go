// Package lock defines the lock file: every package of a release pinned by
// digest, per architecture and component, with the repository indexes and
// keys it was resolved from. Later stages build only from the lock.
package lock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// FormatVersion is the lock file format version. 2: keys in camelCase
// (sourceRpm, buildTime) and the resolution recorded.
const FormatVersion = 2

// Lock is the whole lock file.
type Lock struct {
	LockVersion int `json:"lockVersion"`
	// Spec identifies the release spec the lock was made from.
	Spec SpecRef `json:"spec"`
	// SourceDateEpoch is the newest BUILDTIME among the locked packages:
	// the default timestamp of every artifact built from this lock.
	SourceDateEpoch int64 `json:"sourceDateEpoch"`
	// Repositories are the indexes read, one entry per dist.
	Repositories []Repository `json:"repositories"`
	// Keyrings are the keys that verified them.
	Keyrings []Keyring `json:"keyrings"`
	// Architectures maps an architecture to its packages.
	Architectures map[string]*Arch `json:"architectures"`
	// Resolution is what the resolver started from, so that the lock
	// alone explains why each package is in it (builder why). Locks made
	// before it was recorded have none.
	Resolution *Resolution `json:"resolution,omitempty"`
	// SpecDir is the directory of the spec, slash-separated and relative
	// to the lock file's directory, for a lock written elsewhere than
	// beside its spec: relative repository URLs are the spec's, from
	// there (see Base). Absent, they are from the spec's directory, which
	// for a lock written beside its spec is the lock's own.
	SpecDir string `json:"specDir,omitempty"`
}

// Place records where the lock is written (lockPath) and the directory
// of its spec (specDir, as the spec's relative paths are resolved), so
// that the lock reads the same repositories wherever it is: SpecDir, when
// the two directories differ and a repository URL is relative. A lock
// beside its spec is left as it was.
func (l *Lock) Place(lockPath, specDir string) error {
	l.SpecDir = ""
	if !slices.ContainsFunc(l.Repositories, func(r Repository) bool { return IsRelative(r.URL) }) {
		return nil
	}
	from, err := filepath.Abs(filepath.Dir(lockPath))
	if err != nil {
		return err
	}
	to, err := filepath.Abs(specDir)
	if err != nil {
		return err
	}
	if from == to {
		return nil
	}
	rel, err := filepath.Rel(from, to)
	if err != nil {
		rel = to // no relative way there: the absolute path
	}
	l.SpecDir = filepath.ToSlash(rel)
	return nil
}

// Base is the directory the lock's relative repository URLs are from,
// read from lockPath ("" when it is no file: a published lock) with the
// spec in specDir ("" without a spec): SpecDir from the lock's directory
// when the lock records it; else the spec's directory (a lock beside its
// spec, or one written before SpecDir was recorded, whose URLs were
// always the spec's); else, without a spec, the lock's own.
func (l *Lock) Base(lockPath, specDir string) string {
	switch {
	case filepath.IsAbs(l.SpecDir):
		return l.SpecDir
	case l.SpecDir != "" && lockPath != "":
		return filepath.Join(filepath.Dir(lockPath), filepath.FromSlash(l.SpecDir))
	case specDir != "":
		return specDir
	case lockPath != "":
		return filepath.Dir(lockPath)
	}
	return ""
}

// Locate is where the repository URL u of the lock is: u itself when it
// is remote or absolute, else u from Base.
func (l *Lock) Locate(u, lockPath, specDir string) string {
	if !IsRelative(u) {
		return u
	}
	return filepath.Join(l.Base(lockPath, specDir), u)
}

// IsRelative says whether a repository URL is a path relative to a
// directory.
func IsRelative(u string) bool { return !strings.Contains(u, "://") && !filepath.IsAbs(u) }

// Resolution records the spec's inputs to the resolver.
type Resolution struct {
	// Requests are each component's package requests, as the spec gives them.
	Requests map[string][]string `json:"requests"`
	// Excludes are the name globs never chosen.
	Excludes []string `json:"excludes"`
	// MultiVersion are the spec's multi-version patterns; absent means the
	// resolver's default.
	MultiVersion []string `json:"multiVersion,omitempty"`
	// Images are each container image's package requests (absent: the
	// spec has none).
	Images map[string][]string `json:"images,omitempty"`
}

// SpecRef names the spec and pins its bytes.
type SpecRef struct {
	Name    string `json:"name"`
	Branch  string `json:"branch"`
	Version string `json:"version"`
	SHA256  string `json:"sha256"`
}

// Repository is one index as it was read.
type Repository struct {
	Name   string `json:"name"` // the spec's repository name
	Format string `json:"format"`
	URL    string `json:"url"` // the dist URL (ALT) or repository root (rpm-md)
	// Release is the digest of base/release (ALT) or repodata/repomd.xml.
	Release Digest   `json:"release"`
	Indexes []Index  `json:"indexes"`
	Signers []string `json:"signers"` // fingerprints that verified the release
	// Verify is the spec's trust mode when it is not "all": "packages"
	// (no release signature; every package verified over its payload).
	Verify string `json:"verify,omitempty"`
}

// Index is one package index file.
type Index struct {
	Path      string `json:"path"`
	Algorithm string `json:"algorithm"`
	Hash      string `json:"hash"`
	Size      int64  `json:"size"`
}

// Digest is an algorithm and hex value.
type Digest struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"value"`
}

// Keyring records one keyring file by its keys' fingerprints (the file
// path is deliberately left out: it differs between machines).
type Keyring struct {
	Repository   string   `json:"repository"`
	Fingerprints []string `json:"fingerprints"`
}

// Arch holds the packages of one architecture.
type Arch struct {
	Packages []Package `json:"packages"`
	// Components maps a component (rootfs, kernel, an extension) to the
	// NEVRAs it installs, each present in Packages.
	Components map[string][]string `json:"components"`
	// Images maps a container image built for the architecture to the
	// NEVRAs it installs, each present in Packages (absent: none). An
	// image is resolved on its own, from the same repositories.
	Images map[string][]string `json:"images,omitempty"`
}

// Package pins one package.
type Package struct {
	Name       string `json:"name"`
	Epoch      *int   `json:"epoch"`
	Version    string `json:"version"`
	Release    string `json:"release"`
	Disttag    string `json:"disttag,omitempty"`
	Arch       string `json:"arch"`
	NEVRA      string `json:"nevra"`
	SourceRPM  string `json:"sourceRpm"`
	License    string `json:"license"`
	BuildTime  int64  `json:"buildTime"`
	Repository string `json:"repository"` // spec repository name
	URL        string `json:"url"`        // dist URL the location is relative to
	Location   string `json:"location"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"`
	// IndexDigest is the digest the signed index gave for the file.
	IndexDigest Digest `json:"indexDigest"`
	// SignerKeyID is the OpenPGP key id of the verified package signature.
	SignerKeyID string `json:"signerKeyId"`
	// SignerFingerprint is the primary key that verified it.
	SignerFingerprint string `json:"signerFingerprint"`
}

// Marshal renders the lock deterministically: sorted lists, two-space
// indented JSON (map keys are sorted by encoding/json), trailing newline.
func (l *Lock) Marshal() ([]byte, error) {
	l.Sort()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Sort puts every list of the lock in its canonical order (Marshal does too).
func (l *Lock) Sort() {
	sort.Slice(l.Repositories, func(i, j int) bool {
		a, b := l.Repositories[i], l.Repositories[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.URL < b.URL
	})
	sort.Slice(l.Keyrings, func(i, j int) bool { return l.Keyrings[i].Repository < l.Keyrings[j].Repository })
	for _, a := range l.Architectures {
		sort.Slice(a.Packages, func(i, j int) bool {
			if a.Packages[i].NEVRA != a.Packages[j].NEVRA {
				return a.Packages[i].NEVRA < a.Packages[j].NEVRA
			}
			return a.Packages[i].SHA256 < a.Packages[j].SHA256
		})
		for _, c := range a.Components {
			sort.Strings(c)
		}
		for _, c := range a.Images {
			sort.Strings(c)
		}
	}
}

// Read loads and checks a lock file.
func Read(path string) (*Lock, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b, path)
}

// Parse checks a lock file's bytes; name is used in messages.
func Parse(b []byte, name string) (*Lock, error) {
	path := name
	// The version first: a lock of another format fails on it, not on a
	// field this builder does not know.
	var v struct {
		LockVersion int `json:"lockVersion"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: not a lock file: %w", path, err)
	}
	if v.LockVersion != FormatVersion {
		return nil, fmt.Errorf("%s: lock format %d, this builder reads %d (lock again: builder lock)", path, v.LockVersion, FormatVersion)
	}
	var l Lock
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("%s: not a lock file: %w", path, err)
	}
	if l.LockVersion != FormatVersion {
		return nil, fmt.Errorf("%s: lock format %d, this builder reads %d", path, l.LockVersion, FormatVersion)
	}
	for arch, a := range l.Architectures {
		have := map[string]bool{}
		for _, p := range a.Packages {
			if p.SHA256 == "" || p.Location == "" {
				return nil, fmt.Errorf("%s: %s %s is not pinned (no sha256 or location)", path, arch, p.NEVRA)
			}
			have[p.NEVRA] = true
		}
		for comp, list := range a.Components {
			for _, n := range list {
				if !have[n] {
					return nil, fmt.Errorf("%s: %s component %s names %s, which the lock does not pin", path, arch, comp, n)
				}
			}
		}
		for im, list := range a.Images {
			for _, n := range list {
				if !have[n] {
					return nil, fmt.Errorf("%s: %s image %s names %s, which the lock does not pin", path, arch, im, n)
				}
			}
		}
	}
	return &l, nil
}
