// Package oci stores OCI images, indexes and artifacts: the Store
// interface and its two implementations, a registry (Remote) and a local
// OCI image layout (Layout), with what every caller of a store needs
// around them: pushing, referrers (and the fallback tag of a registry
// without the referrers API), artifact manifests, blob checks, cosign's
// tag names and the retry policy of registry requests. It knows nothing
// of signatures or releases.
package oci

import (
	"context"
	"errors"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// ErrNotFound is returned (wrapped) when a tag or manifest does not exist.
var ErrNotFound = errors.New("not found")

// Store is where releases go: a registry under a repository prefix, or a
// local OCI image layout. Repositories are named relative to the prefix.
type Store interface {
	Reader
	Writer
}

// Reader is what verification, the audit, diff and size need of a store:
// they never write to the release they judge.
type Reader interface {
	// String names the store for messages ("registry.local:5000/nodeforge").
	String() string
	// Ref is the full reference of repo:tag or repo@digest, as users and
	// other tools (cosign, skopeo, crane) name it.
	Ref(repo, tagOrDigest string) string
	// Head returns the descriptor of repo:tag or repo@digest.
	Head(ctx context.Context, repo, ref string) (*v1.Descriptor, error)
	// Image and Index read a manifest by tag or digest.
	Image(ctx context.Context, repo, ref string) (v1.Image, error)
	Index(ctx context.Context, repo, ref string) (v1.ImageIndex, error)
	// Tags lists the tags of a repository.
	Tags(ctx context.Context, repo string) ([]string, error)
	// Referrers lists the manifests whose subject is d.
	Referrers(ctx context.Context, repo string, d v1.Hash) ([]v1.Descriptor, error)
}

// Writer is what publishing adds.
type Writer interface {
	// WriteImage uploads img's blobs that the store lacks, then its
	// manifest, tagged when tag is not empty.
	WriteImage(ctx context.Context, repo, tag string, img v1.Image) error
	// WriteIndex does the same for an index and every child.
	WriteIndex(ctx context.Context, repo, tag string, idx v1.ImageIndex) error
	// Stats says what was uploaded.
	Stats() Stats
}

// The optional capabilities of a store, asked for with a type assertion
// where a caller can use them (as io.WriterTo is): Deleter and Pruner
// (delete.go), and these.

// Pinger is a store that can say whether it answers before any work: a
// registry.
type Pinger interface {
	Ping(ctx context.Context) error
}

// BlobFiler is a store whose blobs are files: a local layout, whose blobs
// the factory serves with sendfile and ranges instead of reading them
// through the store.
type BlobFiler interface {
	BlobFile(h v1.Hash) (string, error)
}

// Stats counts what a store uploaded.
type Stats struct {
	// BlobBytes are the bytes of layer and config blobs sent; blobs the
	// store already had are not sent.
	BlobBytes int64 `json:"blobBytes"`
	// Blobs is the number of blobs sent.
	Blobs int `json:"blobs"`
	// Manifests is the number of manifests written.
	Manifests int `json:"manifests"`
}

// Manifests returns the descriptor of repo:ref in st and, when it is an
// index, the descriptors of its children (with their platforms).
func Manifests(ctx context.Context, st Reader, repo, ref string) (v1.Descriptor, []v1.Descriptor, error) {
	top, err := st.Head(ctx, repo, ref)
	if err != nil {
		return v1.Descriptor{}, nil, err
	}
	if !top.MediaType.IsIndex() {
		return *top, nil, nil
	}
	idx, err := st.Index(ctx, repo, top.Digest.String())
	if err != nil {
		return *top, nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return *top, nil, err
	}
	return *top, m.Manifests, nil
}

// digestRef reports whether ref is a digest ("sha256:...").
func digestRef(ref string) bool { return strings.HasPrefix(ref, "sha256:") }

// SigTag and AttTag are cosign's tags for the signatures and attestations
// of a manifest.
func SigTag(d v1.Hash) string { return d.Algorithm + "-" + d.Hex + ".sig" }
func AttTag(d v1.Hash) string { return d.Algorithm + "-" + d.Hex + ".att" }

// notFound wraps ErrNotFound with what was looked for.
func notFound(what string) error { return fmt.Errorf("%s: %w", what, ErrNotFound) }

// ValidTag replaces what a version may hold but a tag may not ("+", "~")
// with "_", as Helm does; an empty or too long result is refused. Callers
// tag what they write by version with it.
func ValidTag(version string) (string, error) {
	var b strings.Builder
	for i, r := range version {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		case (r == '.' || r == '-') && i > 0:
			b.WriteRune(r)
		default:
			b.WriteRune('_')
		}
	}
	if b.Len() == 0 || b.Len() > 128 {
		return "", fmt.Errorf("version %q cannot be an OCI tag (1 to 128 characters)", version)
	}
	return b.String(), nil
}

// RepoName is how a signature names repo of st (cosign's
// docker-reference): a registry's HOST/PREFIX/REPO; a local layout's REPO
// alone, for its directory is the build host's, and signatures travel
// (mirrors, archives) where that path means nothing.
func RepoName(st Store, repo string) string {
	ref := st.Ref(repo, "latest")
	name := strings.TrimSuffix(ref, ":latest")
	if loc, r, ok := strings.Cut(name, "#"); ok && strings.HasPrefix(loc, "oci") {
		return r
	}
	return name
}
