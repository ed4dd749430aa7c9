package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
)

// TestFactoryReplicasConcurrent: two replicas on one cache registry. A schematic
// created on one is served by the other at once; 20 concurrent requests
// for one new artifact spread over both give the same bytes and one cache
// entry, signed by the factory's key (duplicate builds counted). (Each
// request costs a second of CPU under the race detector: 50 took the test
// from 37 to 83 s.) (A
// replica killed or stopped mid-build, which takes processes: cmd/builder's
// TestFactoryReplicas.)
func TestFactoryReplicasConcurrent(t *testing.T) {
	testutil.Slow(t)
	f := newDemoFactory(t)
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	cache, err := oci.NewRemote(reg.Host+"/nodeforge/p11/factory-cache", oci.RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	onRegistry := func(o *Options) { o.Service.Cache = cache }
	a, ahs := f.serve(t, onRegistry)
	b, bhs := f.serve(t, onRegistry)
	resp, err := http.Post(ahs.URL+"/schematics", "application/yaml", strings.NewReader("customization:\n  systemExtensions:\n    officialExtensions: [zfs]\n"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	id, _, _ := strings.Cut(strings.TrimPrefix(string(body), `{"id":"`), `"`)
	if _, code, _ := fetch(bhs.URL + "/schematics/" + id); code != 200 {
		t.Fatalf("a schematic created on one replica: %d on the other", code)
	}

	path := "/image/" + id + "/1.11.0-demo/metal-amd64.iso"
	var mu sync.Mutex
	bodies := map[string]int{}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := ahs.URL
			if i%2 == 1 {
				url = bhs.URL
			}
			got, code, err := fetch(url + path)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || code != 200 {
				t.Errorf("request %d: %d %v", i, code, err)
				return
			}
			bodies[string(got)]++
		}()
	}
	wg.Wait()
	builds := counter(t, a, "nodeforge_factory_artifacts_built_total") + counter(t, b, "nodeforge_factory_artifacts_built_total")
	t.Logf("20 concurrent requests over two replicas: %d builds (%d duplicate)", builds, builds-1)
	if len(bodies) != 1 || builds < 1 || builds > 2 {
		t.Errorf("%d different bodies, %d builds", len(bodies), builds)
	}
	if n := entries(t, cache, f.rel.Keys); n != 1 {
		t.Errorf("%d cache entries for one artifact", n)
	}
}

// fetch gets a URL: its body and status.
func fetch(url string) ([]byte, int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

// counter reads a Prometheus counter's sum over its labels from a
// factory's metrics.
func counter(t *testing.T, srv *Server, name string) int {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sum := 0.0
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return int(sum)
}

// entries counts the artifact entries in the cache and checks that each
// is signed by the factory's key (vs[0]).
func entries(t *testing.T, cache oci.Store, vs []signing.Verifier) int {
	t.Helper()
	ctx := context.Background()
	tags, err := cache.Tags(ctx, factory.RepoArtifacts)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tag := range tags {
		if strings.HasSuffix(tag, ".sig") {
			continue
		}
		n++
		desc, err := cache.Head(ctx, factory.RepoArtifacts, tag)
		if err != nil {
			t.Fatal(err)
		}
		if err := signedBy(ctx, cache, desc.Digest, vs); err != nil {
			t.Errorf("entry %s: %v", tag, err)
		}
	}
	return n
}

func signedBy(ctx context.Context, st oci.Store, d v1.Hash, vs []signing.Verifier) error {
	_, sigs, err := signing.ReadSigs(ctx, st, factory.RepoArtifacts, oci.SigTag(d))
	if err != nil {
		return err
	}
	for _, l := range sigs {
		if signing.CheckSignatureLayer(vs[0], l, d) == nil {
			return nil
		}
	}
	return fmt.Errorf("no signature by the factory's key")
}
