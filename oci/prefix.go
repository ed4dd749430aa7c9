package oci

import (
	"context"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Prefixed is a store whose repositories are those of another store below
// a path: a factory's cache inside a release's archive
// ("factory-cache/artifacts"), as a registry holds it below the release's
// prefix.
type Prefixed struct {
	Store  Store
	Prefix string // "factory-cache/"
}

func (p Prefixed) String() string { return p.Store.String() + "/" + p.Prefix }
func (p Prefixed) Ref(repo, tagOrDigest string) string {
	return p.Store.Ref(p.Prefix+repo, tagOrDigest)
}
func (p Prefixed) WriteImage(ctx context.Context, repo, tag string, img v1.Image) error {
	return p.Store.WriteImage(ctx, p.Prefix+repo, tag, img)
}
func (p Prefixed) WriteIndex(ctx context.Context, repo, tag string, idx v1.ImageIndex) error {
	return p.Store.WriteIndex(ctx, p.Prefix+repo, tag, idx)
}
func (p Prefixed) Head(ctx context.Context, repo, ref string) (*v1.Descriptor, error) {
	return p.Store.Head(ctx, p.Prefix+repo, ref)
}
func (p Prefixed) Image(ctx context.Context, repo, ref string) (v1.Image, error) {
	return p.Store.Image(ctx, p.Prefix+repo, ref)
}
func (p Prefixed) Index(ctx context.Context, repo, ref string) (v1.ImageIndex, error) {
	return p.Store.Index(ctx, p.Prefix+repo, ref)
}
func (p Prefixed) Tags(ctx context.Context, repo string) ([]string, error) {
	return p.Store.Tags(ctx, p.Prefix+repo)
}
func (p Prefixed) Referrers(ctx context.Context, repo string, d v1.Hash) ([]v1.Descriptor, error) {
	return p.Store.Referrers(ctx, p.Prefix+repo, d)
}
func (p Prefixed) Stats() Stats { return p.Store.Stats() }
