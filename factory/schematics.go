package factory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/oci"
)

const (
	// RepoSchematics is the cache store's repository of schematics: one
	// artifact per schematic, tagged with its ID, so every replica and
	// instance on the store sees them.
	RepoSchematics = "schematics"
	// MediaTypeSchematic is the layer holding a schematic's canonical YAML.
	MediaTypeSchematic = "application/vnd.nodeforge.schematic.v1+yaml"
	// maxSchematic bounds a stored schematic read back.
	maxSchematic = 64 << 10
)

// errUnknownSchematic: no schematic has that ID.
var errUnknownSchematic = errors.New("no such schematic")

// schematics keeps schematics in the cache store, with the ones seen in
// memory.
type schematics struct {
	st   oci.Store
	mu   sync.Mutex
	seen map[string]*schematic.Schematic
}

// put stores s under its ID and returns the ID.
func (c *schematics) put(ctx context.Context, s *schematic.Schematic) (string, error) {
	id, err := s.ID()
	if err != nil {
		return "", err
	}
	if _, err := c.get(ctx, id); err == nil {
		return id, nil
	}
	canon, err := s.Canonical()
	if err != nil {
		return "", err
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer: static.NewLayer(canon, MediaTypeSchematic)})
	if err != nil {
		return "", err
	}
	img = mutate.ConfigMediaType(img, types.MediaType(MediaTypeSchematic))
	if err := c.st.WriteImage(ctx, RepoSchematics, id, img); err != nil {
		return "", fmt.Errorf("storing schematic %s: %w", id, err)
	}
	c.remember(id, s)
	return id, nil
}

// get returns the schematic with that ID, errUnknownSchematic when there
// is none. A stored schematic whose content does not have its ID is
// refused.
func (c *schematics) get(ctx context.Context, id string) (*schematic.Schematic, error) {
	c.mu.Lock()
	s := c.seen[id]
	c.mu.Unlock()
	if s != nil {
		return s, nil
	}
	img, err := c.st.Image(ctx, RepoSchematics, id)
	if errors.Is(err, oci.ErrNotFound) {
		return nil, errUnknownSchematic
	}
	if err != nil {
		return nil, err
	}
	data, err := onlyLayer(img, maxSchematic)
	if err != nil {
		return nil, fmt.Errorf("schematic %s: %w", id, err)
	}
	if s, err = schematic.Parse(data); err != nil {
		return nil, fmt.Errorf("stored schematic %s: %w", id, err)
	}
	if got, err := s.ID(); err != nil || got != id {
		return nil, fmt.Errorf("stored schematic %s has the ID %s: damaged or tampered", id, got)
	}
	c.remember(id, s)
	return s, nil
}

func (c *schematics) remember(id string, s *schematic.Schematic) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]*schematic.Schematic{}
	}
	c.seen[id] = s
}

// onlyLayerReader opens the single layer of an image: as stored (an
// artifact's file), or uncompressed (a tar layer).
func onlyLayerReader(img v1.Image, stored bool) (io.ReadCloser, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) != 1 {
		return nil, fmt.Errorf("%d layers, want one", len(layers))
	}
	if stored {
		return layers[0].Compressed()
	}
	return layers[0].Uncompressed()
}

// onlyLayer reads the single layer of an artifact, as stored.
func onlyLayer(img v1.Image, limit int64) ([]byte, error) {
	rc, err := onlyLayerReader(img, true)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}
