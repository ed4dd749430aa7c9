package repo

import (
	"context"
	"errors"
	"fmt"

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
	Components         []string // ALT only
	Source             SourceOptions
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
	switch format {
	case FormatALT:
		r, err := LoadALT(ctx, src, ALTOptions{Keyring: opts.Keyring, InsecureSkipVerify: opts.InsecureSkipVerify, Components: opts.Components})
		if err != nil {
			return nil, err
		}
		return &Loaded{Format: format, URL: src.URL(), Source: src, ReleasePath: "base/release", ReleaseSHA256: r.ReleaseHash,
			Indexes: r.Indexes, Signers: r.Signers, Packages: r.Packages}, nil
	case FormatRPMMD:
		l := &Loaded{Format: format, URL: src.URL(), Source: src, ReleasePath: "repodata/repomd.xml"}
		raw, err := readSource(ctx, src, "repodata/repomd.xml", 64<<20)
		if err != nil {
			return nil, err
		}
		l.ReleaseSHA256 = sha256Hex(raw)
		if !opts.InsecureSkipVerify {
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
		pkgs, err := LoadRPMMD(ctx, src, LoadOptions{Filelists: true})
		if err != nil {
			return nil, err
		}
		l.Packages = pkgs
		return l, nil
	}
	return nil, fmt.Errorf("unknown repository format %q (want alt or rpm-md)", format)
}
