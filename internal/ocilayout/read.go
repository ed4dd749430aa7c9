package ocilayout

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image returns the image desc names. Its manifest, config and layers are
// read from the layout through the checking reader: a damaged blob fails
// the read that reaches it, naming the blob.
func (d *Dir) Image(desc v1.Descriptor) (v1.Image, error) {
	if !desc.MediaType.IsImage() {
		return nil, fmt.Errorf("OCI image layout %s: %s is a %s, not an image manifest", d.path, desc.Digest, desc.MediaType)
	}
	return partial.CompressedToImage(&image{d: d, desc: desc})
}

// ImageIndex returns the index desc names, read the same way.
func (d *Dir) ImageIndex(desc v1.Descriptor) (v1.ImageIndex, error) {
	if !desc.MediaType.IsIndex() {
		return nil, fmt.Errorf("OCI image layout %s: %s is a %s, not an index", d.path, desc.Digest, desc.MediaType)
	}
	raw, err := d.ReadBlob(desc, maxIndexSize)
	if err != nil {
		return nil, err
	}
	var m v1.IndexManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, &BlobError{Dir: d.path, Digest: desc.Digest, Reason: "not an OCI index: " + err.Error(), Err: ErrDamaged}
	}
	return &index{d: d, desc: desc, raw: raw, m: &m}, nil
}

type image struct {
	d    *Dir
	desc v1.Descriptor
	once sync.Once
	raw  []byte
	m    *v1.Manifest
	err  error
}

var _ partial.CompressedImageCore = (*image)(nil)

func (i *image) load() error {
	i.once.Do(func() {
		if i.raw, i.err = i.d.ReadBlob(i.desc, maxIndexSize); i.err != nil {
			return
		}
		var m v1.Manifest
		if err := json.Unmarshal(i.raw, &m); err != nil {
			i.err = &BlobError{Dir: i.d.path, Digest: i.desc.Digest, Reason: "not an image manifest: " + err.Error(), Err: ErrDamaged}
			return
		}
		i.m = &m
	})
	return i.err
}

func (i *image) MediaType() (types.MediaType, error) { return i.desc.MediaType, nil }

func (i *image) RawManifest() ([]byte, error) {
	if err := i.load(); err != nil {
		return nil, err
	}
	return i.raw, nil
}

func (i *image) RawConfigFile() ([]byte, error) {
	if err := i.load(); err != nil {
		return nil, err
	}
	return i.d.ReadBlob(i.m.Config, maxIndexSize)
}

func (i *image) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if err := i.load(); err != nil {
		return nil, err
	}
	if h == i.m.Config.Digest {
		return &blob{d: i.d, desc: i.m.Config}, nil
	}
	for _, l := range i.m.Layers {
		if l.Digest == h {
			return &blob{d: i.d, desc: l}, nil
		}
	}
	return nil, fmt.Errorf("OCI image layout %s: image %s has no layer %s", i.d.path, i.desc.Digest, h)
}

type blob struct {
	d    *Dir
	desc v1.Descriptor
}

func (b *blob) Digest() (v1.Hash, error)            { return b.desc.Digest, nil }
func (b *blob) Size() (int64, error)                { return b.desc.Size, nil }
func (b *blob) MediaType() (types.MediaType, error) { return b.desc.MediaType, nil }
func (b *blob) Compressed() (io.ReadCloser, error)  { return b.d.OpenBlob(b.desc.Digest, b.desc.Size) }
func (b *blob) Descriptor() (*v1.Descriptor, error) {
	d := b.desc
	return &d, nil
}

type index struct {
	d    *Dir
	desc v1.Descriptor
	raw  []byte
	m    *v1.IndexManifest
}

var _ v1.ImageIndex = (*index)(nil)

func (x *index) MediaType() (types.MediaType, error)       { return x.desc.MediaType, nil }
func (x *index) Digest() (v1.Hash, error)                  { return x.desc.Digest, nil }
func (x *index) Size() (int64, error)                      { return x.desc.Size, nil }
func (x *index) RawManifest() ([]byte, error)              { return x.raw, nil }
func (x *index) IndexManifest() (*v1.IndexManifest, error) { return x.m.DeepCopy(), nil }

func (x *index) child(h v1.Hash) (v1.Descriptor, error) {
	for _, c := range x.m.Manifests {
		if c.Digest == h {
			return c, nil
		}
	}
	return v1.Descriptor{}, fmt.Errorf("OCI image layout %s: index %s does not list %s", x.d.path, x.desc.Digest, h)
}

func (x *index) Image(h v1.Hash) (v1.Image, error) {
	c, err := x.child(h)
	if err != nil {
		return nil, err
	}
	return x.d.Image(c)
}

func (x *index) ImageIndex(h v1.Hash) (v1.ImageIndex, error) {
	c, err := x.child(h)
	if err != nil {
		return nil, err
	}
	return x.d.ImageIndex(c)
}
