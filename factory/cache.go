package factory

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/oci"
)

const (
	// RepoArtifacts is the cache store's repository of built artifacts,
	// one artifact image each, tagged with its key.
	RepoArtifacts = "artifacts"
	// MediaTypeArtifact is the layer holding an artifact's bytes.
	MediaTypeArtifact = "application/vnd.nodeforge.factory.artifact.v1"
	// cacheFormat changes whenever an entry changes meaning.
	cacheFormat = "nodeforge factory cache v2"
)

// Annotations of a cache entry's manifest: what it is, so that a
// transfer or a collection can choose entries without their keys (a key is
// a hash).
const (
	AnnotationEntrySchematic = "dev.nodeforge.schematic"
	AnnotationEntryVersion   = "dev.nodeforge.release"
	AnnotationEntryArtifact  = "org.opencontainers.image.title"
	AnnotationEntryBuilder   = "dev.nodeforge.builder"
)

// entryInfo says what a cache entry holds.
type entryInfo struct {
	Schematic, Version, Name, Builder string
}

func (e entryInfo) annotations() map[string]string {
	return map[string]string{AnnotationEntrySchematic: e.Schematic, AnnotationEntryVersion: e.Version,
		AnnotationEntryArtifact: e.Name, AnnotationEntryBuilder: e.Builder}
}

// Stats count what the factory did, for tests and (later) metrics.
type Stats struct {
	Builds, Hits, CacheErrors int64
}

// artifactCache keeps built artifacts in the cache store, each signed by
// the factory's key before it is tagged and checked against that key and
// its digests when read: an entry that fails is a miss (logged, counted,
// built again and overwritten), never served.
type artifactCache struct {
	st     oci.Store
	signer *signing.Signer // nil: nothing is cached
	log    *slog.Logger
	hits   atomic.Int64
	errors atomic.Int64

	mu       sync.Mutex
	verified map[string]fileState // a layout's blob file -> its state when its digest last held
	damaged  map[v1.Hash]bool     // registry blobs that failed while streamed
}

// distrust marks a streamed blob that did not match its digest: its entry
// is refused (and rebuilt) from then on.
func (c *artifactCache) distrust(h v1.Hash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.damaged == nil {
		c.damaged = map[v1.Hash]bool{}
	}
	c.damaged[h] = true
}

// fileState is what changes when a file is written.
type fileState struct {
	size  int64
	mtime time.Time
}

// cachedArtifact is an artifact to serve: from a cache entry that passed
// its checks, or just built.
type cachedArtifact struct {
	sha256 v1.Hash
	size   int64
	path   string // a layout's blob file, served in place (Range, sendfile)
	// remote opens a registry's entry, streamed within the reader's
	// context (its digest checked at its end: a damaged one breaks the
	// response)
	remote func(context.Context) (io.ReadCloser, error)
	data   []byte // otherwise, the bytes
}

// open reads the artifact from its start.
func (a *cachedArtifact) open(ctx context.Context) (io.ReadCloser, error) {
	switch {
	case a.path != "":
		return os.Open(a.path)
	case a.remote != nil:
		return a.remote(ctx)
	}
	return nopSeekCloser{bytes.NewReader(a.data)}, nil
}

// seekable says whether open gives a seeker (http.ServeContent's Range).
func (a *cachedArtifact) seekable() bool { return a.remote == nil }

// bytes reads a small artifact (a command line) whole.
func (a *cachedArtifact) bytes(ctx context.Context) ([]byte, error) {
	if a.data != nil {
		return a.data, nil
	}
	if a.size > 1<<20 {
		return nil, fmt.Errorf("%d bytes: too large to read whole", a.size)
	}
	rc, err := a.open(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

type nopSeekCloser struct{ *bytes.Reader }

func (nopSeekCloser) Close() error { return nil }

// builtArtifact is an artifact just composed, served from memory.
func builtArtifact(data []byte) *cachedArtifact {
	return &cachedArtifact{sha256: digest.OCI(data), size: int64(len(data)), data: data}
}

// key names an artifact: the schematic, every verified digest of the
// release, the artifact's name and the builder that composes it.
func cacheKey(rel *Release, schematicID, name, builder string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", cacheFormat, schematicID, name, builder)
	for _, repo := range slices.Sorted(maps.Keys(rel.digests)) {
		fmt.Fprintf(h, "%s=%s\x00", repo, rel.digests[repo])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// get returns the cached artifact of key, or not ok; refused says an
// entry was there and failed its checks. An entry in a local layout is
// served from its blob file, whose digest is checked once per state of
// the file (a file written since is checked again); any other is read.
func (c *artifactCache) get(ctx context.Context, key string) (a *cachedArtifact, ok, refused bool) {
	if c.signer == nil {
		return nil, false, false
	}
	img, err := c.st.Image(ctx, RepoArtifacts, key)
	if errors.Is(err, oci.ErrNotFound) {
		return nil, false, false // not cached
	}
	if err == nil {
		a, err = c.read(ctx, img)
	}
	if err != nil {
		c.errors.Add(1)
		c.log.Warn("cache entry refused: building it again", "key", key, "err", err)
		return nil, false, true
	}
	c.hits.Add(1)
	return a, true, false
}

func (c *artifactCache) read(ctx context.Context, img v1.Image) (*cachedArtifact, error) {
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	_, sigs, err := signing.ReadSigs(ctx, c.st, RepoArtifacts, oci.SigTag(d))
	if err != nil {
		return nil, err
	}
	signed := false
	for _, l := range sigs {
		if signing.CheckSignatureLayer(c.signer.Verifier(), l, d) == nil {
			signed = true
			break
		}
	}
	if !signed {
		return nil, errors.New("no signature by the factory's key")
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	if len(m.Layers) != 1 {
		return nil, fmt.Errorf("%d layers, want one", len(m.Layers))
	}
	ld := m.Layers[0]
	if lay, ok := c.st.(*oci.Layout); ok {
		path, err := lay.BlobFile(ld.Digest)
		if err != nil {
			return nil, err
		}
		if err := c.checkFile(path, ld); err != nil {
			return nil, err
		}
		return &cachedArtifact{sha256: ld.Digest, size: ld.Size, path: path}, nil
	}
	// Streamed to each client: its bytes are checked against the digest
	// as they are read.
	c.mu.Lock()
	damaged := c.damaged[ld.Digest]
	c.mu.Unlock()
	if damaged {
		return nil, fmt.Errorf("blob %s failed its digest when last read", ld.Digest)
	}
	// Opened anew by each reader: what read it here ends with the build's
	// context.
	st := c.st
	remote := func(ctx context.Context) (io.ReadCloser, error) {
		img, err := st.Image(ctx, RepoArtifacts, d.String())
		if err != nil {
			return nil, err
		}
		l, err := img.LayerByDigest(ld.Digest)
		if err != nil {
			return nil, err
		}
		return l.Compressed()
	}
	return &cachedArtifact{sha256: ld.Digest, size: ld.Size, remote: remote}, nil
}

// checkFile hashes a blob file unless it is unchanged since it last
// matched its descriptor.
func (c *artifactCache) checkFile(path string, d v1.Descriptor) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	st := fileState{size: fi.Size(), mtime: fi.ModTime()}
	c.mu.Lock()
	ok := c.verified[path] == st
	c.mu.Unlock()
	if ok && st.size == d.Size {
		return nil
	}
	if err := checkBlob(func() (io.ReadCloser, error) { return os.Open(path) }, d); err != nil {
		return err
	}
	c.mu.Lock()
	if c.verified == nil {
		c.verified = map[string]fileState{}
	}
	c.verified[path] = st
	c.mu.Unlock()
	return nil
}

// put stores data under key: the image first, untagged, then its
// signature, then the tag, so no tag ever names an unsigned entry.
func (c *artifactCache) put(ctx context.Context, key string, e entryInfo, data []byte) error {
	if c.signer == nil {
		return nil
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer: static.NewLayer(data, MediaTypeArtifact), Annotations: map[string]string{"org.opencontainers.image.title": e.Name}})
	if err != nil {
		return err
	}
	img = mutate.ConfigMediaType(img, types.MediaType(MediaTypeArtifact))
	img = mutate.Annotations(img, e.annotations()).(v1.Image)
	var d v1.Hash
	if d, err = img.Digest(); err != nil {
		return err
	}
	if err := c.st.WriteImage(ctx, RepoArtifacts, "", img); err != nil {
		return err
	}
	if _, err := c.signer.Sign(ctx, c.st, RepoArtifacts, d); err != nil {
		return err
	}
	return c.st.WriteImage(ctx, RepoArtifacts, key, img)
}
