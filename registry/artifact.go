package registry

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// emptyConfig is the OCI empty descriptor's content.
var emptyConfig = []byte("{}")

// artifact is an OCI artifact manifest: the empty config, one layer, an
// artifactType, and optionally a subject (which makes it a referrer).
type artifact struct {
	manifest []byte
	blobs    map[v1.Hash][]byte
}

// newArtifact builds an artifact holding data as its only layer.
func newArtifact(artifactType, layerType string, data []byte, subject *v1.Descriptor, annotations map[string]string) (v1.Image, error) {
	cfgDigest, cfgSize, _ := v1.SHA256(bytes.NewReader(emptyConfig))
	layerDigest, layerSize, err := v1.SHA256(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	var sub *v1.Descriptor
	if subject != nil {
		sub = &v1.Descriptor{MediaType: subject.MediaType, Size: subject.Size, Digest: subject.Digest}
	}
	m := struct {
		SchemaVersion int64             `json:"schemaVersion"`
		MediaType     types.MediaType   `json:"mediaType"`
		ArtifactType  string            `json:"artifactType"`
		Config        v1.Descriptor     `json:"config"`
		Layers        []v1.Descriptor   `json:"layers"`
		Subject       *v1.Descriptor    `json:"subject,omitempty"`
		Annotations   map[string]string `json:"annotations,omitempty"`
	}{2, types.OCIManifestSchema1, artifactType,
		v1.Descriptor{MediaType: EmptyMediaType, Size: cfgSize, Digest: cfgDigest},
		[]v1.Descriptor{{MediaType: types.MediaType(layerType), Size: layerSize, Digest: layerDigest}},
		sub, annotations}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	a := &artifact{manifest: raw, blobs: map[v1.Hash][]byte{cfgDigest: emptyConfig, layerDigest: data}}
	return partial.CompressedToImage(a)
}

func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifact) RawConfigFile() ([]byte, error)      { return emptyConfig, nil }
func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	b, ok := a.blobs[h]
	if !ok {
		return nil, notFound("blob " + h.String())
	}
	var mt types.MediaType = EmptyMediaType
	var m v1.Manifest
	if json.Unmarshal(a.manifest, &m) == nil && len(m.Layers) == 1 && m.Layers[0].Digest == h {
		mt = m.Layers[0].MediaType
	}
	return &blobLayer{b: b, h: h, mt: mt}, nil
}

type blobLayer struct {
	b  []byte
	h  v1.Hash
	mt types.MediaType
}

func (l *blobLayer) Digest() (v1.Hash, error) { return l.h, nil }
func (l *blobLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.b)), nil
}
func (l *blobLayer) Size() (int64, error)                { return int64(len(l.b)), nil }
func (l *blobLayer) MediaType() (types.MediaType, error) { return l.mt, nil }
