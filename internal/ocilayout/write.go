package ocilayout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/errgroup"

	"github.com/nodeforge/builder/internal/atomicfile"
)

// Written counts what a write stored (blobs already whole are not counted).
type Written struct {
	Blobs     int   // layers and configs
	BlobBytes int64 // their bytes
	Manifests int   // image manifests and indexes
}

func (w *Written) add(o Written) {
	w.Blobs += o.Blobs
	w.BlobBytes += o.BlobBytes
	w.Manifests += o.Manifests
}

// WriteImage stores an image's layers, config and manifest (layers first,
// the manifest last), checking each against its digest. index.json is not
// touched: Put tags it.
func (d *Dir) WriteImage(ctx context.Context, img v1.Image) (Written, error) {
	var w Written
	m, err := img.Manifest()
	if err != nil {
		return w, err
	}
	layers, err := img.Layers()
	if err != nil {
		return w, err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	counts := make([]Written, len(layers))
	for i, l := range layers {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			desc := m.Layers[i]
			if hf, ok := l.(HashedFile); ok {
				wrote, err := d.writeHashedFile(desc.Digest, desc.Size, hf.HashedFile())
				if wrote {
					counts[i] = Written{Blobs: 1, BlobBytes: desc.Size}
				}
				return err
			}
			if hb, ok := l.(HashedBlob); ok {
				wrote, err := d.writeHashed(desc.Digest, desc.Size, hb.HashedBlob())
				if wrote {
					counts[i] = Written{Blobs: 1, BlobBytes: desc.Size}
				}
				return err
			}
			rc, err := l.Compressed()
			if err != nil {
				return err
			}
			defer rc.Close()
			wrote, err := d.WriteBlob(desc.Digest, desc.Size, rc)
			if wrote {
				counts[i] = Written{Blobs: 1, BlobBytes: desc.Size}
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return w, err
	}
	for _, c := range counts {
		w.add(c)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return w, err
	}
	if wrote, err := d.WriteBlobBytes(m.Config.Digest, cfg); err != nil {
		return w, err
	} else if wrote {
		w.add(Written{Blobs: 1, BlobBytes: int64(len(cfg))})
	}
	return w, d.writeManifest(img, &w)
}

// WriteIndex stores an index and everything below it, children first.
func (d *Dir) WriteIndex(ctx context.Context, idx v1.ImageIndex) (Written, error) {
	w, err := d.writeChildren(ctx, idx)
	if err != nil {
		return w, err
	}
	return w, d.writeManifest(idx, &w)
}

// writeChildren stores every image and index idx lists.
func (d *Dir) writeChildren(ctx context.Context, idx v1.ImageIndex) (Written, error) {
	var w Written
	m, err := idx.IndexManifest()
	if err != nil {
		return w, err
	}
	for _, c := range m.Manifests {
		var cw Written
		switch {
		case c.MediaType.IsIndex():
			ci, err := idx.ImageIndex(c.Digest)
			if err != nil {
				return w, err
			}
			if cw, err = d.WriteIndex(ctx, ci); err != nil {
				return w, err
			}
		case c.MediaType.IsImage():
			ci, err := idx.Image(c.Digest)
			if err != nil {
				return w, err
			}
			if cw, err = d.WriteImage(ctx, ci); err != nil {
				return w, err
			}
		default:
			return w, fmt.Errorf("index lists %s of media type %q: only images and indexes can be stored", c.Digest, c.MediaType)
		}
		w.add(cw)
	}
	return w, nil
}

// manifest is what images and indexes share.
type manifest interface {
	Digest() (v1.Hash, error)
	RawManifest() ([]byte, error)
}

func (d *Dir) writeManifest(m manifest, w *Written) error {
	h, err := m.Digest()
	if err != nil {
		return err
	}
	raw, err := m.RawManifest()
	if err != nil {
		return err
	}
	wrote, err := d.WriteBlobBytes(h, raw)
	if wrote {
		w.Manifests++
	}
	return err
}

// WriteRoot makes the layout at path (missing or empty) hold idx as its
// index.json, with idx's children and their blobs, the way a build hands
// out one index per layout (go-containerregistry's layout.Write, made
// atomic and checked).
func WriteRoot(ctx context.Context, path string, idx v1.ImageIndex) error {
	d, err := Create(path)
	if err != nil {
		return err
	}
	if _, err := d.writeChildren(ctx, idx); err != nil {
		return err
	}
	raw, err := idx.RawManifest()
	if err != nil {
		return err
	}
	if err := atomicfile.SyncDir(filepath.Join(path, "blobs", "sha256")); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(path, IndexFile), raw, 0o644)
}

// Root returns index.json as an index (a layout WriteRoot wrote).
func (d *Dir) Root() (v1.ImageIndex, error) {
	p := filepath.Join(d.path, IndexFile)
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var m v1.IndexManifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	h, size, err := v1.SHA256(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	mt := m.MediaType
	if mt == "" {
		mt = types.OCIImageIndex
	}
	return &index{d: d, desc: v1.Descriptor{MediaType: mt, Digest: h, Size: size}, raw: raw, m: &m}, nil
}
