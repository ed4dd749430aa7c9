package oci

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/internal/atomicfile"
)

// EmptyMediaType is the media type of the OCI empty descriptor, an
// artifact's config.
const EmptyMediaType = "application/vnd.oci.empty.v1+json"

// emptyConfig is the OCI empty descriptor's content.
var emptyConfig = []byte("{}")

// annTitle names a file layer (ORAS's convention).
const annTitle = "org.opencontainers.image.title"

// artifact is an OCI artifact manifest: the empty config, its layers, an
// artifactType, and optionally a subject (which makes it a referrer).
type artifact struct {
	manifest []byte
	layers   map[v1.Hash]artifactBlob
}

// artifactBlob is one layer's content, in memory or in a file.
type artifactBlob struct {
	data []byte
	file string
	size int64
	mt   types.MediaType
}

func (b artifactBlob) open() (io.ReadCloser, error) {
	if b.file != "" {
		return os.Open(b.file)
	}
	return io.NopCloser(bytes.NewReader(b.data)), nil
}

// NewArtifact builds an artifact holding data as its only layer, a
// referrer of subject when subject is not nil: callers store documents
// (attestations, lock files) as artifacts with it.
func NewArtifact(artifactType, layerType string, data []byte, subject *v1.Descriptor, annotations map[string]string) (v1.Image, error) {
	h, n, err := v1.SHA256(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	l := v1.Descriptor{MediaType: types.MediaType(layerType), Size: n, Digest: h}
	return buildArtifact(artifactType, []v1.Descriptor{l}, map[v1.Hash]artifactBlob{h: {data: data, size: n, mt: l.MediaType}}, subject, annotations)
}

// FileLayer is one file of a file artifact.
type FileLayer struct {
	// Title is the file's path inside the artifact (slash-separated).
	Title     string
	MediaType string
	// Path is where the file is on disk.
	Path string
}

// NewFileArtifact builds an artifact whose layers are files, each named by
// its title annotation, the way ORAS stores files; the files are read
// when the artifact is written.
func NewFileArtifact(artifactType string, files []FileLayer, annotations map[string]string) (v1.Image, error) {
	var layers []v1.Descriptor
	blobs := map[v1.Hash]artifactBlob{}
	for _, f := range files {
		fh, err := os.Open(f.Path)
		if err != nil {
			return nil, err
		}
		h, n, err := v1.SHA256(fh)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		mt := types.MediaType(f.MediaType)
		layers = append(layers, v1.Descriptor{MediaType: mt, Size: n, Digest: h, Annotations: map[string]string{annTitle: f.Title}})
		blobs[h] = artifactBlob{file: f.Path, size: n, mt: mt}
	}
	return buildArtifact(artifactType, layers, blobs, nil, annotations)
}

func buildArtifact(artifactType string, layers []v1.Descriptor, blobs map[v1.Hash]artifactBlob, subject *v1.Descriptor, annotations map[string]string) (v1.Image, error) {
	cfgDigest, cfgSize, _ := v1.SHA256(bytes.NewReader(emptyConfig))
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
		layers, sub, annotations}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	all := map[v1.Hash]artifactBlob{cfgDigest: {data: emptyConfig, size: cfgSize, mt: EmptyMediaType}}
	for h, b := range blobs {
		all[h] = b
	}
	return partial.CompressedToImage(&artifact{manifest: raw, layers: all})
}

// ArtifactType returns the artifactType field of a raw manifest, and
// whether it has one: a referrers list names an artifact by it, and a
// reader of referrers picks the ones it wants by it.
func ArtifactType(raw []byte) (string, bool) {
	var m struct {
		ArtifactType string `json:"artifactType"`
	}
	if json.Unmarshal(raw, &m) == nil && m.ArtifactType != "" {
		return m.ArtifactType, true
	}
	return "", false
}

func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifact) RawConfigFile() ([]byte, error)      { return emptyConfig, nil }
func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	b, ok := a.layers[h]
	if !ok {
		return nil, notFound("blob " + h.String())
	}
	return &blobLayer{b: b, h: h}, nil
}

type blobLayer struct {
	b artifactBlob
	h v1.Hash
}

func (l *blobLayer) Digest() (v1.Hash, error)            { return l.h, nil }
func (l *blobLayer) Compressed() (io.ReadCloser, error)  { return l.b.open() }
func (l *blobLayer) Size() (int64, error)                { return l.b.size, nil }
func (l *blobLayer) MediaType() (types.MediaType, error) { return l.b.mt, nil }

// ExtractFiles writes the file layers of a file artifact under dir, each
// at its title; titles that would leave dir are refused. The content is
// checked against each layer's digest.
func ExtractFiles(img v1.Image, dir string) ([]string, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range m.Layers {
		title := d.Annotations[annTitle]
		if !filepath.IsLocal(filepath.FromSlash(title)) {
			return nil, fmt.Errorf("layer %s: title %q is not a relative path inside the artifact: refused", d.Digest, title)
		}
		name := filepath.Join(root, filepath.FromSlash(title))
		l, err := img.LayerByDigest(d.Digest)
		if err != nil {
			return nil, err
		}
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		err = writeVerified(rc, name, d)
		rc.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, title)
	}
	return out, nil
}

// writeVerified writes r to name through a temporary file, refusing
// content that does not match d.
func writeVerified(r io.Reader, name string, d v1.Descriptor) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFrom(name, 0o644, func(w io.Writer) error {
		h, n, err := v1.SHA256(io.TeeReader(io.LimitReader(r, d.Size+1), w))
		if err != nil {
			return err
		}
		if h != d.Digest || n != d.Size {
			return fmt.Errorf("%s: content is %s (%d bytes), the manifest says %s (%d bytes)", filepath.Base(name), h, n, d.Digest, d.Size)
		}
		return nil
	})
}
