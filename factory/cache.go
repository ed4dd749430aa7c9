package factory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/oci"
)

const (
	// RepoArtifacts is the cache store's repository of built artifacts,
	// one artifact image each, tagged with its key.
	RepoArtifacts = "artifacts"
	// MediaTypeArtifact is the layer holding an artifact's bytes.
	MediaTypeArtifact = "application/vnd.nodeforge.factory.artifact.v1"
	// cacheFormat changes whenever an entry changes meaning.
	cacheFormat = "nodeforge factory cache v1"
)

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

// get returns the cached bytes of key, or not ok; refused says an entry
// was there and failed its checks.
func (c *artifactCache) get(ctx context.Context, key string) (data []byte, ok, refused bool) {
	if c.signer == nil {
		return nil, false, false
	}
	img, err := c.st.Image(ctx, RepoArtifacts, key)
	if errors.Is(err, oci.ErrNotFound) {
		return nil, false, false // not cached
	}
	if err == nil {
		data, err = c.read(ctx, img)
	}
	if err != nil {
		c.errors.Add(1)
		c.log.Warn("cache entry refused: building it again", "key", key, "err", err)
		return nil, false, true
	}
	c.hits.Add(1)
	return data, true, false
}

func (c *artifactCache) read(ctx context.Context, img v1.Image) ([]byte, error) {
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
	// The layer's bytes are checked against its digest as they are read.
	return onlyLayer(img, maxAsset)
}

// put stores data under key: the image first, untagged, then its
// signature, then the tag, so no tag ever names an unsigned entry.
func (c *artifactCache) put(ctx context.Context, key, name string, data []byte) error {
	if c.signer == nil {
		return nil
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer: static.NewLayer(data, MediaTypeArtifact), Annotations: map[string]string{"org.opencontainers.image.title": name}})
	if err != nil {
		return err
	}
	img = mutate.ConfigMediaType(img, types.MediaType(MediaTypeArtifact))
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
