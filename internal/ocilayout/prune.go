package ocilayout

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/internal/direntries"
)

// errUnchanged stops an Update that has nothing to write.
var errUnchanged = errors.New("index unchanged")

// Remove drops the entries of index.json that match selects, in one
// atomic replacement under the index lock, and says how many it dropped.
// Their blobs stay: Prune frees what no entry leads to any more, as a
// registry's garbage collection does after a manifest is deleted.
func (d *Dir) Remove(ctx context.Context, match func(v1.Descriptor) bool) (int, error) {
	n := 0
	err := d.Update(ctx, func(m *v1.IndexManifest) error {
		n = len(m.Manifests)
		m.Manifests = slices.DeleteFunc(m.Manifests, match)
		if n -= len(m.Manifests); n == 0 {
			return errUnchanged
		}
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return 0, nil
	}
	return n, err
}

// Pruned says what Prune removed.
type Pruned struct {
	Blobs int   `json:"blobs"`
	Bytes int64 `json:"bytes"`
}

// Prune removes the blobs that no entry of index.json leads to (through
// indexes, manifests, configs, layers and blobs) and that were last
// written before cutoff. It holds the index lock, so no entry is added
// while it looks; a writer stores its blobs before the entry that names
// them, and refreshes the time of a blob it finds already there
// (WriteBlob), so a cutoff older than the longest write spares what a
// writer in another process is about to name. A manifest it cannot read
// stops it before anything is removed: a damaged manifest must not make
// live blobs look unreferenced.
func (d *Dir) Prune(ctx context.Context, cutoff time.Time) (Pruned, error) {
	var p Pruned
	err := d.locked(ctx, func() error {
		m, err := d.Index()
		if err != nil {
			return err
		}
		live, err := d.reachable(ctx, m.Manifests)
		if err != nil {
			return err
		}
		dir := filepath.Join(d.path, "blobs", "sha256")
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			name := e.Name()
			// Temporary files are a writer's (atomicfile.Sweep's to take).
			if live["sha256:"+name] || len(name) != 64 || strings.Trim(name, "0123456789abcdef") != "" || !e.Type().IsRegular() {
				continue
			}
			fi, err := e.Info()
			if err != nil || !fi.ModTime().Before(cutoff) {
				continue // gone already, or young
			}
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			p.Blobs++
			p.Bytes += fi.Size()
		}
		return nil
	})
	return p, err
}

// Files lists what a writer of the layout's index.json put in it:
// oci-layout, index.json and every blob index.json leads to, as paths
// relative to the layout, slash-separated. A manifest it cannot read is
// an error.
func (d *Dir) Files(ctx context.Context) (map[string]bool, error) {
	m, err := d.Index()
	if err != nil {
		return nil, err
	}
	live, err := d.reachable(ctx, m.Manifests)
	if err != nil {
		return nil, err
	}
	files := map[string]bool{LayoutFile: true, IndexFile: true}
	for dg := range live {
		if h, err := v1.NewHash(dg); err == nil {
			files[path.Join("blobs", h.Algorithm, h.Hex)] = true
		}
	}
	return files, nil
}

// Foreign lists what the directory at p holds beside the layout's Files,
// as direntries.Unlisted does: what stops it being replaced as a whole.
// A missing or empty directory holds nothing; anything else that is not a
// layout is an error.
func Foreign(ctx context.Context, p string) ([]string, error) {
	if ents, err := os.ReadDir(p); errors.Is(err, fs.ErrNotExist) || (err == nil && len(ents) == 0) {
		return nil, nil
	}
	d, err := Open(p)
	if err != nil {
		return nil, err
	}
	files, err := d.Files(ctx)
	if err != nil {
		return nil, err
	}
	return direntries.Unlisted(p, files, map[string]bool{"blobs/sha256": true})
}

// reachable is every digest the entries lead to.
func (d *Dir) reachable(ctx context.Context, entries []v1.Descriptor) (map[string]bool, error) {
	live := map[string]bool{}
	var visit func(v1.Descriptor) error
	visit = func(desc v1.Descriptor) error {
		if live[desc.Digest.String()] {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		live[desc.Digest.String()] = true
		raw, err := d.ReadBlob(desc, maxIndexSize)
		if err != nil {
			return err
		}
		// One shape for indexes, image manifests and artifact manifests.
		var mf struct {
			Config    *v1.Descriptor  `json:"config"`
			Layers    []v1.Descriptor `json:"layers"`
			Blobs     []v1.Descriptor `json:"blobs"`
			Manifests []v1.Descriptor `json:"manifests"`
		}
		if err := json.Unmarshal(raw, &mf); err != nil {
			return &BlobError{Dir: d.path, Digest: desc.Digest, Reason: "not a manifest: " + err.Error(), Err: ErrDamaged}
		}
		if mf.Config != nil {
			live[mf.Config.Digest.String()] = true
		}
		for _, b := range slices.Concat(mf.Layers, mf.Blobs) {
			live[b.Digest.String()] = true
		}
		for _, c := range mf.Manifests {
			if err := visit(c); err != nil {
				return err
			}
		}
		return nil
	}
	for _, e := range entries {
		if err := visit(e); err != nil {
			return nil, err
		}
	}
	return live, nil
}
