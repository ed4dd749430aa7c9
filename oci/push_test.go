package oci

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/nodeforge/builder/internal/testutil"
)

// countingRegistry is ggcr's in-process registry behind a handler that
// counts requests ("POST blobs", "PUT manifests", ...) and can misbehave.
type countingRegistry struct {
	mu     sync.Mutex
	counts map[string]int
	// refuseMount answers a POST with mount= with 400, as some
	// registries do; failPuts answers that many blob PUTs with 503.
	refuseMount bool
	failPuts    int
	next        http.Handler
}

func (c *countingRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind := "other"
	switch {
	case strings.Contains(r.URL.Path, "/blobs/uploads/"):
		kind = "uploads"
	case strings.Contains(r.URL.Path, "/blobs/"):
		kind = "blobs"
	case strings.Contains(r.URL.Path, "/manifests/"):
		kind = "manifests"
	}
	c.mu.Lock()
	c.counts[r.Method+" "+kind]++
	fail := false
	if kind == "uploads" && r.Method == http.MethodPut && c.failPuts > 0 {
		c.failPuts--
		fail = true
	}
	refuse := c.refuseMount && r.Method == http.MethodPost && r.URL.Query().Get("mount") != ""
	c.mu.Unlock()
	switch {
	case fail:
		http.Error(w, "busy", http.StatusServiceUnavailable)
	case refuse:
		http.Error(w, `{"errors":[{"code":"UNSUPPORTED","message":"no mounts here"}]}`, http.StatusBadRequest)
	default:
		c.next.ServeHTTP(w, r)
	}
}

func (c *countingRegistry) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = map[string]int{}
	return out
}

// newCountingRegistry serves next (by default ggcr's in-process registry)
// through a countingRegistry.
func newCountingRegistry(t *testing.T, next http.Handler) (*countingRegistry, *Remote) {
	t.Helper()
	if next == nil {
		next = ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	}
	c := &countingRegistry{counts: map[string]int{}, next: next}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	st, err := NewRemote(u.Host+"/test", RemoteOptions{RetryDelay: 1})
	if err != nil {
		t.Fatal(err)
	}
	return c, st
}

// A new blob costs a POST and a PUT; a blob or manifest that is there
// costs no upload at all. The registry is CNCF distribution (Debian's
// docker-registry), which mounts a blob from the repository itself.
func TestPushRequests(t *testing.T) {
	ctx := context.Background()
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	c, st := newCountingRegistry(t, httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: reg.Host}))
	img, err := random.Image(512, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WriteImage(ctx, "app", "v1", img); err != nil {
		t.Fatal(err)
	}
	got := c.take()
	if got["POST uploads"] != 4 || got["PUT uploads"] != 4 || got["PATCH uploads"] != 0 || got["HEAD blobs"] != 0 || got["PUT manifests"] != 1 {
		t.Errorf("first write: %v, want 4 POST and 4 PUT (config and 3 layers), 1 manifest PUT, no PATCH or blob HEAD", got)
	}
	if s := st.Stats(); s.Blobs != 4 || s.Manifests != 1 {
		t.Errorf("stats %+v, want 4 blobs and 1 manifest", s)
	}
	// The same image again, and under a second tag from a new store (no
	// memory of what it pushed): nothing is uploaded.
	if err := st.WriteImage(ctx, "app", "v1", img); err != nil {
		t.Fatal(err)
	}
	if got := c.take(); got["POST uploads"]+got["PUT uploads"]+got["PUT manifests"] != 0 {
		t.Errorf("rewrite: %v, want only a HEAD", got)
	}
	st2, err := NewRemote(st.String(), RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st2.WriteImage(ctx, "app", "v2", img); err != nil {
		t.Fatal(err)
	}
	if got := c.take(); got["PUT uploads"] != 0 || got["POST uploads"] != 4 || got["PUT manifests"] != 1 {
		t.Errorf("second tag: %v, want 4 mounts, no blob PUT, 1 manifest PUT", got)
	}
	want, _ := img.Digest()
	for _, tag := range []string{"v1", "v2"} {
		d, err := st.Head(ctx, "app", tag)
		if err != nil || d.Digest != want {
			t.Errorf("app:%s: %v %v, want %s", tag, d, err, want)
		}
	}
	back, err := st.Image(ctx, "app", "v2")
	if err != nil {
		t.Fatal(err)
	}
	layers, _ := back.Layers()
	for _, l := range layers {
		rc, err := l.Compressed() // ggcr checks the digest while reading
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, rc); err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
}

// A registry that refuses mounts gets a plain upload; one that is busy
// for a while gets the blob again.
func TestPushMountRefusedAndRetry(t *testing.T) {
	ctx := context.Background()
	c, st := newCountingRegistry(t, nil)
	c.refuseMount, c.failPuts = true, 2
	idx, err := random.Index(256, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.WriteIndex(ctx, "app", "v1", idx); err != nil {
		t.Fatal(err)
	}
	got := c.take()
	if got["PUT uploads"] != 6+2 {
		t.Errorf("%v: want 6 blob PUTs and 2 retried", got)
	}
	want, _ := idx.Digest()
	if d, err := st.Head(ctx, "app", "v1"); err != nil || d.Digest != want {
		t.Fatalf("app:v1: %v %v, want %s", d, err, want)
	}
	m, _ := idx.IndexManifest()
	for _, ch := range m.Manifests {
		if _, err := st.Head(ctx, "app", ch.Digest.String()); err != nil {
			t.Errorf("child %s: %v", ch.Digest, err)
		}
	}
	// A registry that stays broken: the error names the blob.
	c.failPuts = 1000
	img, _ := random.Image(64, 1)
	err = st.WriteImage(ctx, "app", "v2", img)
	if err == nil || !strings.Contains(err.Error(), "blob sha256:") || !strings.Contains(err.Error(), "503") {
		t.Errorf("broken registry: %v, want an error naming the blob and the status", err)
	}
}
