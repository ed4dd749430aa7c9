package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/attest/signing/signingtest"
	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/digest"
	nftest "github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
)

// artifactBytes is what the trust tests' build hook makes: n bytes that
// name the artifact and its schematic throughout.
func artifactBytes(name, id string, n int) []byte {
	unit := []byte(name + " of " + id + "\n")
	return bytes.Repeat(unit, n/len(unit)+1)[:n]
}

// trustFactory is an access factory whose builds depend on the schematic
// (so one schematic's bytes are not another's), size bytes each.
func trustFactory(t *testing.T, o Options, size int) *accessFactory {
	t.Helper()
	o.Service.Signer = signingtest.Signer(t)
	f := newAccessFactory(t, o)
	f.svc.BuildWith(func(_ context.Context, _ *factory.VerifiedRelease, sch *schematic.Schematic, a factory.Artifact, arch string) ([]byte, error) {
		id, _ := sch.ID()
		return artifactBytes(a.FileName(arch), id, size), nil
	})
	return f
}

// postSchematic stores a schematic and returns its ID.
func (f *accessFactory) postSchematic(t *testing.T, yaml string) string {
	t.Helper()
	sch, err := schematic.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	id, err := f.svc.AddSchematic(context.Background(), sch, nil)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// get fetches a path and returns its status and body.
func (f *accessFactory) get(t *testing.T, path string, hdr ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", f.url+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v after %d bytes", path, err, len(b))
	}
	return resp.StatusCode, b
}

// registryBlob is the file docker-registry keeps a blob's bytes in.
func registryBlob(r *nftest.Registry, d v1.Hash) string {
	return filepath.Join(r.Dir, "data", "docker", "registry", "v2", "blobs", "sha256", d.Hex[:2], d.Hex, "data")
}

// TestRegistryCacheDamagedBlob: a byte flipped in a cached artifact's
// blob in the registry's storage: the transfer is cut before its end (curl
// exits non-zero), counted, and the next request builds it again. A
// range of it is verified whole first and refused.
func TestRegistryCacheDamagedBlob(t *testing.T) {
	reg := nftest.StartRegistry(t, nftest.RegistryOptions{})
	curl := nftest.NeedTool(t, "curl")
	cache, err := oci.NewRemote(reg.Host+"/cache", oci.RemoteOptions{AllowHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	const size = 300 << 10
	f := trustFactory(t, Options{Service: factory.Options{Cache: cache}}, size)
	path := "/image/" + f.id + "/1.0/metal-amd64.iso"
	want := artifactBytes("metal-x86_64.iso", f.id, size)
	for i := range 2 { // built, then streamed from the registry
		if code, b := f.get(t, path); code != 200 || !bytes.Equal(b, want) {
			t.Fatalf("GET %d: %d, %d bytes", i, code, len(b))
		}
	}
	blob := registryBlob(reg, digest.OCI(want))
	flip := func() {
		b, err := os.ReadFile(blob)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/3] ^= 1
		os.WriteFile(blob, b, 0o644)
	}
	flip()
	out := filepath.Join(t.TempDir(), "iso")
	err = exec.Command(curl, "-sS", "-o", out, f.url+path).Run()
	got, _ := os.ReadFile(out)
	if err == nil || len(got) > size-factory.HoldBack {
		t.Errorf("the damaged blob: curl %v, %d bytes of %d received", err, len(got), size)
	}
	if n := metricValue(t, f, "nodeforge_factory_cache_damaged_total"); n != 1 {
		t.Errorf("damaged metric: %v", n)
	}
	// The registry keeps the damaged blob (it never stores a blob it has
	// again): the artifact is built, and served whole, at each request.
	for range 2 {
		before := f.svc.Stats()
		if code, b := f.get(t, path); code != 200 || !bytes.Equal(b, want) {
			t.Errorf("after the damage: %d, %d bytes", code, len(b))
		}
		if st := f.svc.Stats(); st.Builds != before.Builds+1 {
			t.Errorf("the damaged entry was not built again: %+v, then %+v", before, st)
		}
	}
	// Repaired in the store: served from it again, with no build.
	flip()
	f.get(t, path)
	before := f.svc.Stats()
	if code, b := f.get(t, path); code != 200 || !bytes.Equal(b, want) || f.svc.Stats().Builds != before.Builds {
		t.Errorf("the repaired entry: %d, %d bytes, %+v then %+v", code, len(b), before, f.svc.Stats())
	}

	// A range: the blob is verified whole before any byte of it is sent.
	path = "/image/" + f.id + "/1.0/metal-amd64.raw"
	want = artifactBytes("metal-x86_64.raw", f.id, size)
	f.get(t, path)
	blob = registryBlob(reg, digest.OCI(want))
	flip()
	code, b := f.get(t, path, "Range", "bytes=0-99")
	if code != 500 || bytes.Contains(b, want[:100]) {
		t.Errorf("a range of the damaged blob: %d %.80q", code, b)
	}
	if code, b := f.get(t, path, "Range", "bytes=0-99"); code != 206 || !bytes.Equal(b, want[:100]) {
		t.Errorf("a range after the rebuild: %d %.80q", code, b)
	}
}

// TestLayoutCacheReverified: a cached file changed without changing its
// size or time (bit rot, touch -r) is hashed again once the verification
// interval has passed, refused and built again.
func TestLayoutCacheReverified(t *testing.T) {
	f := trustFactory(t, Options{Service: factory.Options{VerifyInterval: time.Minute}}, 8192)
	clock := time.Now()
	f.svc.SetClock(func() time.Time { return clock })
	path := "/image/" + f.id + "/1.0/metal-amd64.raw"
	want := artifactBytes("metal-x86_64.raw", f.id, 8192)
	for range 2 {
		if code, b := f.get(t, path); code != 200 || !bytes.Equal(b, want) {
			t.Fatalf("GET: %d, %d bytes", code, len(b))
		}
	}
	file, err := f.o.Cache.(*oci.Layout).BlobFile(digest.OCI(want))
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(file)
	b, _ := os.ReadFile(file)
	b[100] ^= 1
	os.WriteFile(file, b, 0o644)
	os.Chtimes(file, fi.ModTime(), fi.ModTime())
	clock = clock.Add(2 * time.Minute)
	before := f.svc.Stats()
	if code, b := f.get(t, path); code != 200 || !bytes.Equal(b, want) {
		t.Errorf("after the flip and the interval: %d, %d bytes", code, len(b))
	}
	if st := f.svc.Stats(); st.CacheErrors != before.CacheErrors+1 || st.Builds != before.Builds+1 {
		t.Errorf("%+v, then %+v", before, st)
	}
}

// TestSchematicLimits: 1,000 new schematics from one client: past its
// burst they get 429 with Retry-After, and neither the store nor the
// memory grows past the limits; past the cap of stored schematics a new
// one gets 507 while known ones are still accepted.
func TestSchematicLimits(t *testing.T) {
	f := trustFactory(t, Options{Access: Access{SchematicRate: 1, SchematicBurst: 20}}, 16)
	post := func(f *accessFactory, i int) (*http.Response, string) {
		body := fmt.Sprintf("customization:\n  extraKernelArgs: [nodeforge.n=%d, %s]\n", i, strings.Repeat("x", 200))
		resp, err := http.Post(f.url+"/schematics", "application/yaml", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	codes := map[int]int{}
	for i := range 1000 {
		resp, body := post(f, i)
		codes[resp.StatusCode]++
		if resp.StatusCode == 429 && (resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "too many new schematics")) {
			t.Fatalf("429 without Retry-After or its reason: %q", body)
		}
	}
	if codes[201] < 20 || codes[201] > 22 || codes[429] != 1000-codes[201] {
		t.Errorf("1,000 new schematics from one client: %v", codes)
	}
	if n, seen := f.svc.SchematicCounts(); n > 23 || seen > 23 {
		t.Errorf("stored %d, %d in memory", n, seen)
	}
	// A schematic the factory has is not a new one.
	if resp, _ := post(f, 0); resp.StatusCode != 201 {
		t.Errorf("posting a known schematic past the rate: %d", resp.StatusCode)
	}

	g := trustFactory(t, Options{Service: factory.Options{MaxSchematics: 10}}, 16)
	for i := range 12 {
		resp, body := post(g, i)
		want := 201
		if i >= 9 { // the empty schematic is the tenth
			want = 507
		}
		if resp.StatusCode != want {
			t.Errorf("schematic %d with a cap of 10: %d %q", i, resp.StatusCode, body)
		}
	}
	if resp, _ := post(g, 3); resp.StatusCode != 201 {
		t.Errorf("a known schematic at the cap: %d", resp.StatusCode)
	}
}

// TestSlowBodies: 500 connections that send a body a byte at a time are
// answered 408 and closed once the body timeout has passed; a download
// taking longer than it is not cut.
func TestSlowBodies(t *testing.T) {
	f := trustFactory(t, Options{BodyTimeout: time.Second}, 1<<20)
	addr := strings.TrimPrefix(f.url, "http://")
	const conns = 500
	type result struct {
		status string
		took   time.Duration
		err    error
	}
	results := make(chan result, conns)
	start := time.Now()
	for range conns {
		go func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				results <- result{err: err}
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "POST /schematics HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nc")
			c.SetReadDeadline(time.Now().Add(20 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			results <- result{status: strings.TrimSpace(line), took: time.Since(start), err: err}
		}()
	}
	for range conns {
		r := <-results
		if r.err != nil || !strings.Contains(r.status, "408") || r.took > 15*time.Second {
			t.Errorf("a slow body: %q after %s: %v", r.status, r.took, r.err)
			break
		}
	}
	// A long answer is not bound by the body timeout.
	f.svc.BuildWith(func(ctx context.Context, _ *factory.VerifiedRelease, _ *schematic.Schematic, a factory.Artifact, arch string) ([]byte, error) {
		time.Sleep(1500 * time.Millisecond)
		return []byte(a.FileName(arch)), nil
	})
	if code, b := f.get(t, "/image/"+f.id+"/1.0/kernel-amd64"); code != 200 || string(b) != "kernel-x86_64" {
		t.Errorf("a build longer than the body timeout: %d %q", code, b)
	}
}

// TestRanges: Range requests are bounded: an empty suffix is 416, many
// ranges give the whole artifact, overlapping ones are merged.
func TestRanges(t *testing.T) {
	for _, c := range []struct {
		in, out string
		ok      bool
	}{
		{"bytes=-0", "", false},
		{"bytes=100-", "", false},
		{"bytes=0-9", "bytes=0-9", true},
		{"bytes=-10", "bytes=90-99", true},
		{"bytes=-1000", "bytes=0-99", true},
		{"bytes=0-9,5-20,21-30,50-60", "bytes=0-30,50-60", true},
		{"bytes=50-60, 0-9", "bytes=0-9,50-60", true},
		{"bytes=-0,0-4", "bytes=0-4", true},
		{"bytes=9-2", "bytes=9-2", true}, // not a range: ServeContent answers it
		{"items=0-1", "items=0-1", true},
		{"bytes=" + strings.Repeat("0-0,", 16) + "2-2,4-4,6-6,8-8,10-10,12-12,14-14,16-16,18-18,20-20,22-22,24-24,26-26,28-28,30-30,32-32", "", true},
	} {
		out, ok := normalizeRange(c.in, 100)
		if out != c.out || ok != c.ok {
			t.Errorf("%q: %q %v, want %q %v", c.in, out, ok, c.out, c.ok)
		}
	}
	f := trustFactory(t, Options{}, 108<<10)
	path := "/image/" + f.id + "/1.0/metal-amd64.iso"
	want := artifactBytes("metal-x86_64.iso", f.id, 108<<10)
	f.get(t, path)
	if code, _ := f.get(t, path, "Range", "bytes=-0"); code != 416 {
		t.Errorf("bytes=-0: %d", code)
	}
	var many []string
	for i := range 10000 {
		many = append(many, fmt.Sprintf("%d-%d", i*10, i*10))
	}
	req, _ := http.NewRequest("GET", f.url+path, nil)
	req.Header.Set("Range", "bytes="+strings.Join(many, ","))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(b) != len(want) {
		t.Errorf("10,000 ranges: %d, %d bytes", resp.StatusCode, len(b))
	}
	if code, b := f.get(t, path, "Range", "bytes=0-99,50-149"); code != 206 || !bytes.Equal(b, want[:150]) {
		t.Errorf("overlapping ranges: %d, %d bytes", code, len(b))
	}
}

// TestOverlays: a schematic with an overlay is stored whatever its name
// and image (as upstream), and a release that ships no overlays refuses
// to make media for one (400), instead of ignoring it.
func TestOverlays(t *testing.T) {
	f := trustFactory(t, Options{}, 16)
	// An overlay is stored as sent when its name and image are a name and
	// a reference (upstream stores any string; a path in them can only be
	// hostile): the release refuses it when media are asked for.
	for body, want := range map[string]int{
		"overlay:\n  name: rpi_generic\n  image: ../../../etc/passwd\n":        400,
		"overlay:\n  name: ../x\n  image: siderolabs/sbc-raspberrypi\n":        400,
		"overlay:\n  image: siderolabs/sbc-raspberrypi\n":                      201,
		"overlay:\n  name: rpi_generic\n  image: siderolabs/sbc-raspberrypi\n": 201,
	} {
		resp, err := http.Post(f.url+"/schematics", "application/yaml", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%q: %d %s", body, resp.StatusCode, b)
		}
	}
	id := f.postSchematic(t, "overlay:\n  name: rpi_generic\n  image: siderolabs/sbc-raspberrypi\n")
	for _, path := range []string{"/image/" + id + "/1.0/metal-arm64.raw", "/image/" + id + "/1.0/kernel-amd64", "/pxe/" + id + "/1.0/metal-amd64", "/v2/installer/" + id + "/manifests/1.0"} {
		code, b := f.get(t, path)
		if code != 400 || !strings.Contains(string(b), "ships no overlays") {
			t.Errorf("%s: %d %s", path, code, b)
		}
	}
	if f.svc.Stats().Builds != 0 {
		t.Errorf("%d builds for a schematic with an overlay", f.svc.Stats().Builds)
	}
}

// metricValue reads a series without labels of the factory's metrics.
func metricValue(t *testing.T, f *accessFactory, name string) float64 {
	t.Helper()
	families, err := f.svc.Metrics().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
