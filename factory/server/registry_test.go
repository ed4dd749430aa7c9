package server

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/attest/signing/signingtest"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/factory"
)

// TestParseRegistryPath: only installer repositories of a schematic ID,
// with one of the four operations, are read; a platform is any lower-case
// word (the releases' tables say which exist: TestRegistryReleasePlatforms).
func TestParseRegistryPath(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for p, want := range map[string]registryRequest{
		"/v2/installer/" + id + "/manifests/1.0":             {id: id, op: "manifests", ref: "1.0"},
		"/v2/aws-installer/" + id + "/blobs/sha256:00":       {kind: factory.InstallerKind{Platform: "aws"}, id: id, op: "blobs", ref: "sha256:00"},
		"/v2/installer/" + id + "/tags/list":                 {id: id, op: "tags", ref: "list"},
		"/v2/metal-installer/" + id + "/referrers/sha256:aa": {kind: factory.InstallerKind{Platform: "metal"}, id: id, op: "referrers", ref: "sha256:aa"},
		"/v2/installer-secureboot/" + id + "/manifests/1.0":  {kind: factory.InstallerKind{SecureBoot: true}, id: id, op: "manifests", ref: "1.0"},
		"/v2/aws-installer-secureboot/" + id + "/tags/list":  {kind: factory.InstallerKind{Platform: "aws", SecureBoot: true}, id: id, op: "tags", ref: "list"},
		"/v2/mycloud2-installer/" + id + "/manifests/1.0":    {kind: factory.InstallerKind{Platform: "mycloud2"}, id: id, op: "manifests", ref: "1.0"},
		"/v2/extensions/zfs/manifests/1.0":                   {extension: "zfs", op: "manifests", ref: "1.0"},
		"/v2/extensions/nvidia-open/blobs/sha256:00":         {extension: "nvidia-open", op: "blobs", ref: "sha256:00"},
	} {
		got, ok := parseRegistryPath(p)
		if !ok || got != want {
			t.Errorf("%s: %+v %t, want %+v", p, got, ok, want)
		}
	}
	for _, p := range []string{
		"/v2/installer/" + id + "/tags/other",
		"/v2/installer/" + id[:63] + "/manifests/1.0",
		"/v2/installer/" + strings.ToUpper(id) + "/manifests/1.0",
		"/v2/Mars-installer/" + id + "/manifests/1.0",
		"/v2/my_cloud-installer/" + id + "/manifests/1.0",
		"/v2/2cloud-installer/" + id + "/manifests/1.0",
		"/v2/-installer/" + id + "/manifests/1.0",
		"/v2/installer-secureboot-secureboot/" + id + "/manifests/1.0",
		"/v2/-secureboot/" + id + "/manifests/1.0",
		"/v2/boot/" + id + "/manifests/1.0",
		"/v2/installer/" + id + "/uploads/x",
		"/v2/installer/" + id + "/manifests/1.0/extra",
		"/v2/installer/" + id + "/manifests",
		"/v2/extensions/../manifests/1.0",
		"/v2/extensions/ZFS/manifests/1.0",
		"/v2/extensions/zfs/manifests/",
	} {
		if got, ok := parseRegistryPath(p); ok {
			t.Errorf("%s accepted: %+v", p, got)
		}
	}
}

// FuzzParseRegistryPath: no path panics the parser, and what it accepts
// names a schematic's installer repository.
func FuzzParseRegistryPath(f *testing.F) {
	f.Add("/v2/installer/" + strings.Repeat("0", 64) + "/manifests/1.11.0")
	f.Add("/v2/azure-installer/" + strings.Repeat("f", 64) + "/blobs/sha256:" + strings.Repeat("1", 64))
	f.Add("/v2/installer//manifests/")
	f.Fuzz(func(t *testing.T, p string) {
		rr, ok := parseRegistryPath(p)
		if !ok {
			return
		}
		if (len(rr.id) != 64 || strings.Trim(rr.id, "0123456789abcdef") != "") && !extensionName.MatchString(rr.extension) || strings.Contains(rr.ref, "/") {
			t.Errorf("%q accepted as %+v", p, rr)
		}
	})
}

// TestRegistryReleasePlatforms: a platform a release's spec adds is that
// release's: its installer is served and warmed, another release answers
// MANIFEST_UNKNOWN for it, and a platform no table has is no repository.
func TestRegistryReleasePlatforms(t *testing.T) {
	ctx := context.Background()
	f := newAccessFactory(t, Options{Service: factory.Options{Signer: signingtest.Signer(t)}})
	table, err := platform.Talos.Override("", []platform.Platform{{Name: "mycloud", Formats: []string{"qcow2"}}})
	if err != nil {
		t.Fatal(err)
	}
	arches := compose.Params{Architectures: []string{"x86_64"}}
	spec := &factory.VerifiedRelease{Version: "1.0", Params: arches, Platforms: table, Digests: map[string]string{}}
	f.svc.ServeUnverified(spec, &factory.VerifiedRelease{Version: "2.0", Params: arches, Digests: map[string]string{}})
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: static.NewLayer([]byte("mycloud installer"), types.OCILayer)})
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{Add: img})
	k := factory.InstallerKind{Platform: "mycloud"}
	if err := f.svc.CacheInstaller(ctx, spec, f.id, k, idx); err != nil {
		t.Fatal(err)
	}
	repo := "/v2/mycloud-installer/" + f.id
	resp, body := compatDo(t, f, "GET", repo+"/manifests/v1.0")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != string(types.OCIImageIndex) {
		t.Errorf("mycloud-installer/ID:v1.0: %d %q", resp.StatusCode, body)
	}
	resp, body = compatDo(t, f, "GET", repo+"/tags/list")
	wantAnswer(t, "mycloud-installer tags/list", resp, body, 200, "~v1.0")
	resp, body = compatDo(t, f, "GET", repo+"/manifests/v2.0")
	wantAnswer(t, "mycloud-installer/ID:v2.0", resp, body, 404, "~MANIFEST_UNKNOWN")
	for _, p := range []string{"/v2/mars-installer/" + f.id + "/manifests/v1.0", "/v2/mars-installer/" + f.id + "/tags/list",
		"/v2/secureboot-installer/" + f.id + "/manifests/v1.0", "/v2/mars-installer-secureboot/" + f.id + "/blobs/sha256:" + strings.Repeat("0", 64)} {
		resp, body := compatDo(t, f, "GET", p)
		wantAnswer(t, p, resp, body, 404, "~NAME_UNKNOWN")
	}

	rep, err := f.svc.Warm(ctx, factory.WarmOptions{Version: "v1.0", Schematics: []string{f.id}, Platforms: []string{"mycloud"}, Artifacts: []string{"qcow2", "installer"}})
	if err != nil || len(rep.Items) != 2 || rep.Items[0].Artifact != "mycloud-x86_64.qcow2" || !rep.Items[0].Built ||
		rep.Items[1].Artifact != "mycloud-installer/"+f.id+":v1.0" || rep.Items[1].Built {
		t.Errorf("warm of mycloud: %+v %v", rep, err)
	}
	if _, err := f.svc.Warm(ctx, factory.WarmOptions{Version: "2.0", Schematics: []string{f.id}, Platforms: []string{"mycloud"}}); err == nil || !strings.Contains(err.Error(), `"mycloud"`) {
		t.Errorf("warm of a platform the release lacks: %v", err)
	}
}
