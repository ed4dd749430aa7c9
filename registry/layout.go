package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations of the layout's index.json entries: the OCI ref name holds
// "<repo>:<tag>", and every entry names its repository, so one layout
// holds a whole release (several repositories, their signatures,
// attestations and referrers) the way a registry would.
const (
	annRefName    = "org.opencontainers.image.ref.name"
	annRepository = "dev.nodeforge.repository"
)

// Layout is a local OCI image layout holding every repository of a release.
type Layout struct {
	Dir  string
	mu   sync.Mutex
	path layout.Path
	st   Stats
}

// OpenLayout opens the layout at dir, creating it when missing.
func OpenLayout(dir string) (*Layout, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "index.json")); serr == nil {
			return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return nil, fmt.Errorf("OCI layout %s: %w", dir, err)
		}
	}
	return &Layout{Dir: dir, path: p}, nil
}

func (l *Layout) String() string { return "oci:" + l.Dir }

// Ref implements Store: "oci:DIR#repo:tag" (or @digest).
func (l *Layout) Ref(repo, ref string) string {
	if digestRef(ref) {
		return l.String() + "#" + repo + "@" + ref
	}
	return l.String() + "#" + repo + ":" + ref
}

// matcher finds the index.json entry a write replaces: repo:tag, or
// without a tag the untagged entry of manifest d in repo.
func (l *Layout) matcher(repo, tag string, d v1.Hash) func(v1.Descriptor) bool {
	if tag == "" {
		return func(x v1.Descriptor) bool {
			return x.Digest == d && x.Annotations[annRepository] == repo && x.Annotations[annRefName] == ""
		}
	}
	return func(x v1.Descriptor) bool {
		return x.Annotations[annRepository] == repo && x.Annotations[annRefName] == repo+":"+tag
	}
}

func (l *Layout) annotations(repo, tag string) map[string]string {
	a := map[string]string{annRepository: repo}
	if tag != "" {
		a[annRefName] = repo + ":" + tag
	}
	return a
}

// countNew adds the blobs of a manifest the layout does not have yet.
func (l *Layout) countNew(img v1.Image) {
	layers, _ := img.Layers()
	cfg, _ := img.ConfigName()
	check := func(h v1.Hash, size int64) {
		if _, err := os.Stat(filepath.Join(l.Dir, "blobs", h.Algorithm, h.Hex)); err != nil {
			l.st.Blobs++
			l.st.BlobBytes += size
		}
	}
	if m, err := img.Manifest(); err == nil {
		check(cfg, m.Config.Size)
	}
	for _, layer := range layers {
		h, _ := layer.Digest()
		n, _ := layer.Size()
		check(h, n)
	}
}

// countManifest counts a manifest the layout does not hold yet.
func (l *Layout) countManifest(d v1.Hash) {
	if _, err := os.Stat(filepath.Join(l.Dir, "blobs", d.Algorithm, d.Hex)); err != nil {
		l.st.Manifests++
	}
}

// WriteImage implements Store.
func (l *Layout) WriteImage(ctx context.Context, repo, tag string, img v1.Image) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.countNew(img)
	d, err := img.Digest()
	if err != nil {
		return err
	}
	l.countManifest(d)
	if err := l.path.ReplaceImage(img, l.matcher(repo, tag, d), layout.WithAnnotations(l.annotations(repo, tag))); err != nil {
		return fmt.Errorf("%s: %w", l.Ref(repo, tag), err)
	}
	return nil
}

// WriteIndex implements Store.
func (l *Layout) WriteIndex(ctx context.Context, repo, tag string, idx v1.ImageIndex) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, c := range m.Manifests {
		if img, err := idx.Image(c.Digest); err == nil {
			l.countNew(img)
			l.countManifest(c.Digest)
		}
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	l.countManifest(d)
	if err := l.path.ReplaceIndex(idx, l.matcher(repo, tag, d), layout.WithAnnotations(l.annotations(repo, tag))); err != nil {
		return fmt.Errorf("%s: %w", l.Ref(repo, tag), err)
	}
	return nil
}

// Head implements Store. A digest is found when the layout has its blob
// and some entry of the repository leads to it.
func (l *Layout) Head(ctx context.Context, repo, ref string) (*v1.Descriptor, error) {
	d, _, err := l.locate(repo, ref)
	return d, err
}

// locate finds repo:ref (or repo@digest) and the index that lists it:
// index.json for a tagged entry, the parent index for a child.
func (l *Layout) locate(repo, ref string) (*v1.Descriptor, v1.ImageIndex, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	root, m, err := l.root()
	if err != nil {
		return nil, nil, err
	}
	for _, d := range m.Manifests {
		if d.Annotations[annRepository] != repo {
			continue
		}
		if !digestRef(ref) && d.Annotations[annRefName] == repo+":"+ref {
			return &d, root, nil
		}
		if digestRef(ref) {
			if found, parent := find(root, d, ref); found != nil {
				return found, parent, nil
			}
		}
	}
	return nil, nil, notFound(l.Ref(repo, ref))
}

// root reads index.json; the caller holds l.mu.
func (l *Layout) root() (v1.ImageIndex, *v1.IndexManifest, error) {
	root, err := l.path.ImageIndex()
	if err != nil {
		return nil, nil, err
	}
	m, err := root.IndexManifest()
	if err != nil {
		return nil, nil, err
	}
	return root, m, nil
}

// find looks for digest ref at d (listed by parent) or below it, and
// returns it with the index that lists it.
func find(parent v1.ImageIndex, d v1.Descriptor, ref string) (*v1.Descriptor, v1.ImageIndex) {
	if d.Digest.String() == ref {
		c := d
		c.Annotations = nil
		return &c, parent
	}
	if !d.MediaType.IsIndex() {
		return nil, nil
	}
	idx, err := parent.ImageIndex(d.Digest)
	if err != nil {
		return nil, nil
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, nil
	}
	for _, c := range m.Manifests {
		if f, p := find(idx, c, ref); f != nil {
			return f, p
		}
	}
	return nil, nil
}

// Image implements Store. ggcr resolves a digest only among the entries of
// the index it is asked, so a child is read through its parent.
func (l *Layout) Image(ctx context.Context, repo, ref string) (v1.Image, error) {
	d, parent, err := l.locate(repo, ref)
	if err != nil {
		return nil, err
	}
	return parent.Image(d.Digest)
}

// Index implements Store.
func (l *Layout) Index(ctx context.Context, repo, ref string) (v1.ImageIndex, error) {
	d, parent, err := l.locate(repo, ref)
	if err != nil {
		return nil, err
	}
	return parent.ImageIndex(d.Digest)
}

// Referrers implements Store by reading the subject of each manifest of
// the repository.
func (l *Layout) Referrers(ctx context.Context, repo string, subject v1.Hash) ([]v1.Descriptor, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, m, err := l.root()
	if err != nil {
		return nil, err
	}
	var out []v1.Descriptor
	for _, d := range m.Manifests {
		if d.Annotations[annRepository] != repo || d.MediaType != types.OCIManifestSchema1 {
			continue
		}
		raw, err := l.blob(d.Digest)
		if err != nil {
			return nil, err
		}
		var mf v1.Manifest
		if json.Unmarshal(raw, &mf) != nil || mf.Subject == nil || mf.Subject.Digest != subject {
			continue
		}
		ref := v1.Descriptor{MediaType: d.MediaType, Size: d.Size, Digest: d.Digest, ArtifactType: string(mf.Config.MediaType), Annotations: mf.Annotations}
		if at, ok := artifactType(raw); ok {
			ref.ArtifactType = at
		}
		out = append(out, ref)
	}
	return out, nil
}

func artifactType(raw []byte) (string, bool) {
	var m struct {
		ArtifactType string `json:"artifactType"`
	}
	if json.Unmarshal(raw, &m) == nil && m.ArtifactType != "" {
		return m.ArtifactType, true
	}
	return "", false
}

func (l *Layout) blob(h v1.Hash) ([]byte, error) {
	rc, err := l.path.Blob(h)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, 16<<20))
}

// Tags implements Store.
func (l *Layout) Tags(ctx context.Context, repo string) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, m, err := l.root()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range m.Manifests {
		if tag, ok := strings.CutPrefix(d.Annotations[annRefName], repo+":"); ok && d.Annotations[annRepository] == repo {
			out = append(out, tag)
		}
	}
	return out, nil
}

// Stats implements Store.
func (l *Layout) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st
}
