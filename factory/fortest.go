package factory

import (
	"context"
	"io"
	"maps"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/schematic"
)

// The hooks below are for tests, the HTTP front's (factory/server) among
// them: they serve releases made in memory, unverified, and stand a
// function in for the builds. A factory that serves never calls them.

// BuildFunc makes the bytes of one artifact of a schematic's media.
type BuildFunc func(ctx context.Context, rel *VerifiedRelease, sch *schematic.Schematic, a Artifact, arch string) ([]byte, error)

// NewUnverified is a service that serves nothing until ServeUnverified
// says what, its options completed with their defaults.
func NewUnverified(o Options) (*Service, error) { return newService(o) }

// ServeUnverified replaces what the service serves with rels, as they
// are: nothing verifies them.
func (s *Service) ServeUnverified(rels ...*VerifiedRelease) {
	c := &catalog{releases: map[string]*VerifiedRelease{}}
	for _, r := range rels {
		c.releases[versionKey(r.Version)] = r
	}
	c.versions = slices.Sorted(maps.Keys(c.releases))
	s.cat.Store(c)
}

// BuildWith makes build compose the service's artifacts instead of
// compose.Media.
func (s *Service) BuildWith(build BuildFunc) {
	s.buildFile = func(ctx context.Context, rel *VerifiedRelease, sch *schematic.Schematic, a Artifact, arch, dir string) (*builtFile, error) {
		data, err := build(ctx, rel, sch, a, arch)
		if err != nil {
			return nil, err
		}
		return writeBuiltFile(dir, func(w io.Writer) error { _, err := w.Write(data); return err })
	}
}

// CacheInstaller caches idx, signed, as the installer of kind k of
// schematic id in rel, as if the factory had built it.
func (s *Service) CacheInstaller(ctx context.Context, rel *VerifiedRelease, id string, k InstallerKind, idx v1.ImageIndex) error {
	return s.putInstaller(ctx, s.installerKey(rel, id, k), s.PullRef("", k, id, rel.Version), idx)
}

// SetExtensionMetadata gives r the extensions' manifests and their
// descriptions by language (extension -> language -> text) without
// reading its store.
func (r *VerifiedRelease) SetExtensionMetadata(meta map[string]extensions.Metadata, descs map[string]map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.meta, r.descs = meta, descs
}

// SetClock makes the cache read the time from now (when a file it
// hashed is due to be hashed again).
func (s *Service) SetClock(now func() time.Time) { s.cache.now = now }

// SchematicCounts are the schematics the service counts as stored and
// those it keeps in memory.
func (s *Service) SchematicCounts() (stored int64, remembered int) {
	if s.schematics.seen != nil {
		remembered = s.schematics.seen.len()
	}
	return s.schematics.stored.Load(), remembered
}
