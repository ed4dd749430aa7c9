package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/attest/signing/signingtest"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/builder/media/secureboot"
	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/release"
)

// The compatibility tests of docs/talos-compatibility.md's sections
// Versions, Routes, headers and errors, Downloads, PXE and Registry front:
// one subtest per row, named as the row names it, written from upstream's
// documented API and code (siderolabs/image-factory).

// compatDo sends a request with headers (name, value pairs) and returns
// the response with its body read; redirects are not followed.
func compatDo(t *testing.T, f *accessFactory, method, path string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// compatFactory serves 1.0 (x86_64, the access factory's), 1.2.0 (marked
// broken), 1.9.0-demo, 1.10.0 and the pre-release 1.11.0-rc.1, with a
// signed installer index cached for 1.0 and 1.10.0 (so /v2/ serves them
// without building).
func compatFactory(t *testing.T, o Options) *accessFactory {
	t.Helper()
	o.Service.Signer = signingtest.Signer(t)
	if o.Service.BrokenVersions == nil {
		o.Service.BrokenVersions = []string{"v1.2.0"}
	}
	f := newAccessFactory(t, o)
	var rels []*factory.VerifiedRelease
	for _, v := range []string{"1.0", "1.2.0", "1.9.0-demo", "1.10.0", "1.11.0-rc.1"} {
		rels = append(rels, &factory.VerifiedRelease{Version: v, Params: compose.Params{Architectures: []string{"x86_64"}}, Digests: map[string]string{}})
	}
	f.svc.ServeUnverified(rels...)
	for _, rel := range []*factory.VerifiedRelease{rels[0], rels[3]} {
		img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: static.NewLayer([]byte("installer "+rel.Version), types.OCILayer)})
		if err != nil {
			t.Fatal(err)
		}
		idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{Add: img})
		if err := f.svc.CacheInstaller(context.Background(), rel, f.id, factory.InstallerKind{}, idx); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// wantAnswer checks a response's status and, when want is not "", its
// body: exactly want, or containing it when want starts with "~".
func wantAnswer(t *testing.T, what string, resp *http.Response, body string, code int, want string) {
	t.Helper()
	ok := resp.StatusCode == code
	if w, sub := strings.CutPrefix(want, "~"); sub {
		ok = ok && strings.Contains(body, w)
	} else if want != "" {
		ok = ok && body == want
	}
	if !ok {
		t.Errorf("%s: %d %q, want %d %q", what, resp.StatusCode, body, code, want)
	}
}

func TestCompatVersions(t *testing.T) {
	f := compatFactory(t, Options{})
	id := f.id
	t.Run("listed", func(t *testing.T) {
		resp, body := compatDo(t, f, "GET", "/versions")
		wantAnswer(t, "/versions", resp, body, 200, `["v1.0","v1.9.0-demo","v1.10.0","v1.11.0-rc.1"]`+"\n")
	})
	t.Run("either spelling", func(t *testing.T) {
		for _, v := range []string{"v1.0", "1.0", "v1.9.0-demo", "1.9.0-demo"} {
			for _, p := range []string{"/image/" + id + "/" + v + "/kernel-amd64", "/pxe/" + id + "/" + v + "/metal-amd64",
				"/version/" + v + "/extensions/official", "/version/" + v + "/overlays/official"} {
				if resp, body := compatDo(t, f, "GET", p); resp.StatusCode != 200 {
					t.Errorf("GET %s: %d %q", p, resp.StatusCode, body)
				}
			}
			resp, body := compatDo(t, f, "GET", "/talosctl/"+v)
			wantAnswer(t, "/talosctl/"+v, resp, body, 404, "~talosctl is not available for version "+factory.TalosVersion(v))
		}
		for _, v := range []string{"v1.0", "1.0"} {
			resp, body := compatDo(t, f, "GET", "/v2/installer/"+id+"/manifests/"+v)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != string(types.OCIImageIndex) {
				t.Errorf("installer/ID:%s: %d %q", v, resp.StatusCode, body)
			}
		}
	})
	t.Run("latest", func(t *testing.T) {
		// 1.11.0-rc.1 is newer but a pre-release; 1.9.0-demo is a build of
		// 1.9.0, not a pre-release; 1.2.0 is broken.
		if rel := f.svc.Latest(); rel == nil || rel.Version != "1.10.0" {
			t.Fatalf("latest: %+v", rel)
		}
		latest, _ := compatDo(t, f, "GET", "/v2/installer/"+id+"/manifests/latest")
		named, _ := compatDo(t, f, "GET", "/v2/installer/"+id+"/manifests/v1.10.0")
		if latest.StatusCode != 200 || latest.Header.Get("Docker-Content-Digest") != named.Header.Get("Docker-Content-Digest") {
			t.Errorf("latest: %d %s, v1.10.0: %s", latest.StatusCode, latest.Header.Get("Docker-Content-Digest"), named.Header.Get("Docker-Content-Digest"))
		}
		only := newAccessFactory(t, Options{})
		only.svc.ServeUnverified(&factory.VerifiedRelease{Version: "1.12.0-beta.0", Digests: map[string]string{}})
		if rel := only.svc.Latest(); rel != nil {
			t.Errorf("latest of a pre-release only: %s", rel.Version)
		}
	})
	t.Run("broken", func(t *testing.T) {
		resp, body := compatDo(t, f, "GET", "/versions?broken=true")
		wantAnswer(t, "?broken=true", resp, body, 200, `["v1.2.0"]`+"\n")
		for _, p := range []string{"/image/" + id + "/1.2.0/kernel-amd64", "/pxe/" + id + "/v1.2.0/metal-amd64", "/version/1.2.0/extensions/official"} {
			resp, body := compatDo(t, f, "GET", p)
			wantAnswer(t, p, resp, body, 404, "version 1.2.0 is not available\n")
		}
		resp, body = compatDo(t, f, "GET", "/v2/installer/"+id+"/tags/list")
		if !strings.Contains(body, `"tags":["latest","v1.0","v1.10.0","v1.11.0-rc.1","v1.9.0-demo"]`) {
			t.Errorf("tags/list: %d %s", resp.StatusCode, body)
		}
		none := newAccessFactory(t, Options{})
		resp, body = compatDo(t, none, "GET", "/versions?broken=true")
		wantAnswer(t, "?broken=true by default", resp, body, 200, "[]\n")
		if _, err := newServer(Options{Service: factory.Options{Cache: f.o.Cache, Releases: f.o.Releases, BrokenVersions: []string{"v"}}}); err == nil || !strings.Contains(err.Error(), `broken version "v"`) {
			t.Errorf("a broken version naming nothing: %v", err)
		}
	})
	t.Run("unknown", func(t *testing.T) {
		for _, p := range []string{"/image/" + id + "/v9.9.9/kernel-amd64", "/version/9.9.9/extensions/official", "/version/v9.9.9/overlays/official", "/talosctl/v9.9.9"} {
			resp, body := compatDo(t, f, "GET", p)
			wantAnswer(t, p, resp, body, 404, "version 9.9.9 is not available\n")
		}
	})
	t.Run("warm either spelling", func(t *testing.T) {
		rep, err := f.svc.Warm(context.Background(), factory.WarmOptions{Version: "v1.0", Schematics: []string{id}, Artifacts: []string{"kernel"}})
		if err != nil || rep.Version != "1.0" || len(rep.Items) != 1 {
			t.Errorf("warm v1.0: %+v %v", rep, err)
		}
		if _, err := f.svc.Warm(context.Background(), factory.WarmOptions{Version: "1.2.0", Schematics: []string{id}}); err == nil || !strings.Contains(err.Error(), "marked broken") {
			t.Errorf("warm of a broken version: %v", err)
		}
	})
}

func TestCompatRoutes(t *testing.T) {
	f := compatFactory(t, Options{Access: Access{Login: []string{"download", "pull"}, Credentials: testCredentials(t)}})
	alice := "Basic " + b64("alice:"+alicePassword)
	kernel := "/image/" + f.id + "/v1.0/kernel-amd64"
	t.Run("server header", func(t *testing.T) {
		for _, p := range []string{kernel, "/versions", "/v2/", "/healthz", "/nosuch"} {
			if resp, _ := compatDo(t, f, "GET", p, "Authorization", alice); resp.Header.Get("Server") != "Nodeforge Image Factory test" {
				t.Errorf("%s: Server %q", p, resp.Header.Get("Server"))
			}
		}
	})
	t.Run("cors", func(t *testing.T) {
		for _, m := range []string{"GET", "HEAD"} {
			resp, _ := compatDo(t, f, m, kernel, "Authorization", alice, "Origin", "https://foo.com")
			if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
				resp.Header.Get("Access-Control-Expose-Headers") != "Content-Disposition, Content-Length, Content-Type" || resp.Header.Get("Vary") != "Origin" {
				t.Errorf("%s across origins: %d %v", m, resp.StatusCode, resp.Header)
			}
		}
		resp, _ := compatDo(t, f, "POST", "/schematics", "Authorization", alice, "Origin", "https://foo.com")
		if resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("POST across origins is allowed: %v", resp.Header)
		}
	})
	t.Run("preflight", func(t *testing.T) {
		// No login: a browser sends none with a preflight.
		resp, body := compatDo(t, f, "OPTIONS", kernel, "Origin", "https://foo.com", "Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "cache-control")
		if resp.StatusCode != 204 || body != "" || resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Access-Control-Allow-Methods") != "GET" ||
			resp.Header.Get("Access-Control-Allow-Headers") != "cache-control" || resp.Header.Get("Vary") != "Origin, Access-Control-Request-Method, Access-Control-Request-Headers" {
			t.Errorf("preflight: %d %v %q", resp.StatusCode, resp.Header, body)
		}
		for _, hdr := range [][]string{{"Access-Control-Request-Method", "POST"}, {"Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "authorization"}} {
			resp, _ := compatDo(t, f, "OPTIONS", kernel, append([]string{"Origin", "https://foo.com"}, hdr...)...)
			if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("preflight %v: %d %v", hdr, resp.StatusCode, resp.Header)
			}
		}
		// An OPTIONS that is no preflight is a request like any other.
		if resp, _ := compatDo(t, f, "OPTIONS", kernel); resp.StatusCode != 401 {
			t.Errorf("OPTIONS without a login: %d", resp.StatusCode)
		}
	})
	t.Run("cors origins", func(t *testing.T) {
		g := newAccessFactory(t, Options{AllowedOrigins: []string{"https://*.example.org", "http://localhost:3000"}})
		for origin, want := range map[string]string{"https://ui.example.org": "https://ui.example.org", "http://LOCALHOST:3000": "http://LOCALHOST:3000", "https://evil.test": "", "https://example.org": ""} {
			resp, _ := compatDo(t, g, "GET", "/versions", "Origin", origin)
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != want {
				t.Errorf("origin %s: allowed %q, want %q", origin, got, want)
			}
		}
		for _, bad := range []string{"example.org", "https://a/b", "https://*.*.org", ""} {
			if _, err := newServer(Options{Service: factory.Options{Cache: g.o.Cache, Releases: g.o.Releases}, AllowedOrigins: []string{bad}}); err == nil {
				t.Errorf("allowed origin %q accepted", bad)
			}
		}
	})
	t.Run("schematic not found", func(t *testing.T) {
		unknown := strings.Repeat("0", 64)
		for _, id := range []string{unknown, "aaaaaaaaaaaa", "ZZ"} {
			for _, p := range []string{"/image/" + id + "/v1.0/metal-amd64.iso", "/pxe/" + id + "/v1.0/metal-amd64", "/schematics/" + id} {
				resp, body := compatDo(t, f, "GET", p, "Authorization", alice)
				wantAnswer(t, p, resp, body, 404, `schematic ID "`+id+`" not found`+"\n")
				if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
					t.Errorf("%s: error as %s", p, ct)
				}
			}
		}
	})
	t.Run("overlays", func(t *testing.T) {
		resp, body := compatDo(t, f, "GET", "/version/v1.0/overlays/official", "Authorization", alice)
		wantAnswer(t, "overlays", resp, body, 200, "[]\n")
	})
	t.Run("talosctl", func(t *testing.T) {
		for _, p := range []string{"/talosctl/v1.0", "/talosctl/1.0/talosctl-linux-amd64"} {
			resp, body := compatDo(t, f, "GET", p, "Authorization", alice)
			wantAnswer(t, p, resp, body, 404, "talosctl is not available for version v1.0: the release ships no talosctl binaries (image.talosctl)\n")
		}
	})
}

// Row "GET /talosctl/V": a release whose installer carries talosctl
// lists its binaries by URL, as upstream, and serves each (both version
// spellings, HEAD too); other names are 404.
func TestCompatTalosctl(t *testing.T) {
	f := newAccessFactory(t, Options{})
	f.svc.ServeUnverified(f.svc.Release("1.0"), compatRelease(t, false, nil, true))
	for _, v := range []string{"v1.11.0", "1.11.0"} {
		resp, body := compatDo(t, f, "GET", "/talosctl/"+v)
		wantAnswer(t, "list "+v, resp, body, 200, `["`+f.url+`/talosctl/v1.11.0/talosctl-linux-amd64","`+f.url+`/talosctl/v1.11.0/talosctl-linux-arm64"]`+"\n")
	}
	for arch, goArch := range map[string]string{"x86_64": "amd64", "aarch64": "arm64"} {
		p := "/talosctl/v1.11.0/talosctl-linux-" + goArch
		resp, body := compatDo(t, f, "GET", p)
		wantAnswer(t, p, resp, body, 200, "talosctl for "+arch)
		if resp.Header.Get("Content-Disposition") != `attachment; filename="talosctl-linux-`+goArch+`"` || resp.Header.Get("Content-Type") != "application/octet-stream" {
			t.Errorf("%s: %v", p, resp.Header)
		}
		resp, body = compatDo(t, f, "HEAD", p)
		if resp.StatusCode != 200 || body != "" || resp.ContentLength != int64(len("talosctl for "+arch)) {
			t.Errorf("HEAD %s: %d %q %d", p, resp.StatusCode, body, resp.ContentLength)
		}
	}
	// A damaged layer: nothing of it is served.
	rel := f.svc.Release("1.11.0")
	img, err := rel.Image(context.Background(), release.RepoInstaller, "aarch64")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := img.Manifest()
	blob := filepath.Join(rel.Store.(*oci.Layout).Dir, "blobs", "sha256", m.Layers[0].Digest.Hex)
	gz, _ := os.ReadFile(blob)
	zr, _ := gzip.NewReader(bytes.NewReader(gz))
	raw, _ := io.ReadAll(zr)
	var bad bytes.Buffer
	zw := gzip.NewWriter(&bad)
	zw.Write(bytes.Replace(raw, []byte("talosctl for aarch64"), []byte("talosctl for evil!!!"), 1))
	zw.Close()
	if err := os.WriteFile(blob, bad.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	resp, body := compatDo(t, f, "GET", "/talosctl/v1.11.0/talosctl-linux-arm64")
	if resp.StatusCode != 500 || strings.Contains(body, "evil") {
		t.Errorf("damaged layer: %d %q", resp.StatusCode, body)
	}
	for _, p := range []string{"/talosctl/v1.11.0/talosctl-darwin-amd64", "/talosctl/v1.11.0/talosctl-linux-riscv64", "/talosctl/v1.11.0/installer"} {
		resp, body := compatDo(t, f, "GET", p)
		wantAnswer(t, p, resp, body, 404, "~is not a talosctl binary of version v1.11.0")
	}
}

func TestCompatDownloads(t *testing.T) {
	f := compatFactory(t, Options{})
	img := "/image/" + f.id + "/v1.0/"
	t.Run("content types", func(t *testing.T) {
		for name, want := range map[string]string{
			"metal-amd64.iso": "application/x-iso9660-image", "metal-amd64.raw.xz": "application/x-xz", "metal-amd64.raw.zst": "application/zstd",
			"metal-amd64.qcow2": "application/x-qemu-disk", "gcp-amd64.raw.tar.gz": "application/gzip", "initramfs-amd64.xz": "application/x-xz",
			"kernel-amd64": "application/octet-stream", "metal-amd64.raw": "application/octet-stream", "azure-amd64.vhd": "application/octet-stream",
		} {
			resp, _ := compatDo(t, f, "GET", img+name)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != want {
				t.Errorf("%s: %d %s, want %s", name, resp.StatusCode, resp.Header.Get("Content-Type"), want)
			}
		}
		// Names the table knows whatever artifacts parse today.
		for name, want := range map[string]string{"metal-amd64-uki.efi": "application/efi", "installer-amd64.tar": "application/x-tar",
			"vmware-amd64.ova": "application/ovf", "metal-amd64.iso.sha256": "application/octet-stream", "README": "application/octet-stream"} {
			if got := contentType(name); got != want {
				t.Errorf("contentType(%s) = %s, want %s", name, got, want)
			}
		}
	})
	t.Run("disposition", func(t *testing.T) {
		for q, want := range map[string]string{"": `attachment; filename="metal-amd64.iso"`, "?filename=custom-filename.iso": `attachment; filename="custom-filename.iso"`,
			// What cannot stand between quotes is encoded, never a header of its own.
			"?filename=a%22b%0D%0AX-Evil:%201": `attachment; filename*=utf-8''a%22b%0D%0AX-Evil%3A%201`} {
			resp, _ := compatDo(t, f, "GET", img+"metal-amd64.iso"+q)
			if got := resp.Header.Get("Content-Disposition"); resp.StatusCode != 200 || got != want || resp.Header.Get("X-Evil") != "" {
				t.Errorf("%q: %d Content-Disposition %q, want %q", q, resp.StatusCode, got, want)
			}
			if resp.Header.Get("Content-Type") != "application/x-iso9660-image" {
				t.Errorf("%q: the type follows the artifact, not the name: %s", q, resp.Header.Get("Content-Type"))
			}
		}
	})
	t.Run("length and head", func(t *testing.T) {
		get, body := compatDo(t, f, "GET", img+"metal-amd64.iso")
		head, hbody := compatDo(t, f, "HEAD", img+"metal-amd64.iso")
		if get.ContentLength != int64(len(body)) || head.StatusCode != 200 || head.ContentLength != int64(len(body)) || hbody != "" {
			t.Errorf("GET %d bytes (length %d), HEAD %d length %d", len(body), get.ContentLength, head.StatusCode, head.ContentLength)
		}
	})
	t.Run("sigstore bundle", func(t *testing.T) {
		resp, body := compatDo(t, f, "GET", "/image/"+strings.Repeat("0", 64)+"/v1.0/metal-amd64.iso.sigstore.json")
		wantAnswer(t, ".sigstore.json", resp, body, 402, "~signature endpoint is not available")
	})
	t.Run("side files", func(t *testing.T) {
		for _, ext := range []string{".sha256", ".sha512", ".sig"} {
			if resp, body := compatDo(t, f, "GET", img+"kernel-amd64"+ext); resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "text/plain") {
				t.Errorf("%s: %d %q", ext, resp.StatusCode, body)
			}
		}
	})
	t.Run("bad name", func(t *testing.T) {
		resp, body := compatDo(t, f, "GET", img+"metal-amd64.ssd")
		wantAnswer(t, "metal-amd64.ssd", resp, body, 400, `~error parsing profile from path: "metal-amd64.ssd"`)
	})
	t.Run("architectures", func(t *testing.T) {
		for _, name := range []string{"kernel-foo", "metal-mips.iso", "initramfs-amd65.xz"} {
			arch := strings.TrimSuffix(strings.TrimSuffix(name[strings.LastIndex(name, "-")+1:], ".xz"), ".iso")
			resp, body := compatDo(t, f, "GET", img+name)
			wantAnswer(t, name, resp, body, 400, `error parsing profile from path: invalid architecture: "`+arch+`"`+"\n")
		}
		for _, name := range []string{"kernel-x86_64", "kernel-i386", "metal-x86_64.iso"} {
			if resp, body := compatDo(t, f, "GET", img+name); resp.StatusCode != 200 {
				t.Errorf("%s: %d %q", name, resp.StatusCode, body)
			}
		}
		resp, body := compatDo(t, f, "GET", img+"kernel-arm64")
		wantAnswer(t, "kernel-arm64", resp, body, 404, "release v1.0 has no architecture arm64 (it has x86_64)\n")
	})
	t.Run("secure boot disabled", func(t *testing.T) {
		resp, body := compatDo(t, f, "GET", img+"metal-amd64-secureboot.iso")
		wantAnswer(t, "secureboot", resp, body, 400, "~error enhancing profile from schematic: secure boot is disabled")
	})
	t.Run("order", func(t *testing.T) {
		// The schematic first, then the name, then the version.
		resp, _ := compatDo(t, f, "GET", "/image/aaaaaaaaaaaa/v9.9.9/metal-amd64.ssd")
		resp2, _ := compatDo(t, f, "GET", "/image/"+f.id+"/v9.9.9/metal-amd64.ssd")
		if resp.StatusCode != 404 || resp2.StatusCode != 400 {
			t.Errorf("unknown schematic and name: %d; unknown version and bad name: %d", resp.StatusCode, resp2.StatusCode)
		}
	})
}

func TestCompatPXE(t *testing.T) {
	f := compatFactory(t, Options{})
	host := strings.TrimPrefix(f.url, "http://")
	script := func(base, file string) string {
		dir := base + "/image/" + f.id + "/v1.0/"
		return "#!ipxe\n\nimgfree\nkernel " + dir + "kernel-amd64 " + file + "\ninitrd " + dir + "initramfs-amd64.xz\nboot\n"
	}
	t.Run("script", func(t *testing.T) {
		for _, target := range []string{"1.0/metal-amd64", "v1.0/metal-amd64", "v1.0/metal-x86_64", "1.0/metal-i386"} {
			resp, body := compatDo(t, f, "GET", "/pxe/"+f.id+"/"+target)
			wantAnswer(t, target, resp, body, 200, script("http://"+host, "cmdline-metal-x86_64"))
			if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("%s: %s", target, ct)
			}
		}
	})
	t.Run("external url", func(t *testing.T) {
		f.o.ExternalURL = "https://factory.example.org/f/"
		defer func() { f.o.ExternalURL = "" }()
		resp, body := compatDo(t, f, "GET", "/pxe/"+f.id+"/1.0/metal-amd64")
		wantAnswer(t, "external", resp, body, 200, script("https://factory.example.org/f", "cmdline-metal-x86_64"))
	})
	t.Run("secure boot", func(t *testing.T) {
		resp, body := compatDo(t, f, "GET", "/pxe/"+f.id+"/1.0/metal-amd64-secureboot")
		wantAnswer(t, "without keys", resp, body, 400, "~error enhancing profile from schematic: secure boot is disabled")
		f.o.SecureBoot = &secureboot.Signing{}
		defer func() { f.o.SecureBoot = nil }()
		resp, body = compatDo(t, f, "GET", "/pxe/"+f.id+"/1.0/metal-x86_64-secureboot")
		wantAnswer(t, "secureboot", resp, body, 200, "#!ipxe\n\nimgfree\nkernel http://"+host+"/image/"+f.id+"/v1.0/metal-amd64-secureboot-uki.efi cmdline-metal-x86_64\nboot\n")
	})
	t.Run("credentials", func(t *testing.T) {
		g := compatFactory(t, Options{Access: Access{Login: []string{"download"}, Credentials: testCredentials(t)}})
		ghost := strings.TrimPrefix(g.url, "http://")
		resp, body := compatDo(t, g, "GET", "/pxe/"+g.id+"/1.0/metal-amd64", "Authorization", "Basic "+b64("alice:"+alicePassword))
		dir := "http://alice:" + alicePassword + "@" + ghost + "/image/" + g.id + "/v1.0/"
		wantAnswer(t, "with a login", resp, body, 200, "#!ipxe\n\nimgfree\nkernel "+dir+"kernel-amd64 cmdline-metal-x86_64\ninitrd "+dir+"initramfs-amd64.xz\nboot\n")
	})
	t.Run("bad target", func(t *testing.T) {
		resp, body := compatDo(t, f, "GET", "/pxe/"+f.id+"/1.0/metal")
		wantAnswer(t, "metal", resp, body, 400, "~invalid platform-arch")
	})
}

func TestCompatRegistry(t *testing.T) {
	f := compatFactory(t, Options{})
	t.Run("ping", func(t *testing.T) {
		for _, p := range []string{"/v2", "/v2/"} {
			resp, body := compatDo(t, f, "GET", p)
			wantAnswer(t, p, resp, body, 200, "{}")
		}
	})
	t.Run("tags", func(t *testing.T) {
		for _, ref := range []string{"v1.0", "1.0", "latest", "v1.10.0"} {
			resp, body := compatDo(t, f, "GET", "/v2/installer/"+f.id+"/manifests/"+ref)
			if resp.StatusCode != 200 || resp.Header.Get("Docker-Content-Digest") == "" {
				t.Errorf("installer/ID:%s: %d %q", ref, resp.StatusCode, body)
			}
		}
		for _, ref := range []string{"v1.2.0", "v9.9.9", "1.11.0"} {
			resp, body := compatDo(t, f, "GET", "/v2/installer/"+f.id+"/manifests/"+ref)
			wantAnswer(t, ref, resp, body, 404, "~MANIFEST_UNKNOWN")
		}
	})
	t.Run("tags list", func(t *testing.T) {
		resp, body := compatDo(t, f, "GET", "/v2/metal-installer/"+f.id+"/tags/list")
		var l struct{ Tags []string }
		json.Unmarshal([]byte(body), &l)
		if resp.StatusCode != 200 || strings.Join(l.Tags, " ") != "latest v1.0 v1.10.0 v1.11.0-rc.1 v1.9.0-demo" {
			t.Errorf("tags/list: %d %s", resp.StatusCode, body)
		}
		// The spec's pagination: lexical order, ?last=, ?n= and a Link.
		resp, body = compatDo(t, f, "GET", "/v2/metal-installer/"+f.id+"/tags/list?n=2&last=latest")
		if !strings.Contains(body, `"tags":["v1.0","v1.10.0"]`) || resp.Header.Get("Link") != `</v2/metal-installer/`+f.id+`/tags/list?n=2&last=v1.10.0>; rel="next"` {
			t.Errorf("tags/list?n=2&last=latest: %s %s", resp.Header.Get("Link"), body)
		}
	})
	t.Run("identity", func(t *testing.T) {
		if got := f.svc.PullRef("factory.example", factory.InstallerKind{}, f.id, "1.0"); got != "factory.example/installer/"+f.id+":v1.0" {
			t.Errorf("the signature claims %s", got)
		}
	})
	t.Run("unknown schematic", func(t *testing.T) {
		resp, body := compatDo(t, f, "GET", "/v2/installer/"+strings.Repeat("0", 64)+"/manifests/v1.0")
		wantAnswer(t, "unknown schematic", resp, body, 404, "~NAME_UNKNOWN")
	})
}
