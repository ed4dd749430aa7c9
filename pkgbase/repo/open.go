package repo

import (
	"context"
	"errors"
	"fmt"

	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/pkgbase/keyring"
)

// Formats.
const (
	FormatALT   = "alt"
	FormatRPMMD = "rpm-md"
)

// AnyOptions tunes Load.
type AnyOptions struct {
	Format             string // "", "alt" or "rpm-md"; "" detects
	Keyring            *keyring.Keyring
	InsecureSkipVerify bool
	// UnsignedIndex (rpm-md only) reads repomd.xml without a signature:
	// the caller verifies every package's signature with Keyring instead
	// (a spec's verify: packages), so a keyring is still required.
	UnsignedIndex bool
	Components    []string // ALT only
	Source        SourceOptions
	// IndexCache is a directory that keeps parsed indexes, keyed by the
	// digest of the release file (base/release, repodata/repomd.xml) they
	// came from: a repository whose release is unchanged is read from it
	// instead of parsing its indexes again. "" keeps none.
	IndexCache string
	// IndexCacheAsync writes a new entry on a goroutine of its own while
	// the caller goes on with the packages: the caller must not modify
	// them, and must call WaitIndexCache before it exits.
	IndexCacheAsync bool
}

// Loaded is a repository read by Load.
type Loaded struct {
	Format        string
	URL           string
	Source        Source
	ReleasePath   string // base/release or repodata/repomd.xml
	ReleaseSHA256 string
	Indexes       []IndexInfo
	Signers       []string
	Packages      []*Package
	// FullFiles reports that each package's Files is its full list (ALT:
	// the index's stripped list, always; rpm-md: with filelists metadata);
	// otherwise only primary.xml's subset (PrimaryFile) is known.
	FullFiles bool
}

// Detect tells an ALT dist (base/release) from an rpm-md repository
// (repodata/repomd.xml).
func Detect(ctx context.Context, src Source) (string, error) {
	if rc, err := src.Open(ctx, "base/release"); err == nil {
		rc.Close()
		return FormatALT, nil
	} else if !errors.Is(err, ErrNotFound) {
		return "", err
	}
	if rc, err := src.Open(ctx, "repodata/repomd.xml"); err == nil {
		rc.Close()
		return FormatRPMMD, nil
	} else if !errors.Is(err, ErrNotFound) {
		return "", err
	}
	return "", fmt.Errorf("%s: neither an ALT dist (no base/release) nor an rpm-md repository (no repodata/repomd.xml)", src.URL())
}

// Load opens and reads a repository of either format, verifying it.
func Load(ctx context.Context, location string, opts AnyOptions) (*Loaded, error) {
	src, err := NewSource(location, opts.Source)
	if err != nil {
		return nil, err
	}
	format := opts.Format
	if format == "" {
		if format, err = Detect(ctx, src); err != nil {
			return nil, err
		}
	}
	if opts.UnsignedIndex && format != FormatRPMMD {
		return nil, fmt.Errorf("%s: only an rpm-md repository may have an unsigned index (this is %s)", src.URL(), format)
	}
	switch format {
	case FormatALT:
		r, err := LoadALT(ctx, src, ALTOptions{Keyring: opts.Keyring, InsecureSkipVerify: opts.InsecureSkipVerify, Components: opts.Components,
			IndexCache: opts.IndexCache, IndexCacheAsync: opts.IndexCacheAsync})
		if err != nil {
			return nil, err
		}
		return &Loaded{Format: format, URL: src.URL(), Source: src, ReleasePath: "base/release", ReleaseSHA256: r.ReleaseHash,
			Indexes: r.Indexes, Signers: r.Signers, Packages: r.Packages, FullFiles: true}, nil
	case FormatRPMMD:
		l := &Loaded{Format: format, URL: src.URL(), Source: src, ReleasePath: "repodata/repomd.xml"}
		raw, err := readSource(ctx, src, RepomdPath, maxRepomdSize)
		if err != nil {
			return nil, err
		}
		l.ReleaseSHA256 = digest.SHA256Hex(raw)
		if opts.UnsignedIndex && (opts.Keyring == nil || opts.Keyring.Len() == 0) {
			return nil, fmt.Errorf("%s: no keyring to verify its packages with", src.URL())
		}
		if !opts.InsecureSkipVerify && !opts.UnsignedIndex {
			if opts.Keyring == nil || opts.Keyring.Len() == 0 {
				return nil, fmt.Errorf("%s/repodata/repomd.xml: no keyring to verify it with (give one, or skip verification explicitly)", src.URL())
			}
			sig, err := readSource(ctx, src, "repodata/repomd.xml.asc", 1<<20)
			if err != nil {
				return nil, fmt.Errorf("%s/repodata/repomd.xml is not signed: %w", src.URL(), err)
			}
			fp, err := opts.Keyring.VerifyDetached(raw, sig)
			if err != nil {
				return nil, fmt.Errorf("%s/repodata/repomd.xml: %w", src.URL(), err)
			}
			l.Signers = []string{fp}
		}
		// The index was verified (or its verification skipped) above:
		// what was parsed from the files it lists may be reused.
		key := indexCacheKey(FormatRPMMD, l.ReleaseSHA256, "filelists")
		if ci, ok := readIndexCache(opts.IndexCache, key, src.URL()); ok {
			l.Packages, l.FullFiles = ci.Packages, ci.FullFiles
			return l, nil
		}
		md, err := readRPMMD(ctx, src, raw, LoadOptions{Filelists: true})
		if err != nil {
			return nil, err
		}
		l.Packages, l.FullFiles = md.Packages, md.FullFiles
		storeIndexCache(opts.IndexCache, opts.IndexCacheAsync, key, src.URL(), &cachedIndex{Packages: md.Packages, FullFiles: md.FullFiles})
		return l, nil
	}
	return nil, fmt.Errorf("unknown repository format %q (want alt or rpm-md)", format)
}
