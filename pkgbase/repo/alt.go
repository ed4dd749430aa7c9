package repo

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/crypto/blake2b"

	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/keyring"
	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// ReleaseFile is one checksum line of an apt-rpm release file.
type ReleaseFile struct {
	Hash string // hex
	Size int64
	Path string // e.g. "base/pkglist.classic.xz"
}

// BaseRelease is a parsed apt-rpm `base/release` file.
type BaseRelease struct {
	Fields     map[string]string // Origin, Label, Suite, Codename, Date, ...
	Components []string
	Archs      []string
	MD5        map[string]ReleaseFile
	BLAKE2b    map[string]ReleaseFile
	Signed     []byte   // the bytes the signatures cover
	Signatures [][]byte // armored detached signature blocks
}

const sigBegin = "-----BEGIN PGP SIGNATURE-----"

// ParseRelease parses a release file. The signed part is everything before
// the first line starting with the signature armor.
func ParseRelease(b []byte) (*BaseRelease, error) {
	r := &BaseRelease{Fields: map[string]string{}, MD5: map[string]ReleaseFile{}, BLAKE2b: map[string]ReleaseFile{}}
	signed := b
	if i := indexLine(b, sigBegin); i >= 0 {
		signed = b[:i]
		rest := b[i:]
		for len(rest) > 0 {
			end := bytes.Index(rest, []byte("-----END PGP SIGNATURE-----"))
			if end < 0 {
				return nil, errors.New("release: unterminated PGP signature block")
			}
			end += len("-----END PGP SIGNATURE-----")
			r.Signatures = append(r.Signatures, rest[:end])
			rest = rest[end:]
			next := indexLine(rest, sigBegin)
			if next < 0 {
				if len(bytes.TrimSpace(rest)) > 0 {
					return nil, errors.New("release: unexpected data after the signature")
				}
				break
			}
			rest = rest[next:]
		}
	}
	r.Signed = signed
	var section map[string]ReleaseFile
	for n, line := range strings.Split(string(signed), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if section == nil {
				continue // continuation of an ordinary field
			}
			f := strings.Fields(line)
			if len(f) != 3 {
				return nil, fmt.Errorf("release line %d: checksum line needs hash, size and path: %q", n+1, line)
			}
			size, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || size < 0 {
				return nil, fmt.Errorf("release line %d: bad size %q", n+1, f[1])
			}
			if _, err := hex.DecodeString(f[0]); err != nil {
				return nil, fmt.Errorf("release line %d: bad hash %q", n+1, f[0])
			}
			section[f[2]] = ReleaseFile{Hash: strings.ToLower(f[0]), Size: size, Path: f[2]}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("release line %d: not a field: %q", n+1, line)
		}
		v = strings.TrimSpace(v)
		section = nil
		switch k {
		case "MD5Sum":
			section = r.MD5
		case "BLAKE2b":
			section = r.BLAKE2b
		case "Components":
			r.Components = strings.Fields(v)
		case "Architectures":
			r.Archs = strings.Fields(v)
		}
		if section == nil {
			r.Fields[k] = v
		}
	}
	return r, nil
}

func indexLine(b []byte, prefix string) int {
	if bytes.HasPrefix(b, []byte(prefix)) {
		return 0
	}
	i := bytes.Index(b, []byte("\n"+prefix))
	if i < 0 {
		return -1
	}
	return i + 1
}

// Verify checks the release's detached signatures against kr and returns
// the fingerprints of the keys that verified. At least one must.
func (r *BaseRelease) Verify(kr *keyring.Keyring) ([]string, error) {
	if len(r.Signatures) == 0 {
		return nil, errors.New("release is not signed")
	}
	var fps, errs []string
	for _, s := range r.Signatures {
		fp, err := kr.VerifyDetached(r.Signed, s)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		fps = append(fps, fp)
	}
	if len(fps) == 0 {
		return nil, fmt.Errorf("release signature does not verify: %s", strings.Join(errs, "; "))
	}
	sort.Strings(fps)
	return fps, nil
}

// Expect returns the checksum line for path, preferring BLAKE2b over MD5.
func (r *BaseRelease) Expect(path string) (ReleaseFile, string, bool) {
	if f, ok := r.BLAKE2b[path]; ok {
		return f, "blake2b", true
	}
	if f, ok := r.MD5[path]; ok {
		return f, "md5", true
	}
	return ReleaseFile{}, "", false
}

// ALTOptions tunes LoadALT.
type ALTOptions struct {
	// Keyring verifies base/release. Required unless InsecureSkipVerify.
	Keyring *keyring.Keyring
	// InsecureSkipVerify accepts an unsigned or unverifiable release; index
	// hashes are still checked against it.
	InsecureSkipVerify bool
	// Components narrows the components read; empty means all the release lists.
	Components []string
	// IndexCache is a directory of parsed indexes (AnyOptions.IndexCache);
	// "" keeps none.
	IndexCache string
	// IndexCacheAsync is AnyOptions.IndexCacheAsync.
	IndexCacheAsync bool
}

// IndexInfo records one index file as loaded, for the lock file.
type IndexInfo struct {
	Path      string `json:"path"`
	Algorithm string `json:"algorithm"`
	Hash      string `json:"hash"`
	Size      int64  `json:"size"`
}

// ALTRepo is a loaded apt-rpm repository (one dist, e.g. p11/branch/x86_64).
type ALTRepo struct {
	URL          string
	Release      *BaseRelease
	ReleaseHash  string   // sha256 of the release file as fetched
	Signers      []string // fingerprints that verified the release
	Indexes      []IndexInfo
	Packages     []*Package
	ReleaseBytes []byte
}

// LoadALT reads base/release, checks its signature, then reads each
// component's pkglist and checks its size and hash against the release
// before parsing it.
func LoadALT(ctx context.Context, src Source, opts ALTOptions) (*ALTRepo, error) {
	raw, err := readSource(ctx, src, "base/release", 16<<20)
	if err != nil {
		return nil, err
	}
	rel, err := ParseRelease(raw)
	if err != nil {
		return nil, fmt.Errorf("%s/base/release: %w", src.URL(), err)
	}
	repo := &ALTRepo{URL: src.URL(), Release: rel, ReleaseBytes: raw, ReleaseHash: digest.SHA256Hex(raw)}
	if !opts.InsecureSkipVerify {
		if opts.Keyring == nil || opts.Keyring.Len() == 0 {
			return nil, fmt.Errorf("%s/base/release: no keyring to verify it with (give one, or skip verification explicitly)", src.URL())
		}
		if repo.Signers, err = rel.Verify(opts.Keyring); err != nil {
			return nil, fmt.Errorf("%s/base/release: %w", src.URL(), err)
		}
	}
	comps := opts.Components
	if len(comps) == 0 {
		comps = rel.Components
	}
	if len(comps) == 0 {
		return nil, fmt.Errorf("%s/base/release lists no components", src.URL())
	}
	// The release was verified (or its verification skipped) above: the
	// indexes parsed under it may be reused.
	key := indexCacheKey(FormatALT, repo.ReleaseHash, comps...)
	if ci, ok := readIndexCache(opts.IndexCache, key, src.URL()); ok {
		repo.Packages, repo.Indexes = ci.Packages, ci.Indexes
		return repo, nil
	}
	for _, comp := range comps {
		pkgs, idx, err := loadPkglist(ctx, src, rel, comp)
		if err != nil {
			return nil, err
		}
		repo.Packages = append(repo.Packages, pkgs...)
		repo.Indexes = append(repo.Indexes, idx)
	}
	SortPackages(repo.Packages)
	storeIndexCache(opts.IndexCache, opts.IndexCacheAsync, key, src.URL(), &cachedIndex{Packages: repo.Packages, Indexes: repo.Indexes, FullFiles: true})
	return repo, nil
}

func loadPkglist(ctx context.Context, src Source, rel *BaseRelease, comp string) ([]*Package, IndexInfo, error) {
	plain := "base/pkglist." + comp
	var lastErr error
	for _, ext := range []string{".xz", ".bz2"} {
		name := plain + ext
		want, algo, listed := rel.Expect(name)
		wantPlain, algoPlain, listedPlain := rel.Expect(plain)
		if !listed && !listedPlain {
			lastErr = fmt.Errorf("%s/base/release lists neither %s nor %s", src.URL(), name, plain)
			continue
		}
		rc, err := src.Open(ctx, name)
		if errors.Is(err, ErrNotFound) {
			lastErr = err
			continue
		}
		if err != nil {
			return nil, IndexInfo{}, err
		}
		defer rc.Close()
		where := src.URL() + "/" + name
		// Check the compressed bytes when the release lists them.
		var compressed io.Reader = rc
		var cv *verifyingReader
		if listed {
			cv = newVerifyingReader(rc, algo, want.Size, where)
			compressed = cv
		}
		dr, err := Decompress(name, compressed)
		if err != nil {
			return nil, IndexInfo{}, fmt.Errorf("%s: %w", where, err)
		}
		defer dr.Close()
		var plainR io.Reader = dr
		var pv *verifyingReader
		if listedPlain {
			pv = newVerifyingReader(dr, algoPlain, wantPlain.Size, where+" (decompressed)")
			plainR = pv
		}
		var pkgs []*Package
		for {
			h, err := rpmhdr.ReadHeader(plainR)
			if errors.Is(err, rpmhdr.ErrNoMoreHeaders) {
				break
			}
			if err != nil {
				// A size or hash failure explains a parse failure best:
				// read the compressed file to its end and check it.
				if cv != nil {
					io.Copy(io.Discard, compressed)
					if ferr := cv.finish(want.Hash); ferr != nil {
						return nil, IndexInfo{}, ferr
					}
				}
				if pv != nil && pv.err != nil {
					return nil, IndexInfo{}, pv.err
				}
				return nil, IndexInfo{}, fmt.Errorf("%s: entry %d: %w", where, len(pkgs)+1, err)
			}
			p, err := PackageFromHeader(h, evr.ALT)
			if err != nil {
				return nil, IndexInfo{}, fmt.Errorf("%s: entry %d: %w", where, len(pkgs)+1, err)
			}
			if p.Location == "" {
				return nil, IndexInfo{}, fmt.Errorf("%s: entry %s has no CRPMTAG_FILENAME", where, p.NEVRA())
			}
			p.Repo = src.URL()
			pkgs = append(pkgs, p)
		}
		// Drain and check the compressed stream to its end.
		if _, err := io.Copy(io.Discard, compressed); err != nil {
			return nil, IndexInfo{}, fmt.Errorf("%s: %w", where, err)
		}
		dr.Close()
		info := IndexInfo{}
		if pv != nil {
			if err := pv.finish(wantPlain.Hash); err != nil {
				return nil, IndexInfo{}, err
			}
			info = IndexInfo{Path: plain, Algorithm: algoPlain, Hash: wantPlain.Hash, Size: wantPlain.Size}
		}
		if cv != nil {
			if err := cv.finish(want.Hash); err != nil {
				return nil, IndexInfo{}, err
			}
			info = IndexInfo{Path: name, Algorithm: algo, Hash: want.Hash, Size: want.Size}
		}
		return pkgs, info, nil
	}
	return nil, IndexInfo{}, fmt.Errorf("component %s: %w", comp, lastErr)
}

// verifyingReader hashes what passes through and refuses to read past the
// expected size, so an oversized index fails early.
type verifyingReader struct {
	r     io.Reader
	h     hash.Hash
	n     int64
	size  int64
	where string
	algo  string
	err   error
}

func newVerifyingReader(r io.Reader, algo string, size int64, where string) *verifyingReader {
	v := &verifyingReader{r: r, size: size, where: where, algo: algo}
	if algo == "blake2b" {
		v.h, _ = blake2b.New512(nil)
	} else {
		v.h = md5.New()
	}
	return v
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.n += int64(n)
	v.h.Write(p[:n])
	if v.n > v.size {
		v.err = fmt.Errorf("%s: size differs from the release: more than %d bytes", v.where, v.size)
		return n, v.err
	}
	if err == io.EOF && v.n != v.size {
		v.err = fmt.Errorf("%s: size differs from the release: %d bytes, release says %d", v.where, v.n, v.size)
		return n, v.err
	}
	return n, err
}

func (v *verifyingReader) finish(want string) error {
	if v.err != nil {
		return v.err
	}
	if v.n != v.size {
		return fmt.Errorf("%s: size differs from the release: %d bytes, release says %d", v.where, v.n, v.size)
	}
	if got := hex.EncodeToString(v.h.Sum(nil)); got != want {
		return fmt.Errorf("%s: %s hash differs from the release: got %s, release says %s", v.where, v.algo, got, want)
	}
	return nil
}

func readSource(ctx context.Context, src Source, rel string, limit int64) ([]byte, error) {
	rc, err := src.Open(ctx, rel)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", src.URL(), rel, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s/%s: larger than %d bytes", src.URL(), rel, limit)
	}
	return b, nil
}

// SortPackages orders packages by name, version label, arch and location,
// so every listing is deterministic.
func SortPackages(ps []*Package) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if c := evr.Compare(a.Semantics, a.EVR, b.EVR); c != 0 {
			return c < 0
		}
		if a.EVR.Disttag != b.EVR.Disttag {
			return a.EVR.Disttag < b.EVR.Disttag
		}
		if a.Arch != b.Arch {
			return a.Arch < b.Arch
		}
		if a.Repo != b.Repo {
			return a.Repo < b.Repo
		}
		return a.Location < b.Location
	})
}
