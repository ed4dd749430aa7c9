package oci

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	ocilayout "github.com/nodeforge/builder/internal/ocilayout"
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
// Reads check every blob against its digest; writes are atomic and
// index.json changes are serialised between processes (internal/ocilayout).
type Layout struct {
	Dir string
	d   *ocilayout.Dir
	mu  sync.Mutex
	st  Stats
}

// OpenLayout opens an existing layout for reading; a missing directory or
// one that is not a layout is an error naming it, and nothing is created.
func OpenLayout(dir string) (*Layout, error) {
	d, err := ocilayout.Open(dir)
	if err != nil {
		return nil, err
	}
	return &Layout{Dir: dir, d: d}, nil
}

// CreateLayout opens the layout at dir for writing, making it when dir is
// missing or empty (anything else there is refused) and sweeping what
// killed writers left in it.
func CreateLayout(dir string) (*Layout, error) {
	d, err := ocilayout.Create(dir)
	if err != nil {
		return nil, err
	}
	return &Layout{Dir: dir, d: d}, nil
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

// WriteImage implements Store.
func (l *Layout) WriteImage(ctx context.Context, repo, tag string, img v1.Image) error {
	w, err := l.d.WriteImage(ctx, img)
	l.count(w)
	if err != nil {
		return fmt.Errorf("%s: %w", l.Ref(repo, tag), err)
	}
	return l.put(ctx, repo, tag, img)
}

// WriteIndex implements Store.
func (l *Layout) WriteIndex(ctx context.Context, repo, tag string, idx v1.ImageIndex) error {
	w, err := l.d.WriteIndex(ctx, idx)
	l.count(w)
	if err != nil {
		return fmt.Errorf("%s: %w", l.Ref(repo, tag), err)
	}
	return l.put(ctx, repo, tag, idx)
}

func (l *Layout) count(w ocilayout.Written) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st.Blobs += w.Blobs
	l.st.BlobBytes += w.BlobBytes
	l.st.Manifests += w.Manifests
}

// put records a written manifest in index.json, replacing the entry of
// the same tag (or the same untagged manifest).
func (l *Layout) put(ctx context.Context, repo, tag string, m partial.Describable) error {
	desc, err := partial.Descriptor(m)
	if err != nil {
		return err
	}
	d := *desc
	d.Annotations = map[string]string{}
	maps.Copy(d.Annotations, desc.Annotations)
	maps.Copy(d.Annotations, l.annotations(repo, tag))
	if err := l.d.Put(ctx, d, l.matcher(repo, tag, d.Digest)); err != nil {
		return fmt.Errorf("%s: %w", l.Ref(repo, tag), err)
	}
	return nil
}

// Head implements Store. A digest is found when the layout has its blob
// and some entry of the repository leads to it.
func (l *Layout) Head(ctx context.Context, repo, ref string) (*v1.Descriptor, error) {
	return l.locate(repo, ref)
}

// locate finds repo:ref (or repo@digest) and the index that lists it:
// index.json for a tagged entry, the parent index for a child.
func (l *Layout) locate(repo, ref string) (*v1.Descriptor, error) {
	m, err := l.d.Index()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Annotations[annRepository] != repo {
			continue
		}
		if !digestRef(ref) && d.Annotations[annRefName] == repo+":"+ref {
			return &d, nil
		}
		if digestRef(ref) {
			found, err := l.find(d, ref)
			if err != nil {
				return nil, err
			}
			if found != nil {
				return found, nil
			}
		}
	}
	return nil, notFound(l.Ref(repo, ref))
}

// find looks for digest ref at d or below it. A damaged index on the way
// is an error: a child it hides must not read as missing.
func (l *Layout) find(d v1.Descriptor, ref string) (*v1.Descriptor, error) {
	if d.Digest.String() == ref {
		c := d
		c.Annotations = nil
		return &c, nil
	}
	if !d.MediaType.IsIndex() {
		return nil, nil
	}
	idx, err := l.d.ImageIndex(d)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, c := range m.Manifests {
		if f, err := l.find(c, ref); f != nil || err != nil {
			return f, err
		}
	}
	return nil, nil
}

// Image implements Store.
func (l *Layout) Image(ctx context.Context, repo, ref string) (v1.Image, error) {
	d, err := l.locate(repo, ref)
	if err != nil {
		return nil, err
	}
	return l.d.Image(*d)
}

// Index implements Store.
func (l *Layout) Index(ctx context.Context, repo, ref string) (v1.ImageIndex, error) {
	d, err := l.locate(repo, ref)
	if err != nil {
		return nil, err
	}
	return l.d.ImageIndex(*d)
}

// Referrers implements Store by reading the subject of each manifest of
// the repository.
func (l *Layout) Referrers(ctx context.Context, repo string, subject v1.Hash) ([]v1.Descriptor, error) {
	m, err := l.d.Index()
	if err != nil {
		return nil, err
	}
	var out []v1.Descriptor
	for _, d := range m.Manifests {
		if d.Annotations[annRepository] != repo || d.MediaType != types.OCIManifestSchema1 {
			continue
		}
		raw, err := l.d.ReadBlob(d, 16<<20)
		if err != nil {
			return nil, err
		}
		var mf v1.Manifest
		if json.Unmarshal(raw, &mf) != nil || mf.Subject == nil || mf.Subject.Digest != subject {
			continue
		}
		ref := v1.Descriptor{MediaType: d.MediaType, Size: d.Size, Digest: d.Digest, ArtifactType: string(mf.Config.MediaType), Annotations: mf.Annotations}
		if at, ok := ArtifactType(raw); ok {
			ref.ArtifactType = at
		}
		out = append(out, ref)
	}
	return out, nil
}

// Blob reads a manifest blob named h (its size unknown here), checking
// its digest: an archive of the layout reads each manifest it lists with
// it, to find the manifest's config and layers.
func (l *Layout) Blob(h v1.Hash) ([]byte, error) {
	return l.d.ReadBlob(v1.Descriptor{Digest: h, Size: -1}, 16<<20)
}

// BlobFile is the file holding blob h, for reading it in place (a large
// file served with Range requests); its content is not checked here.
func (l *Layout) BlobFile(h v1.Hash) (string, error) {
	if h.Algorithm != "sha256" || len(h.Hex) != 64 || strings.Trim(h.Hex, "0123456789abcdef") != "" {
		return "", fmt.Errorf("OCI image layout %s: %s is not a sha256 digest", l.Dir, h)
	}
	p := l.d.BlobPath(h)
	fi, err := os.Lstat(p)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("OCI image layout %s: blob %s is not a regular file", l.Dir, h)
	}
	return p, nil
}

// Tags implements Store.
func (l *Layout) Tags(ctx context.Context, repo string) ([]string, error) {
	m, err := l.d.Index()
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
