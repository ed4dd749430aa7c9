package factory

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/oci"
)

const (
	// RepoSchematics is the cache store's repository of schematics: one
	// artifact per schematic, tagged with its ID, so every replica and
	// instance on the store sees them.
	RepoSchematics = "schematics"
	// MediaTypeSchematic is the layer holding a schematic: the document
	// as posted (or its canonical YAML), which parses to its ID.
	MediaTypeSchematic = "application/vnd.nodeforge.schematic.v1+yaml"
	// maxSchematic bounds a stored schematic read back.
	maxSchematic = 64 << 10
)

// ErrUnknownSchematic: no schematic has that ID.
var ErrUnknownSchematic = errors.New("no such schematic")

// schematics keeps schematics in the cache store, with the ones used
// last in memory.
type schematics struct {
	st oci.Store
	// stored counts the schematics in the store (listed at start, then
	// counted as this process adds them: other replicas' are not seen
	// until a restart).
	stored atomic.Int64
	// mismatches counts schematics stored under another's ID (nil: not
	// counted).
	mismatches prometheus.Counter

	mu   sync.Mutex
	seen *lru[*schematic.Schematic]
}

// schematicsInMemory bounds the schematics a factory keeps in memory.
const schematicsInMemory = 4096

// count lists the store's schematics.
func (c *schematics) count(ctx context.Context) error {
	tags, err := c.st.Tags(ctx, RepoSchematics)
	if err != nil && !errors.Is(err, oci.ErrNotFound) {
		return fmt.Errorf("listing the stored schematics: %w", err)
	}
	c.stored.Store(int64(len(tags)))
	return nil
}

// put stores s under its ID (one the caller found not stored) and returns
// the ID. doc is the document s was parsed from, stored as it is: the
// canonical form does not always parse back (go-yaml's emitter writes
// some block scalars no parser reads), the document does. nil stores the
// canonical form (a schematic the factory made itself).
func (c *schematics) put(ctx context.Context, s *schematic.Schematic, doc []byte) (id string, err error) {
	if id, err = s.ID(); err != nil {
		return "", err
	}
	if doc == nil {
		if doc, err = s.Canonical(); err != nil {
			return "", err
		}
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer: static.NewLayer(doc, MediaTypeSchematic)})
	if err != nil {
		return "", err
	}
	img = mutate.ConfigMediaType(img, types.MediaType(MediaTypeSchematic))
	if err := c.st.WriteImage(ctx, RepoSchematics, id, img); err != nil {
		return "", fmt.Errorf("storing schematic %s: %w", id, err)
	}
	c.stored.Add(1)
	c.remember(id, s)
	return id, nil
}

// get returns the schematic with that ID, errUnknownSchematic when there
// is none. A stored schematic whose content does not have its ID is
// refused.
func (c *schematics) get(ctx context.Context, id string) (*schematic.Schematic, error) {
	c.mu.Lock()
	s, ok := c.seen.get(id)
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	img, err := c.st.Image(ctx, RepoSchematics, id)
	if errors.Is(err, oci.ErrNotFound) {
		return nil, ErrUnknownSchematic
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
		if c.mismatches != nil {
			c.mismatches.Inc()
		}
		return nil, &wrongSchematicError{id: id, got: got}
	}
	c.remember(id, s)
	return s, nil
}

// wrongSchematicError: the schematic stored under an ID hashes to another
// (the store damaged, or a tag moved).
type wrongSchematicError struct{ id, got string }

func (e *wrongSchematicError) Error() string {
	return fmt.Sprintf("the schematic stored as %s has the ID %s: damaged or tampered, refused", e.id, e.got)
}

func (c *schematics) remember(id string, s *schematic.Schematic) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = newLRU[*schematic.Schematic](schematicsInMemory)
	}
	c.seen.put(id, s)
}

// lru is a map of at most max entries that forgets the least recently
// used first.
type lru[V any] struct {
	max   int
	order *list.List // front: the most recent; values are *lruEntry[V]
	by    map[string]*list.Element
}

type lruEntry[V any] struct {
	key string
	val V
}

func newLRU[V any](max int) *lru[V] {
	return &lru[V]{max: max, order: list.New(), by: map[string]*list.Element{}}
}

func (l *lru[V]) get(key string) (V, bool) {
	var zero V
	if l == nil {
		return zero, false
	}
	e, ok := l.by[key]
	if !ok {
		return zero, false
	}
	l.order.MoveToFront(e)
	return e.Value.(*lruEntry[V]).val, true
}

func (l *lru[V]) put(key string, v V) {
	if e, ok := l.by[key]; ok {
		e.Value.(*lruEntry[V]).val = v
		l.order.MoveToFront(e)
		return
	}
	l.by[key] = l.order.PushFront(&lruEntry[V]{key: key, val: v})
	for l.order.Len() > l.max {
		last := l.order.Back()
		l.order.Remove(last)
		delete(l.by, last.Value.(*lruEntry[V]).key)
	}
}

func (l *lru[V]) len() int { return l.order.Len() }

// theLayer is the single layer of an image.
func theLayer(img v1.Image) (v1.Layer, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) != 1 {
		return nil, fmt.Errorf("%d layers, want one", len(layers))
	}
	return layers[0], nil
}

// onlyLayer reads the single layer of an artifact, as stored.
func onlyLayer(img v1.Image, limit int64) ([]byte, error) {
	l, err := theLayer(img)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
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
