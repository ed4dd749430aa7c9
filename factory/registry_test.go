package factory

import (
	"strings"
	"testing"
)

// TestParseRegistryPath: only installer repositories of a schematic ID,
// with one of the four operations, are read.
func TestParseRegistryPath(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for p, want := range map[string]registryRequest{
		"/v2/installer/" + id + "/manifests/1.0":             {id: id, op: "manifests", ref: "1.0"},
		"/v2/aws-installer/" + id + "/blobs/sha256:00":       {kind: installerKind{platform: "aws"}, id: id, op: "blobs", ref: "sha256:00"},
		"/v2/installer/" + id + "/tags/list":                 {id: id, op: "tags", ref: "list"},
		"/v2/metal-installer/" + id + "/referrers/sha256:aa": {kind: installerKind{platform: "metal"}, id: id, op: "referrers", ref: "sha256:aa"},
		"/v2/installer-secureboot/" + id + "/manifests/1.0":  {kind: installerKind{secureBoot: true}, id: id, op: "manifests", ref: "1.0"},
		"/v2/aws-installer-secureboot/" + id + "/tags/list":  {kind: installerKind{platform: "aws", secureBoot: true}, id: id, op: "tags", ref: "list"},
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
		"/v2/mars-installer/" + id + "/manifests/1.0",
		"/v2/-installer/" + id + "/manifests/1.0",
		"/v2/installer-secureboot-secureboot/" + id + "/manifests/1.0",
		"/v2/secureboot-installer/" + id + "/manifests/1.0",
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
