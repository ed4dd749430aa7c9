package oci

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/nodeforge/builder/internal/testutil"
)

// blobsOf are the digests of an image's manifest, config and layers.
func blobsOf(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	out := []v1.Hash{d, m.Config.Digest}
	for _, l := range m.Layers {
		out = append(out, l.Digest)
	}
	return out
}

func tagsOf(t *testing.T, st Store, repo string) []string {
	t.Helper()
	tags, err := st.Tags(context.Background(), repo)
	if err != nil && !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	slices.Sort(tags)
	return tags
}

// TestLayoutDeletePrune: a tag leaves alone, a digest takes every entry
// of its manifest; Prune frees only the blobs nothing names, once older
// than the grace (a blob a writer names again is young again), and
// refuses to free anything while a manifest cannot be read.
func TestLayoutDeletePrune(t *testing.T) {
	ctx := context.Background()
	l, err := CreateLayout(filepath.Join(t.TempDir(), "l"))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := random.Image(100, 2)
	b, _ := random.Image(100, 1)
	for _, w := range []struct {
		tag string
		img v1.Image
	}{{"a1", a}, {"a2", a}, {"", a}, {"b", b}} {
		if err := l.WriteImage(ctx, "r", w.tag, w.img); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Delete(ctx, "r", "a1"); err != nil {
		t.Fatal(err)
	}
	if got := tagsOf(t, l, "r"); !slices.Equal(got, []string{"a2", "b"}) {
		t.Errorf("after deleting a1: %v", got)
	}
	if err := l.Delete(ctx, "r", "a1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting a1 again: %v", err)
	}
	ad, _ := a.Digest()
	if err := l.Delete(ctx, "r", ad.String()); err != nil {
		t.Fatal(err)
	}
	if got := tagsOf(t, l, "r"); !slices.Equal(got, []string{"b"}) {
		t.Errorf("after deleting a by digest: %v", got)
	}
	if _, err := l.Head(ctx, "r", ad.String()); !errors.Is(err, ErrNotFound) {
		t.Errorf("a's untagged entry is left: %v", err)
	}
	exists := func(h v1.Hash) bool { _, err := os.Stat(l.d.BlobPath(h)); return err == nil }
	if p, err := l.Prune(ctx, time.Hour); err != nil || p.Blobs != 0 {
		t.Errorf("pruning young blobs: %+v %v", p, err)
	}
	old := time.Now().Add(-2 * time.Hour)
	for _, h := range slices.Concat(blobsOf(t, a), blobsOf(t, b)) {
		os.Chtimes(l.d.BlobPath(h), old, old)
	}
	// A damaged manifest stops Prune before it removes anything.
	bm := blobsOf(t, b)[0]
	raw, _ := os.ReadFile(l.d.BlobPath(bm))
	os.WriteFile(l.d.BlobPath(bm), []byte("{}"), 0o644)
	if _, err := l.Prune(ctx, time.Hour); err == nil || !strings.Contains(err.Error(), bm.Hex) || !exists(blobsOf(t, a)[2]) {
		t.Errorf("pruning past a damaged manifest: %v", err)
	}
	os.WriteFile(l.d.BlobPath(bm), raw, 0o644)
	os.Chtimes(l.d.BlobPath(bm), old, old)
	// Named again by a writer (the entry not written yet), a's first layer
	// is spared.
	la, _ := a.Layers()
	rc, _ := la[0].Compressed()
	if _, err := l.d.WriteBlob(blobsOf(t, a)[2], -1, rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	p, err := l.Prune(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if p.Blobs != 3 || p.Bytes <= 0 {
		t.Errorf("pruned %+v, want a's manifest, config and second layer", p)
	}
	for i, h := range blobsOf(t, a) {
		if exists(h) != (i == 2) {
			t.Errorf("blob %d of a (%s): exists %t", i, h, exists(h))
		}
	}
	img, err := l.Image(ctx, "r", "b")
	if err == nil {
		_, err = img.RawConfigFile()
	}
	if err != nil || !exists(blobsOf(t, b)[2]) {
		t.Errorf("b after pruning: %v", err)
	}
}

// TestRemoteDelete: docker-registry deletes a manifest (and its tags) by
// digest and no tag; a registry refusing deletes is named with the fix.
func TestRemoteDelete(t *testing.T) {
	ctx := context.Background()
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	st, err := NewRemote(reg.Host+"/p", RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	img, _ := random.Image(100, 1)
	for _, tag := range []string{"t1", "t2"} {
		if err := st.WriteImage(ctx, "r", tag, img); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Delete(ctx, "r", "t1"); !errors.Is(err, ErrTagDeleteUnsupported) {
		t.Errorf("deleting a tag: %v", err)
	}
	d, _ := img.Digest()
	if err := st.Delete(ctx, "r", d.String()); err != nil {
		t.Fatal(err)
	}
	if got := tagsOf(t, st, "r"); len(got) != 0 {
		t.Errorf("tags left: %v", got)
	}
	if err := st.Delete(ctx, "r", d.String()); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting again: %v", err)
	}

	refusing := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusMethodNotAllowed)
			w.Write([]byte(`{"errors":[{"code":"UNSUPPORTED","message":"The operation is unsupported."}]}`))
			return
		}
		ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))).ServeHTTP(w, r)
	})
	_, ro := newCountingRegistry(t, refusing)
	err = ro.Delete(ctx, "r", d.String())
	if err == nil || !strings.Contains(err.Error(), "refuses deletes") || !strings.Contains(err.Error(), ro.Host) || !strings.Contains(err.Error(), "delete: enabled") {
		t.Errorf("a registry refusing deletes: %v", err)
	}
}
