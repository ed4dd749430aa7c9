package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/attest/signing/signingtest"
	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
)

// httpGet fetches a URL and returns its status and body.
func httpGet(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var hdr strings.Builder
	resp.Header.Write(&hdr)
	testutil.CheckNoLocalPaths(t, "GET "+url, hdr.String()+string(b))
	return resp.StatusCode, b
}

// retag points the cache entry tagged for one schematic at the entry of
// another, as someone who can write to the cache store could: in repo,
// the tag whose manifest is annotated with schematic from and matches is
// given the manifest of the entry annotated with schematic to.
func retag(t *testing.T, st oci.Store, repo, from, to string, match func(map[string]string) bool) {
	t.Helper()
	ctx := context.Background()
	tags, err := st.Tags(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	var fromTag string
	var toDigest v1.Hash
	for _, tag := range tags {
		if len(tag) != 64 {
			continue
		}
		desc, err := st.Head(ctx, repo, tag)
		if err != nil {
			t.Fatal(err)
		}
		var m struct{ Annotations map[string]string }
		var raw []byte
		if repo == factory.RepoInstallers {
			idx, err := st.Index(ctx, repo, tag)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ = idx.RawManifest()
		} else {
			img, err := st.Image(ctx, repo, tag)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ = img.RawManifest()
		}
		json.Unmarshal(raw, &m)
		if !match(m.Annotations) {
			continue
		}
		switch m.Annotations[factory.AnnotationSchematic] {
		case from:
			fromTag = tag
		case to:
			toDigest = desc.Digest
		}
	}
	if fromTag == "" || toDigest.Hex == "" {
		t.Fatalf("%s: no entries of %s and %s to swap", repo, from, to)
	}
	if repo == factory.RepoInstallers {
		idx, _ := st.Index(ctx, repo, toDigest.String())
		err = st.WriteIndex(ctx, repo, fromTag, idx)
	} else {
		img, _ := st.Image(ctx, repo, toDigest.String())
		err = st.WriteImage(ctx, repo, fromTag, img)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestFactoryTrust: on the demo release, what a factory serves is only
// what it verified for the request. Cache tags of one schematic pointed at
// another's entries (ISO, raw disk, installer index, the schematic
// itself), validly signed by the factory: a replica never serves them,
// counts and rebuilds. A factory with an unreachable release store beside
// a good one serves the good one and names the other in /readyz; with
// only a wrong key it does not start, saying so in its first line. The
// extensions' references are pullable from the factory's /v2/ and verify
// with the release's key. No response of these factories shows a local
// path (newDemoFactory's and replica's servers check every one).
func TestFactoryTrust(t *testing.T) {
	testutil.Slow(t)
	testutil.NoRace(t)
	t.Parallel()
	f := newDemoFactory(t)
	idA := f.postSchematic(t, "customization:\n  systemExtensions:\n    officialExtensions: [zfs]\n")
	idB := f.postSchematic(t, "customization:\n  extraKernelArgs: [init=/bin/sh]\n")
	base := f.hs.URL + "/image/%s/1.11.0-demo/"
	want := map[string][]byte{}
	for _, name := range []string{"metal-amd64.iso", "metal-amd64.raw"} {
		for _, id := range []string{idA, idB} {
			code, b := httpGet(t, strings.Replace(base, "%s", id, 1)+name)
			if code != 200 {
				t.Fatalf("%s of %s: %d", name, id, code)
			}
			want[id+name] = b
		}
	}
	for _, id := range []string{idA, idB} {
		judge(t, "crane", "digest", "--insecure", f.host+"/installer/"+id+":1.11.0-demo")
	}
	cache, err := oci.OpenLayout(f.cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, title := range []string{"metal-x86_64.iso", "metal-x86_64.raw"} {
		retag(t, cache, factory.RepoArtifacts, idA, idB, func(a map[string]string) bool { return a[factory.AnnotationEntryArtifact] == title })
	}
	retag(t, cache, factory.RepoInstallers, idA, idB, func(a map[string]string) bool { return a[factory.AnnotationPlatform] == "" })
	wantInstaller := strings.TrimSpace(judge(t, "crane", "digest", "--insecure", f.host+"/installer/"+idA+":1.11.0-demo"))

	srv, url := f.replica(t)
	for _, name := range []string{"metal-amd64.iso", "metal-amd64.raw"} {
		code, b := httpGet(t, url+"/image/"+idA+"/1.11.0-demo/"+name)
		if code != 200 || !bytes.Equal(b, want[idA+name]) {
			t.Errorf("%s of A after the swap: %d, %d bytes (B's is %d)", name, code, len(b), len(want[idB+name]))
		}
	}
	host := strings.TrimPrefix(url, "http://")
	if got := strings.TrimSpace(judge(t, "crane", "digest", "--insecure", host+"/installer/"+idA+":1.11.0-demo")); got != wantInstaller {
		t.Errorf("the installer of A after the swap: %s, want %s", got, wantInstaller)
	}
	if st := srv.Stats(); st.CacheErrors != 3 || st.Builds != 3 {
		t.Errorf("the replica after three swapped entries: %+v", st)
	}
	_, metrics := httpGetHandler(t, srv.MetricsHandler())
	if !strings.Contains(metrics, "nodeforge_factory_cache_mismatches_total 3\n") {
		t.Errorf("the mismatch metric:\n%s", grepLines(metrics, "mismatch"))
	}

	// Extensions: each reference pulls from the factory, signed by the
	// release's key.
	code, b := httpGet(t, f.hs.URL+"/version/1.11.0-demo/extensions/official")
	var exts []struct{ Name, Ref, Digest string }
	if json.Unmarshal(b, &exts); code != 200 || len(exts) == 0 {
		t.Fatalf("extensions: %d %s", code, b)
	}
	// Names are the demo spec's namespace's (altlinux/zfs); the front
	// serves them as extensions/NAME.
	for _, e := range exts {
		if !strings.HasPrefix(e.Name, "altlinux/") || !strings.HasPrefix(e.Ref, f.host+"/extensions/"+schematic.BareName(e.Name)+":1.11.0-demo@"+e.Digest) {
			t.Errorf("extension %s: ref %s", e.Name, e.Ref)
		}
	}
	judge(t, "crane", "pull", "--insecure", "--format", "oci", exts[0].Ref, t.TempDir())
	judge(t, "cosign", "verify", "--key", f.rel.PubFile, "--insecure-ignore-tlog", "--allow-http-registry", "--allow-insecure-registry",
		f.host+"/extensions/"+schematic.BareName(exts[0].Name)+":1.11.0-demo")

	// Start-up: an unreachable store beside the good one; a wrong key.
	st := f.rel.Store(t)
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := dead.Addr().String()
	dead.Close()
	unreachable, err := oci.NewRemote(deadAddr+"/p11", oci.RemoteOptions{AllowHTTP: true, Retries: 1, RetryDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	vs, signer := f.rel.Keys, f.rel.Signer
	both, err := New(context.Background(), Options{Service: factory.Options{
		Releases: []factory.ReleaseStore{{Store: unreachable, Keys: vs, Name: "docker://ci:s3cret@" + deadAddr + "/p11"}, {Store: st, Keys: vs, Name: "oci:" + f.rel.Layout}},
		Cache:    cache, Signer: signer, BuilderVersion: "test", Work: t.TempDir()}})
	if err != nil {
		t.Fatalf("a factory with one good and one unreachable store: %v", err)
	}
	code, ready := httpGetHandler(t, both.Handler(), "/readyz")
	if code != 200 || !strings.Contains(ready, "ready: v1.11.0-demo\n") || !strings.Contains(ready, "store docker://"+deadAddr+"/p11: no releases listed") ||
		strings.Contains(ready, "s3cret") || strings.Contains(ready, f.rel.Dir) || strings.Count(ready, "\n") != 3 {
		t.Errorf("readyz with an unreachable store: %d\n%s", code, ready)
	}
	prodVs := []signing.Verifier{signingtest.Signer(t).Verifier()} // another key's
	_, err = New(context.Background(), Options{Service: factory.Options{Releases: []factory.ReleaseStore{{Store: st, Keys: prodVs}},
		Cache: cache, Signer: signer, BuilderVersion: "test", Work: t.TempDir()}})
	if first, _, _ := strings.Cut(errString(err), "\n"); !strings.Contains(first, "check --key") {
		t.Errorf("a factory whose only release is signed with another key: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// httpGetHandler asks a handler for a path (default /metrics).
func httpGetHandler(t *testing.T, h http.Handler, path ...string) (int, string) {
	t.Helper()
	p := "/metrics"
	if len(path) > 0 {
		p = path[0]
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", p, nil))
	return rec.Code, rec.Body.String()
}

// grepLines are the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
