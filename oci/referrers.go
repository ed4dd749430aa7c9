package oci

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// WithDeferredFallback returns a context under which a Remote's referrer
// writes leave the referrers fallback tag alone: a caller writing many
// referrers of one subject (a mirror) lists them all at once afterwards
// with EnsureReferrers.
func WithDeferredFallback(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferFallback{}, true)
}

// EnsureReferrers makes sure st lists refs, referrers of subject in repo
// that st holds: a run cut between pushing a referrer and adding it to the
// fallback tag leaves it unlisted, and pushing it again does not help
// (ggcr then finds the manifest and skips it). A descriptor without an
// ArtifactType (not from a referrers list) is completed from its manifest.
// Only a registry has a fallback tag: a layout finds referrers by their
// subject field, and this does nothing for it.
func EnsureReferrers(ctx context.Context, st Store, repo string, subject v1.Hash, refs []v1.Descriptor) error {
	r, ok := st.(*Remote)
	if !ok {
		return nil
	}
	list, err := st.Referrers(ctx, repo, subject)
	if err != nil {
		return err
	}
	var add []v1.Descriptor
	for _, d := range refs {
		if slices.ContainsFunc(list, func(l v1.Descriptor) bool { return l.Digest == d.Digest }) {
			continue
		}
		if d.ArtifactType == "" {
			// Not from a referrers list: read it from the manifest.
			img, err := st.Image(ctx, repo, d.Digest.String())
			if err != nil {
				return err
			}
			raw, err := img.RawManifest()
			if err != nil {
				return err
			}
			var m v1.Manifest
			if err := json.Unmarshal(raw, &m); err != nil {
				return err
			}
			d.ArtifactType, d.Annotations = string(m.Config.MediaType), m.Annotations
			if at, ok := ArtifactType(raw); ok {
				d.ArtifactType = at
			}
		}
		add = append(add, d)
	}
	if len(add) == 0 {
		return nil
	}
	return r.addFallbackReferrers(ctx, repo, subject, add)
}

// addFallbackReferrers lists add in the referrers fallback tag of subject
// (sha256-<hex>), for a registry without the referrers API. ggcr writes
// that tag when it pushes a referrer, but not when the manifest is
// already there: a push interrupted between the two leaves a referrer no
// client finds, which this repairs.
func (r *Remote) addFallbackReferrers(ctx context.Context, repo string, subject v1.Hash, add []v1.Descriptor) error {
	tag := subject.Algorithm + "-" + subject.Hex
	m := &v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	if idx, err := r.Index(ctx, repo, tag); err == nil {
		if m, err = idx.IndexManifest(); err != nil {
			return err
		}
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	n := len(m.Manifests)
	for _, d := range add {
		if !slices.ContainsFunc(m.Manifests, func(e v1.Descriptor) bool { return e.Digest == d.Digest }) {
			m.Manifests = append(m.Manifests, d)
		}
	}
	if len(m.Manifests) == n {
		return nil
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	ref, err := r.reference(repo, tag)
	if err != nil {
		return err
	}
	if err := remote.Put(ref, rawManifest(raw), r.ctxOpts(ctx)...); err != nil {
		return r.explain(ref.String(), err)
	}
	return nil
}

// rawManifest is an index manifest to put as it is.
type rawManifest []byte

func (m rawManifest) RawManifest() ([]byte, error)        { return m, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return types.OCIImageIndex, nil }
