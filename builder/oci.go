package builder

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/builder/compose"
	ocilayout "github.com/nodeforge/builder/internal/ocilayout"
)

// ociAsset is one file of an architecture's artifact.
type ociAsset struct {
	name      string
	mediaType types.MediaType
	data      []byte   // until it is written to file
	digest    [32]byte // sha256 of data, computed once for the report and the layer
	size      int64
	file      string // the file of the output holding data, linked as the blob
}

// assetLayer is an uncompressed blob layer whose digest is already known
// (static.NewLayer would hash the data again), read from its file: the
// boot assets are half a release's bytes, and not kept in memory.
type assetLayer struct{ a *ociAsset }

func (l assetLayer) Digest() (v1.Hash, error) {
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(l.a.digest[:])}, nil
}
func (l assetLayer) DiffID() (v1.Hash, error)             { return l.Digest() }
func (l assetLayer) Size() (int64, error)                 { return l.a.size, nil }
func (l assetLayer) MediaType() (types.MediaType, error)  { return l.a.mediaType, nil }
func (l assetLayer) Compressed() (io.ReadCloser, error)   { return os.Open(l.a.file) }
func (l assetLayer) Uncompressed() (io.ReadCloser, error) { return l.Compressed() }

// HashedFile is the output's file of the asset, whose bytes the digest
// was taken of: the layout's blob is a link to it.
func (l assetLayer) HashedFile() string { return l.a.file }

// writeOCILayout writes an OCI image layout with one artifact manifest per
// architecture (a layer per boot asset, titled by file name) under an
// index annotated with the release's identity. Every timestamp is the
// source date, so the digests are reproducible.
func writeOCILayout(ctx context.Context, dir string, sde int64, annotations map[string]string, arches []string, assets map[string][]ociAsset) (v1.Hash, error) {
	created := v1.Time{Time: time.Unix(sde, 0).UTC()}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range arches {
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.MediaType(compose.ArtifactType+"+json"))
		for i := range assets[arch] {
			l := assetLayer{&assets[arch][i]}
			var err error
			img, err = mutate.Append(img, mutate.Addendum{Layer: l, Annotations: map[string]string{"org.opencontainers.image.title": l.a.name}})
			if err != nil {
				return v1.Hash{}, err
			}
		}
		img, err := compose.WithPlatform(img, arch, created, nil)
		if err != nil {
			return v1.Hash{}, err
		}
		ann := map[string]string{"org.opencontainers.image.created": created.Format(time.RFC3339)}
		for k, v := range annotations {
			ann[k] = v
		}
		img = mutate.Annotations(img, ann).(v1.Image)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform:     &v1.Platform{OS: "linux", Architecture: specs.GoArch(arch)},
			ArtifactType: compose.ArtifactType,
		}})
	}
	idx = mutate.Annotations(idx, annotations).(v1.ImageIndex)
	if err := ocilayout.WriteRoot(ctx, dir, idx); err != nil {
		return v1.Hash{}, fmt.Errorf("oci layout: %w", err)
	}
	return idx.Digest()
}

// writeImageLayout writes compose.ImageIndex's index as an OCI image
// layout.
func writeImageLayout(ctx context.Context, dir string, sde int64, annotations map[string]string, arches []string, layers map[string][]v1.Layer, entrypoint []string) (v1.Hash, error) {
	idx, err := compose.ImageIndex(sde, annotations, arches, layers, entrypoint)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := ocilayout.WriteRoot(ctx, dir, idx); err != nil {
		return v1.Hash{}, fmt.Errorf("oci layout: %w", err)
	}
	return idx.Digest()
}
