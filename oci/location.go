package oci

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Kind is the kind of place a Location names.
type Kind string

const (
	// KindRegistry is docker://HOST[:PORT][/PREFIX].
	KindRegistry Kind = "registry"
	// KindLayout is oci:DIR, a local OCI image layout (or, for mirrors, an
	// archive directory).
	KindLayout Kind = "layout"
	// KindArchive is oci-archive:FILE, a mirror archive (a tar, maybe in
	// parts FILE.000, FILE.001, ...).
	KindArchive Kind = "archive"
)

// Location is where releases live, as a user writes it on a command line
// or in a configuration file:
//
//	docker://HOST[:PORT][/PREFIX]   a registry, the repositories under PREFIX
//	oci:DIR                         a local OCI image layout
//	oci-archive:FILE                a mirror archive
//
// Any of them may name one image with #REPO:TAG or #REPO@sha256:...; a
// registry image may also be written docker://HOST[:PORT]/PREFIX/REPO:TAG.
// Every command parses locations here, so that each form means the same
// everywhere.
type Location struct {
	Kind Kind
	// Path is HOST[:PORT][/PREFIX], DIR or FILE.
	Path string
	// Repo and Ref name one image (Ref is a tag or a sha256 digest); both
	// are empty for the whole store.
	Repo, Ref string
}

// String is the location as it would be written.
func (l Location) String() string {
	s := map[Kind]string{KindRegistry: "docker://", KindLayout: "oci:", KindArchive: "oci-archive:"}[l.Kind] + l.Path
	switch {
	case l.Repo == "":
		return s
	case strings.HasPrefix(l.Ref, "sha256:"):
		return s + "#" + l.Repo + "@" + l.Ref
	default:
		return s + "#" + l.Repo + ":" + l.Ref
	}
}

// ParseLocation reads a location. A bare word (no scheme) is a layout when
// it is a directory holding index.json, and a registry when it starts with
// a host name (one with a dot or a port, or localhost) and nothing of that
// name is on disk; anything else is refused with the form to write, so a
// mistyped directory never becomes a network request. The image part
// starts at the first '#': a path holding '#' is not a location.
func ParseLocation(s string) (Location, error) {
	const forms = "docker://HOST[:PORT]/PREFIX, oci:DIR or oci-archive:FILE"
	var l Location
	rest, image, hasImage := strings.Cut(s, "#")
	switch {
	case strings.HasPrefix(rest, "docker://"):
		l.Kind, l.Path = KindRegistry, strings.TrimSuffix(strings.TrimPrefix(rest, "docker://"), "/")
	case strings.HasPrefix(rest, "oci-archive:"):
		l.Kind, l.Path = KindArchive, strings.TrimPrefix(rest, "oci-archive:")
	case strings.HasPrefix(rest, "oci:"):
		l.Kind, l.Path = KindLayout, strings.TrimPrefix(rest, "oci:")
	default:
		if err := bareHint(rest); err != nil {
			return Location{}, err
		}
		if fi, err := os.Stat(filepath.Join(rest, "index.json")); err == nil && fi.Mode().IsRegular() {
			l.Kind, l.Path = KindLayout, rest
			break
		}
		host, _, _ := strings.Cut(rest, "/")
		if _, _, err := ParseTarget(rest); err != nil || !strings.ContainsAny(host, ".:") && host != "localhost" {
			return Location{}, fmt.Errorf("%q: no such directory here; want %s", s, forms)
		}
		l.Kind, l.Path = KindRegistry, strings.TrimSuffix(rest, "/")
	}
	if l.Path == "" {
		return Location{}, fmt.Errorf("%q names no %s: want %s", s, map[Kind]string{KindRegistry: "registry", KindLayout: "directory", KindArchive: "file"}[l.Kind], forms)
	}
	if hasImage {
		repo, ref, ok := SplitImageRef(image)
		if !ok {
			return Location{}, fmt.Errorf("%q: after # want REPO:TAG or REPO@sha256:...", s)
		}
		l.Repo, l.Ref = repo, ref
	}
	if l.Kind == KindRegistry {
		if _, _, err := ParseTarget(l.Path); err != nil {
			return Location{}, err
		}
	}
	return l, nil
}

// ParseImageLocation reads a location that names one image: the forms of
// ParseLocation with #REPO:TAG, or docker://HOST[:PORT]/PREFIX/REPO:TAG
// (docker:// may be left out, as for ParseLocation).
func ParseImageLocation(s string) (Location, error) {
	if !strings.Contains(s, "#") && !strings.HasPrefix(s, "oci:") && !strings.HasPrefix(s, "oci-archive:") {
		full, ref, ok := SplitImageRef(strings.TrimPrefix(s, "docker://"))
		if i := strings.LastIndex(full, "/"); ok && i > 0 {
			l, err := ParseLocation("docker://" + full[:i])
			if err != nil {
				return Location{}, err
			}
			l.Repo, l.Ref = full[i+1:], ref
			return l, nil
		}
	}
	l, err := ParseLocation(s)
	if err != nil {
		return Location{}, err
	}
	if l.Repo == "" {
		return Location{}, fmt.Errorf("%q names no image: want %s#REPO:TAG or #REPO@sha256:... (or docker://HOST[:PORT]/REPO:TAG)", s, l)
	}
	return l, nil
}

// SplitImageRef splits "repo:tag" or "repo@sha256:..." (a port in a host
// part is not a tag).
func SplitImageRef(s string) (repo, ref string, ok bool) {
	if r, d, found := strings.Cut(s, "@"); found {
		return r, d, r != "" && strings.HasPrefix(d, "sha256:")
	}
	i := strings.LastIndex(s, ":")
	if i < 0 || strings.Contains(s[i:], "/") {
		return "", "", false
	}
	return s[:i], s[i+1:], s[:i] != "" && s[i+1:] != ""
}

// bareHint says which form was meant when a bare word is a directory or a
// file here.
func bareHint(p string) error {
	fi, err := os.Stat(p)
	switch {
	case err == nil && fi.IsDir():
		if _, err := os.Stat(filepath.Join(p, "index.json")); err == nil {
			return nil // a layout: taken as oci:DIR
		}
		return fmt.Errorf("%s is a directory here: write oci:%s for an OCI layout (a registry is docker://HOST[:PORT]/PREFIX)", p, p)
	case err == nil:
		return fmt.Errorf("%s is a file here: write oci-archive:%s for a mirror archive (a registry is docker://HOST[:PORT]/PREFIX)", p, p)
	}
	if _, err := os.Stat(p + ".000"); err == nil {
		return fmt.Errorf("%s.000 is the first part of a split archive here: write oci-archive:%s", p, p)
	}
	return nil
}

// OpenOptions are how Open reaches a registry.
type OpenOptions struct {
	Remote RemoteOptions
	// Create makes a layout that does not exist yet (a store to write to).
	Create bool
}

// Open opens the store of a registry or layout location; an archive is
// opened by the release package, which checks its seal.
func Open(l Location, o OpenOptions) (Store, error) {
	switch l.Kind {
	case KindRegistry:
		return NewRemote(l.Path, o.Remote)
	case KindLayout:
		if o.Create {
			return CreateLayout(l.Path)
		}
		if _, err := os.Stat(l.Path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: directory %s does not exist; a registry is docker://HOST[:PORT]/PREFIX", l, l.Path)
		}
		if _, err := os.Stat(filepath.Join(l.Path, "index.json")); err != nil {
			return nil, fmt.Errorf("%s: not an OCI layout (no index.json); a registry is docker://HOST[:PORT]/PREFIX", l)
		}
		return OpenLayout(l.Path)
	}
	return nil, fmt.Errorf("%s: an archive is not a store: open it with its seal checked", l)
}
