package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/testutil"
)

// TestFactoryServe: the factory's API on the demo release in a local
// layout. Schematic IDs are the schematic's (what builder schematic id
// prints); every artifact equals what factory.WriteImage (builder image
// --release) writes (architectures named either way); HEAD, Range, ETag
// and .sha256 work; bad input gets its 4xx.
func TestFactoryServe(t *testing.T) {
	testutil.Slow(t)
	testutil.NoRace(t)
	f := newDemoFactory(t)
	srv, hs := f.srv, f.hs
	get := func(method, path string, body []byte, hdr ...string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, hs.URL+path, bytes.NewReader(body))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}

	// Schematics: the empty one has Talos's default ID.
	resp, b := get("POST", "/schematics", []byte("{}"))
	if resp.StatusCode != 201 || !strings.Contains(string(b), `"id":"376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba"`) {
		t.Fatalf("POST empty schematic: %d %s", resp.StatusCode, b)
	}
	schYAML := "customization:\n  extraKernelArgs: [console=ttyS0]\n  systemExtensions:\n    officialExtensions: [zfs, cri]\n"
	sch, err := schematic.Parse([]byte(schYAML))
	if err != nil {
		t.Fatal(err)
	}
	wantID, err := sch.ID()
	if err != nil {
		t.Fatal(err)
	}
	resp, b = get("POST", "/schematics", []byte(schYAML))
	var created struct{ ID, Schematic string }
	if json.Unmarshal(b, &created); resp.StatusCode != 201 || created.ID != wantID {
		t.Fatalf("POST schematic: %d %s, want ID %s", resp.StatusCode, b, wantID)
	}
	if resp, b = get("GET", "/schematics/"+wantID, nil); resp.StatusCode != 200 || string(b) != created.Schematic || resp.Header.Get("Content-Type") != "application/yaml" {
		t.Errorf("GET schematic: %d %q", resp.StatusCode, b)
	}

	// Artifacts: every file builder image --release (factory.WriteImage on
	// the release verified by factory.Open, --kind all, --compress zst,xz
	// by default; its installer layouts, which are not files, left out:
	// TestFactoryRegistry compares those) writes for a
	// platform of each disk format, byte for byte (architectures named
	// both ways).
	rel, err := factory.Open(context.Background(), f.rel.Store(t), f.rel.Version, f.rel.Keys)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for _, p := range []string{"metal", "nocloud", "aws", "azure", "gcp", "vmware"} {
		out := filepath.Join(t.TempDir(), p)
		if _, err := factory.WriteImage(context.Background(), rel, factory.ImageOptions{Schematic: sch, Platform: p, Compressions: []string{"zst", "xz"}, Out: out}); err != nil {
			t.Fatalf("factory.WriteImage for %s: %v", p, err)
		}
		for n, data := range mediaFiles(t, out) {
			want[n] = data
		}
	}
	// Talos's spelling of the version, and (every other file) the release's.
	base := "/image/" + wantID + "/v1.11.0-demo/"
	served := 0
	for i, file := range slices.Sorted(maps.Keys(want)) {
		if strings.HasPrefix(file, "ipxe-") {
			continue // served at /pxe/, pointing back here
		}
		url := base + file
		if i%2 == 0 {
			url = base + strings.Replace(file, "x86_64", "amd64", 1)
		}
		if i%3 == 0 {
			url = strings.Replace(url, "/v1.11.0-demo/", "/1.11.0-demo/", 1)
		}
		resp, b := get("GET", url, nil)
		if resp.StatusCode != 200 || !bytes.Equal(b, want[file]) {
			t.Errorf("%s: %d, %d bytes; factory.WriteImage wrote %d bytes", url, resp.StatusCode, len(b), len(want[file]))
		}
		served++
	}
	if served < 20 {
		t.Errorf("only %d artifacts compared", served)
	}
	iso := want["metal-x86_64.iso"]
	sum := sha256.Sum256(iso)
	etag := `"sha256:` + hex.EncodeToString(sum[:]) + `"`
	if resp, _ := get("HEAD", base+"metal-amd64.iso", nil); resp.StatusCode != 200 || resp.ContentLength != int64(len(iso)) || resp.Header.Get("ETag") != etag {
		t.Errorf("HEAD: %d, length %d, etag %s", resp.StatusCode, resp.ContentLength, resp.Header.Get("ETag"))
	}
	if resp, b := get("GET", base+"metal-amd64.iso", nil, "Range", "bytes=100-199"); resp.StatusCode != 206 || !bytes.Equal(b, iso[100:200]) {
		t.Errorf("Range: %d, %d bytes", resp.StatusCode, len(b))
	}
	if resp, _ := get("GET", base+"metal-amd64.iso", nil, "If-None-Match", etag); resp.StatusCode != 304 {
		t.Errorf("If-None-Match: %d", resp.StatusCode)
	}
	if resp, b := get("GET", base+"metal-amd64.iso.sha256", nil); resp.StatusCode != 200 || string(b) != hex.EncodeToString(sum[:])+"  metal-amd64.iso\n" {
		t.Errorf(".sha256: %d %q", resp.StatusCode, b)
	}
	if resp, b := get("GET", base+"metal-amd64.iso.sha512", nil); resp.StatusCode != 200 || !strings.HasSuffix(string(b), "  metal-amd64.iso\n") || len(b) != 128+2+len("metal-amd64.iso")+1 {
		t.Errorf(".sha512: %d %q", resp.StatusCode, b)
	}
	// .sig is cosign sign-blob's: stock cosign verifies it offline with
	// the key the factory publishes.
	jd := t.TempDir()
	for file, path := range map[string]string{"iso": base + "metal-amd64.iso", "iso.sig": base + "metal-amd64.iso.sig", "key.pub": "/oci/cosign/signing-key.pub"} {
		resp, b := get("GET", path, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		os.WriteFile(filepath.Join(jd, file), b, 0o644)
	}
	judge(t, "cosign", "verify-blob", "--key", filepath.Join(jd, "key.pub"), "--signature", filepath.Join(jd, "iso.sig"), "--insecure-ignore-tlog=true", filepath.Join(jd, "iso"))

	// The second request for an artifact comes from the cache.
	before := srv.Stats()
	if resp, b := get("GET", base+"metal-amd64.iso", nil); resp.StatusCode != 200 || !bytes.Equal(b, iso) {
		t.Errorf("cached ISO: %d, %d bytes", resp.StatusCode, len(b))
	}
	if st := srv.Stats(); st.Builds != before.Builds || st.Hits <= before.Hits {
		t.Errorf("a second request built again: %+v, then %+v", before, st)
	}
	// A flipped byte in the cached entry, then in its signature: refused,
	// counted, built again, the right bytes served.
	cacheDir := f.cacheDir
	for _, what := range []string{"layer", "signature"} {
		flipCached(t, cacheDir, "metal-x86_64.iso", what)
		before := srv.Stats()
		if resp, b := get("GET", base+"metal-amd64.iso", nil); resp.StatusCode != 200 || !bytes.Equal(b, iso) {
			t.Errorf("after a flipped %s: %d, %d bytes", what, resp.StatusCode, len(b))
		}
		if st := srv.Stats(); st.CacheErrors != before.CacheErrors+1 || st.Builds != before.Builds+1 {
			t.Errorf("after a flipped %s: %+v, then %+v", what, before, st)
		}
	}
	// Rebuilt and signed again: the next request is a hit.
	before = srv.Stats()
	get("GET", base+"metal-amd64.iso", nil)
	if st := srv.Stats(); st.Hits != before.Hits+1 || st.CacheErrors != before.CacheErrors {
		t.Errorf("the overwritten entry: %+v, then %+v", before, st)
	}
	// The same in Prometheus's metrics.
	mrec := httptest.NewRecorder()
	srv.MetricsHandler().ServeHTTP(mrec, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range []string{
		fmt.Sprintf(`nodeforge_factory_cache_hits_total{arch="x86_64",kind="disk",version="1.11.0-demo"} %d`, srv.Stats().Hits),
		`nodeforge_factory_cache_errors_total{arch="x86_64",kind="disk",version="1.11.0-demo"} 2`,
		`nodeforge_factory_schematics_created_total 2`,
		`nodeforge_factory_requests_total{code="201",route="POST /schematics"} 2`,
		`nodeforge_factory_requests_total{code="304",route="GET /image/{id}/{version}/{artifact}"} 1`,
	} {
		if !strings.Contains(mrec.Body.String(), line+"\n") {
			t.Errorf("metrics lack %s:\n%s", line, mrec.Body.String())
		}
	}
	// PXE (upstream's script byte for byte, the version Talos's however
	// asked), versions, extensions, readiness.
	cmdline := strings.TrimSpace(string(want["cmdline-metal-x86_64"]))
	if !strings.HasPrefix(cmdline, "talos.platform=metal console=ttyS0 ") || !strings.HasSuffix(cmdline, " module.sig_enforce=1") {
		t.Errorf("the metal command line: %q", cmdline)
	}
	pxe := "#!ipxe\n\nimgfree\nkernel " + hs.URL + base + "kernel-amd64 " + cmdline + "\ninitrd " + hs.URL + base + "initramfs-amd64.xz\nboot\n"
	for _, v := range []string{"1.11.0-demo", "v1.11.0-demo"} {
		if resp, b := get("GET", "/pxe/"+wantID+"/"+v+"/metal-x86_64", nil); resp.StatusCode != 200 || string(b) != pxe || cmdline == "" {
			t.Errorf("pxe of %s: %d\n%q\nwant\n%q", v, resp.StatusCode, b, pxe)
		}
	}
	if _, b := get("GET", "/versions", nil); strings.TrimSpace(string(b)) != `["v1.11.0-demo"]` {
		t.Errorf("versions: %s", b)
	}
	if _, b := get("GET", "/versions?branch=p10", nil); strings.TrimSpace(string(b)) != `[]` {
		t.Errorf("versions of another branch: %s", b)
	}
	if _, b := get("GET", "/version/1.11.0-demo/extensions/official", nil); !strings.Contains(string(b), `"name":"altlinux/zfs"`) || !strings.Contains(string(b), `"digest":"sha256:`) {
		t.Errorf("extensions: %s", b)
	}
	if resp, b := get("GET", "/readyz", nil); resp.StatusCode != 200 {
		t.Errorf("readyz: %d %s", resp.StatusCode, b)
	}

	// Bad input. An extension no release has is stored (a schematic is
	// version-independent) and refused when media are asked for.
	resp, b = get("POST", "/schematics", []byte("customization:\n  systemExtensions:\n    officialExtensions: [gpu-magic]\n"))
	var magic struct{ ID string }
	if json.Unmarshal(b, &magic); resp.StatusCode != 201 {
		t.Fatalf("POST a schematic with an unknown extension: %d %s", resp.StatusCode, b)
	}
	magicID := magic.ID
	for _, c := range []struct {
		method, path string
		body         []byte
		code         int
		says         string
	}{
		{"POST", "/schematics", []byte("customisation: {}\n"), 400, "customisation"},
		{"POST", "/schematics", bytes.Repeat([]byte("#"), 70<<10), 413, "larger than"},
		{"POST", "/schematics", nil, 400, "EOF"},
		{"POST", "/schematics", []byte("owner: alice\n"), 400, "owner field is only supported in Enterprise edition"},
		{"GET", "/image/" + magicID + "/1.11.0-demo/metal-amd64.iso", nil, 400, `official extension "gpu-magic" is not available for Talos version 1.11.0-demo`},
		{"GET", "/schematics/" + strings.Repeat("0", 64), nil, 404, "not found"},
		{"GET", "/schematics/..%2f..%2fetc", nil, 404, `schematic ID "../../etc" not found`},
		{"GET", base + "metal-amd64.exe", nil, 400, "not an artifact"},
		{"GET", base + "mars-amd64.iso", nil, 400, "unknown platform"},
		{"GET", base + "metal-arm64.iso", nil, 404, "no architecture arm64"},
		{"GET", base + "gcp-amd64.raw.tar.gz.xz", nil, 400, "not compressed further"},
		{"GET", base + "metal-amd64-uki.efi", nil, 400, "has no systemd-stub"},
		{"GET", "/image/" + wantID + "/9.9.9/kernel-amd64", nil, 404, "version 9.9.9 is not available"},
		{"GET", base + "metal-mips.iso", nil, 400, `invalid architecture: "mips"`},
	} {
		resp, b := get(c.method, c.path, c.body)
		if resp.StatusCode != c.code || !strings.Contains(string(b), c.says) {
			t.Errorf("%s %s: %d %q, want %d saying %q", c.method, c.path, resp.StatusCode, b, c.code, c.says)
		}
	}
}

// flipCached flips a byte of the cached artifact named name in the layout
// at dir: its layer, or the layer of its signature.
func flipCached(t *testing.T, dir, name, what string) {
	t.Helper()
	blob := func(d string) string { return filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(d, "sha256:")) }
	var idx struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	json.Unmarshal(b, &idx)
	type manifest struct {
		Layers []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	var entry string
	for _, m := range idx.Manifests {
		var man manifest
		mb, _ := os.ReadFile(blob(m.Digest))
		if json.Unmarshal(mb, &man) == nil && len(man.Layers) == 1 && man.Layers[0].Annotations["org.opencontainers.image.title"] == name {
			entry = m.Digest
			if what == "layer" {
				flipByte(t, blob(man.Layers[0].Digest))
				return
			}
		}
	}
	if entry == "" {
		t.Fatalf("no cache entry of %s in %s", name, dir)
	}
	sigTag := strings.Replace(entry, ":", "-", 1) + ".sig"
	for _, m := range idx.Manifests {
		if strings.HasSuffix(m.Annotations["org.opencontainers.image.ref.name"], ":"+sigTag) {
			var man manifest
			mb, _ := os.ReadFile(blob(m.Digest))
			json.Unmarshal(mb, &man)
			flipByte(t, blob(man.Layers[0].Digest))
			return
		}
	}
	t.Fatalf("no signature of %s", entry)
}

func flipByte(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// mediaFiles are the files factory.WriteImage wrote under out (its one
// media/<schematic id>/ directory), by name; the installer layouts beside
// them are directories, left out.
func mediaFiles(t *testing.T, out string) map[string][]byte {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(out, "media", "*"))
	if len(dirs) != 1 {
		t.Fatalf("%s: media directories %v", out, dirs)
	}
	es, err := os.ReadDir(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range es {
		if e.Type().IsRegular() {
			b, err := os.ReadFile(filepath.Join(dirs[0], e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = b
		}
	}
	return files
}
