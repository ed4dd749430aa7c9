package release

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/nodeforge/builder/oci"
)

// ImageArchive is a container image of a release written by
// WriteImageArchive.
type ImageArchive struct {
	// Ref is the image's name in the archive (io.containerd.image.name):
	// its reference in the release's registry, HOST/PREFIX/images/NAME:TAG,
	// or localhost/images/NAME:TAG for a release in a layout (as podman
	// names local images).
	Ref string `json:"ref"`
	// Digest is the image's manifest (index) digest, the one that verified.
	Digest string `json:"digest"`
}

// annContainerdName is the index.json annotation ctr images import names
// an image by.
const annContainerdName = "io.containerd.image.name"

// WriteImageArchive writes the container image name (of the spec's images
// section) of release version in st to w as an OCI image layout in a tar:
// what ctr images import, skopeo's and podman's oci-archive: read. The
// lock artifact and the image are verified with keys first (signatures,
// attestations, every blob), and the image is read by the digest that
// verified; nothing is written to w when they do not verify. The archive
// holds oci-layout and index.json first (the image's one entry, named
// ImageArchive.Ref, tagged with the version), then each blob once, dated
// by the image's creation annotation: the same image gives the same bytes.
func WriteImageArchive(ctx context.Context, st oci.Reader, version, name string, keys []signature.Verifier, w io.Writer) (*ImageArchive, error) {
	tag, err := oci.ValidTag(version)
	if err != nil {
		return nil, err
	}
	repos, err := Repositories(ctx, st, tag)
	if err != nil {
		return nil, err
	}
	repo := RepoImage + name
	if !slices.Contains(repos, repo) {
		var have []string
		for _, r := range repos {
			if n, ok := strings.CutPrefix(r, RepoImage); ok {
				have = append(have, n)
			}
		}
		if len(have) == 0 {
			have = []string{"none"}
		}
		return nil, fmt.Errorf("release %s in %s has no container image %s (it has: %s)", version, st, name, strings.Join(have, ", "))
	}
	var vs []*Verification
	var problems []string
	for _, r := range []string{RepoLock, repo} {
		v := VerifyOrExplain(ctx, st, r, tag, keys, nil)
		vs = append(vs, v)
		problems = append(problems, v.Problems...)
	}
	if len(problems) > 0 {
		head := ""
		if cause := RootCause(vs, keys); cause != "" {
			head = " " + cause
		}
		return nil, fmt.Errorf("release %s in %s does not verify:%s\n  %s", version, st, head, strings.Join(problems, "\n  "))
	}
	a := &ImageArchive{Ref: archiveRef(st, repo, tag), Digest: vs[1].Digest}
	idx, err := st.Index(ctx, repo, a.Digest)
	if err != nil {
		return nil, err
	}
	if err := writeIndexArchive(idx, a, tag, w); err != nil {
		return nil, fmt.Errorf("%s: %w", st.Ref(repo, a.Digest), err)
	}
	return a, nil
}

// archiveRef is the name of repo:tag of st in an archive: its registry
// reference, or localhost/repo:tag for a layout.
func archiveRef(st oci.Reader, repo, tag string) string {
	if l, err := oci.ParseImageLocation(st.Ref(repo, tag)); err == nil && l.Kind == oci.KindRegistry {
		return l.Path + "/" + l.Repo + ":" + l.Ref
	}
	return "localhost/" + repo + ":" + tag
}

// writeIndexArchive writes the layout tar of idx.
func writeIndexArchive(idx v1.ImageIndex, a *ImageArchive, tag string, w io.Writer) error {
	raw, err := idx.RawManifest()
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	mtime := time.Unix(0, 0).UTC()
	if t, err := time.Parse(time.RFC3339, im.Annotations["org.opencontainers.image.created"]); err == nil {
		mtime = t.UTC()
	}
	mt := im.MediaType
	if mt == "" {
		mt = types.OCIImageIndex
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	top, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{{
		MediaType: mt, Size: int64(len(raw)), Digest: d,
		Annotations: map[string]string{annContainerdName: a.Ref, "org.opencontainers.image.ref.name": tag},
	}}})
	if err != nil {
		return err
	}
	tw := &layoutTar{tw: tar.NewWriter(w), mtime: mtime, done: map[string]bool{}}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	if err := tw.file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := tw.file("index.json", top); err != nil {
		return err
	}
	if err := tw.index(idx); err != nil {
		return err
	}
	return tw.tw.Close()
}

// layoutTar writes the blobs of an OCI layout into a tar, each once.
type layoutTar struct {
	tw    *tar.Writer
	mtime time.Time
	done  map[string]bool
}

func (l *layoutTar) header(name string, size int64) error {
	return l.tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size, ModTime: l.mtime, Format: tar.FormatPAX})
}

func (l *layoutTar) file(name string, data []byte) error {
	if err := l.header(name, int64(len(data))); err != nil {
		return err
	}
	_, err := l.tw.Write(data)
	return err
}

// blob writes a manifest or config blob of digest d.
func (l *layoutTar) blob(d v1.Hash, data []byte) error {
	if l.done[d.String()] {
		return nil
	}
	l.done[d.String()] = true
	return l.file("blobs/sha256/"+d.Hex, data)
}

// index writes idx's manifest and, depth first, its children's blobs.
func (l *layoutTar) index(idx v1.ImageIndex) error {
	raw, err := idx.RawManifest()
	if err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	if err := l.blob(d, raw); err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, m := range im.Manifests {
		switch {
		case m.MediaType.IsIndex():
			child, err := idx.ImageIndex(m.Digest)
			if err != nil {
				return err
			}
			if err := l.index(child); err != nil {
				return err
			}
		case m.MediaType.IsImage():
			img, err := idx.Image(m.Digest)
			if err != nil {
				return err
			}
			if err := l.image(img); err != nil {
				return fmt.Errorf("%s: %w", m.Digest, err)
			}
		default:
			return fmt.Errorf("manifest %s: media type %s is neither an image nor an index", m.Digest, m.MediaType)
		}
	}
	return nil
}

// image writes img's manifest, config and layers.
func (l *layoutTar) image(img v1.Image) error {
	raw, err := img.RawManifest()
	if err != nil {
		return err
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	if err := l.blob(d, raw); err != nil {
		return err
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	cd, err := img.ConfigName()
	if err != nil {
		return err
	}
	if err := l.blob(cd, cfg); err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, layer := range layers {
		if err := l.layer(layer); err != nil {
			return err
		}
	}
	return nil
}

// layer streams one compressed layer (the store checks its digest as it
// is read).
func (l *layoutTar) layer(layer v1.Layer) error {
	ld, err := layer.Digest()
	if err != nil {
		return err
	}
	if l.done[ld.String()] {
		return nil
	}
	l.done[ld.String()] = true
	size, err := layer.Size()
	if err != nil {
		return err
	}
	rc, err := layer.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := l.header("blobs/sha256/"+ld.Hex, size); err != nil {
		return err
	}
	n, err := io.Copy(l.tw, rc)
	if err != nil {
		return fmt.Errorf("layer %s: %w", ld, err)
	}
	if n != size {
		return fmt.Errorf("layer %s: %d bytes, its descriptor says %d", ld, n, size)
	}
	return nil
}
