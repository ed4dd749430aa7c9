package server

import (
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/attest/authenticode"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/builder/media/secureboot"
	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/testschematic"
)

// The tests of docs/talos-compatibility.md's Schematics and Extensions
// sections, one per row, written from upstream's documented API and code
// (siderolabs/image-factory: pkg/schematic, internal/frontend/http,
// internal/profile, internal/integration).

// compatPost posts a schematic document and returns the status, the
// Content-Type and the body.
func compatPost(t *testing.T, f *accessFactory, doc []byte) (int, string, []byte) {
	t.Helper()
	resp, err := http.Post(f.url+"/schematics", "application/yaml", strings.NewReader(string(doc)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// compatCreate posts a schematic that must be accepted and returns its ID.
func compatCreate(t *testing.T, f *accessFactory, doc string) string {
	t.Helper()
	code, _, b := compatPost(t, f, []byte(doc))
	var created struct{ ID string }
	if json.Unmarshal(b, &created); code != http.StatusCreated || len(created.ID) != 64 {
		t.Fatalf("POST %q: %d %s", doc, code, b)
	}
	return created.ID
}

// Row "ID": every vector gets upstream's ID, the response is upstream's
// ({"id", "schematic"}, 201, JSON) and GET returns the schematic as sent
// (YAML), at any repetition.
func TestCompatSchematicIDs(t *testing.T) {
	f := newAccessFactory(t, Options{})
	for _, v := range testschematic.Vectors(t, "../../api/schematic/testdata/vectors.json") {
		for range 2 {
			code, ctype, b := compatPost(t, f, []byte(v.Doc))
			var created struct{ ID, Schematic string }
			if err := json.Unmarshal(b, &created); err != nil || code != http.StatusCreated || ctype != "application/json" {
				t.Fatalf("%s: %d %s %s", v.Name, code, ctype, b)
			}
			if created.ID != v.ID || created.Schematic != v.Canonical {
				t.Errorf("%s: %s %q, want %s %q", v.Name, created.ID, created.Schematic, v.ID, v.Canonical)
			}
		}
		code, body := f.get(t, "/schematics/"+v.ID)
		if code != http.StatusOK || string(body) != v.Canonical {
			t.Errorf("%s: GET %d %q, want %q", v.Name, code, body, v.Canonical)
		}
	}
}

// Row "refused at POST": upstream's decoder's and validator's texts, as
// clients match on them (upstream's integration test pins the first).
func TestCompatSchematicRefused(t *testing.T) {
	f := newAccessFactory(t, Options{})
	for doc, want := range map[string]string{
		"something:":   "yaml: construct errors: line 1: field something not found in type schematic.Schematic\n",
		"owner: alice": "owner field is only supported in Enterprise edition\n",
		"":             "EOF\n",
		"customization: {meta: [{key: 256, value: a}]}": "yaml: construct errors: line 1: cannot construct !!int `256` into uint8\n",
	} {
		if code, _, b := compatPost(t, f, []byte(doc)); code != http.StatusBadRequest || string(b) != want {
			t.Errorf("%q: %d %q, want 400 %q", doc, code, b, want)
		}
	}
}

// Row "accepted at POST": what upstream accepts and the factory used to
// refuse: kernel arguments with spaces or non-ASCII, any number of them,
// extensions no release has, META keys twice, another namespace.
func TestCompatSchematicAccepted(t *testing.T) {
	f := newAccessFactory(t, Options{})
	for _, doc := range []string{
		`customization: {extraKernelArgs: ["a b", "ключ=значение", "x=\x01"]}`,
		`customization: {extraKernelArgs: [` + strings.Repeat("a=b,", 100) + `c]}`,
		`customization: {systemExtensions: {officialExtensions: [gpu-magic, siderolabs/gpu-magic, other/zfs, ""]}}`,
		`customization: {meta: [{key: 10, value: a}, {key: 10, value: b}]}`,
	} {
		compatCreate(t, f, doc)
	}
}

// addCompatRelease serves, beside the access factory's release 1.0 (no
// extensions, the default namespace), 2.0 with zfs and cri in the
// namespace altlinux with the alias siderolabs, their manifests' metadata
// and digests as a verified release has them.
func addCompatRelease(t *testing.T, f *accessFactory) {
	t.Helper()
	r := &factory.VerifiedRelease{Version: "2.0", Params: compose.Params{Architectures: []string{"x86_64"}}, Extensions: []string{"cri", "zfs"},
		Namespace: schematic.Namespace{Name: "altlinux", Aliases: []string{"siderolabs"}},
		Digests:   map[string]string{"extensions/cri": "sha256:" + strings.Repeat("c", 64), "extensions/zfs": "sha256:" + strings.Repeat("f", 64)}}
	r.SetExtensionMetadata(map[string]extensions.Metadata{"cri": {Name: "cri", Author: "Nodeforge", Description: "containerd and runc"},
		"zfs": {Name: "zfs", Author: "ALT Linux", Description: "ZFS kernel modules and tools"}}, nil)
	f.svc.ServeUnverified(f.svc.Release("1.0"), r)
}

// compatRefusals gets each path: 400 with the text want, or 200 for "".
func compatRefusals(t *testing.T, f *accessFactory, paths map[string]string) {
	t.Helper()
	for path, want := range paths {
		code, b := f.get(t, path)
		if want == "" && code != http.StatusOK || want != "" && (code != http.StatusBadRequest || !strings.Contains(string(b), want)) {
			t.Errorf("%s: %d %s, want %q", path, code, b, want)
		}
	}
}

// Row "extensions are checked when media are asked for": upstream's text,
// with the version as the client named it; the kernel and the command
// line, which no extension changes, are served (upstream does not look
// there either); the installer is refused too.
func TestCompatExtensionAtImageTime(t *testing.T) {
	f := newAccessFactory(t, Options{})
	addCompatRelease(t, f)
	id := compatCreate(t, f, "customization:\n  systemExtensions:\n    officialExtensions: [siderolabs/zfs, gpu-magic]\n")
	compatRefusals(t, f, map[string]string{
		"/image/" + id + "/2.0/metal-amd64.iso":      `official extension "gpu-magic" is not available for Talos version 2.0`,
		"/image/" + id + "/2.0/initramfs-amd64.xz":   `official extension "gpu-magic" is not available for Talos version 2.0`,
		"/image/" + id + "/1.0/metal-amd64.raw.xz":   `official extension "siderolabs/zfs" is not available for Talos version 1.0`,
		"/v2/installer/" + id + "/manifests/2.0":     `official extension \"gpu-magic\" is not available for Talos version 2.0`,
		"/image/" + id + "/2.0/kernel-amd64":         "",
		"/image/" + id + "/2.0/cmdline-metal-amd64":  "",
		"/image/" + id + "/1.0/cmdline-metal-x86_64": "",
	})
}

// Row "names in a namespace": a release answers to its namespace, its
// aliases and bare names, and to no other namespace; the default
// namespace is siderolabs (release 1.0 has no zfs, so only the texts
// differ there).
func TestCompatExtensionNames(t *testing.T) {
	f := newAccessFactory(t, Options{})
	addCompatRelease(t, f)
	for names, want := range map[string]int{
		"[altlinux/zfs, cri]":        200,
		"[siderolabs/zfs]":           200,
		"[zfs, altlinux/zfs]":        200,
		"[other/zfs]":                400,
		"[altlinux/sub/zfs]":         400,
		"[altlinux/zfs, siderolabs]": 400,
	} {
		id := compatCreate(t, f, "customization:\n  systemExtensions:\n    officialExtensions: "+names+"\n")
		if code, b := f.get(t, "/image/"+id+"/2.0/metal-amd64.iso"); code != want {
			t.Errorf("%s: %d %s, want %d", names, code, b, want)
		}
	}
}

// Row "/version/V/extensions/official": names in the release's namespace,
// a pullable reference pinned to the digest (the factory's /v2/), the
// digest, the manifest's author and description; [] for none.
func TestCompatExtensionMetadata(t *testing.T) {
	f := newAccessFactory(t, Options{Service: factory.Options{ExternalURL: "https://factory.example.org"}})
	addCompatRelease(t, f)
	code, b := f.get(t, "/version/2.0/extensions/official")
	var got []map[string]string
	if err := json.Unmarshal(b, &got); err != nil || code != http.StatusOK || len(got) != 2 {
		t.Fatalf("%d %s", code, b)
	}
	want := map[string]string{"name": "altlinux/zfs", "ref": "factory.example.org/extensions/zfs:2.0@sha256:" + strings.Repeat("f", 64),
		"digest": "sha256:" + strings.Repeat("f", 64), "author": "ALT Linux", "description": "ZFS kernel modules and tools"}
	for k, v := range want {
		if got[1][k] != v {
			t.Errorf("%s: %q, want %q (%s)", k, got[1][k], v, b)
		}
	}
	if code, b := f.get(t, "/version/1.0/extensions/official"); code != http.StatusOK || strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("no extensions: %d %s", code, b)
	}
	if got := (schematic.Namespace{}).Qualified("zfs"); got != "siderolabs/zfs" {
		t.Errorf("default namespace: %s", got)
	}
}

// Rows of the options upstream applies to some outputs: each is refused
// (400, naming the field) where these media cannot honour it, and only
// there; sd-boot, 512- and 4096-byte sectors, the enrolment modes and
// Microsoft's well-known certificates are honoured.
// A kernel argument with a line break is refused where it would end the
// command line (the cmdline file, the iPXE script, boot entries).
func TestCompatSchematicOptions(t *testing.T) {
	// -secureboot names are served (refusals come first); the stand-in
	// build signs nothing, the cache names the certificate.
	f := newAccessFactory(t, Options{Service: factory.Options{SecureBoot: &secureboot.Signing{Signer: authenticode.Signer{Cert: &x509.Certificate{}}}}})
	for _, c := range []struct {
		doc, artifact string
		code          int
		says          string
	}{
		{"customization: {embeddedMachineConfiguration: \"machine: {}\\n\"}", "metal-amd64.iso", 400, "embedding configuration is not supported for Talos version v1.0"},
		{"customization: {embeddedMachineConfiguration: \"machine: {}\\n\"}", "initramfs-amd64.xz", 400, "embedding configuration is not supported for Talos version v1.0"},
		{"customization: {embeddedMachineConfiguration: \"machine: {}\\n\"}", "kernel-amd64", 200, ""},
		{"customization: {embeddedMachineConfiguration: \"machine: {}\\n\"}", "cmdline-metal-amd64", 200, ""},
		{"customization: {bootloader: grub}", "metal-amd64.raw.xz", 400, "customization.bootloader grub"},
		{"customization: {bootloader: dual-boot}", "metal-amd64.iso", 400, "customization.bootloader dual-boot"},
		{"customization: {bootloader: grub}", "initramfs-amd64.xz", 200, ""},
		{"customization: {bootloader: sd-boot}", "metal-amd64.iso", 200, ""},
		{"customization: {diskImage: {sectorSize: 4096}}", "metal-amd64.qcow2", 200, ""},
		{"customization: {diskImage: {sectorSize: 4096}}", "metal-amd64.iso", 200, ""},
		{"customization: {diskImage: {sectorSize: 1000}}", "metal-amd64.raw.xz", 400, "customization.diskImage.sectorSize 1000"},
		{"customization: {diskImage: {sectorSize: 1000}}", "metal-amd64.iso", 200, ""},
		{"customization: {diskImage: {sectorSize: 512}}", "metal-amd64.raw", 200, ""},
		{"customization: {secureboot: {includeWellKnownCertificates: true}}", "metal-amd64-secureboot.iso", 200, ""},
		{"customization: {secureboot: {includeWellKnownCertificates: true}}", "metal-amd64.iso", 200, ""},
		{"customization: {secureboot: {enrollKeys: sometimes}}", "metal-amd64-secureboot.raw", 400, `invalid secureboot enrollKeys value "sometimes"`},
		{"customization: {secureboot: {enrollKeys: sometimes}}", "metal-amd64.raw", 200, ""},
		{"overlay: {name: rpi_generic, image: siderolabs/sbc-raspberrypi}", "metal-amd64.raw", 400, "ships no overlays"},
		{"customization: {extraKernelArgs: [\"a\\nchain http://x/\"]}", "cmdline-metal-amd64", 400, "customization.extraKernelArgs"},
		{"customization: {extraKernelArgs: [\"a\\nchain http://x/\"]}", "pxe", 400, "customization.extraKernelArgs"},
		{"customization: {extraKernelArgs: [\"a\\nchain http://x/\"]}", "kernel-amd64", 200, ""},
	} {
		id := compatCreate(t, f, c.doc)
		path := "/image/" + id + "/1.0/" + c.artifact
		if c.artifact == "pxe" {
			path = "/pxe/" + id + "/1.0/metal-amd64"
		}
		code, b := f.get(t, path)
		if code != c.code || !strings.Contains(string(b), c.says) {
			t.Errorf("%s, %s: %d %s, want %d %q", c.doc, c.artifact, code, b, c.code, c.says)
		}
	}
	// embeddedMachineConfiguration: honoured from Talos 1.12 on (a
	// pre-release too), refused before in every output that would carry it
	// (the installer too), with upstream's text and the version as named.
	f.svc.ServeUnverified(f.svc.Release("1.0"), &factory.VerifiedRelease{Version: "1.12.0-alpha", Params: compose.Params{Architectures: []string{"x86_64"}}, Digests: map[string]string{}})
	id := compatCreate(t, f, "customization: {embeddedMachineConfiguration: \"machine: {}\\n\"}")
	compatRefusals(t, f, map[string]string{
		"/image/" + id + "/v1.12.0-alpha/metal-amd64.iso":   "",
		"/image/" + id + "/1.12.0-alpha/initramfs-amd64.xz": "",
		"/image/" + id + "/1.12.0-alpha/metal-amd64.raw.xz": "",
		"/pxe/" + id + "/1.0/metal-amd64":                   "",
		"/v2/installer/" + id + "/manifests/1.0":            "embedding configuration is not supported for Talos version v1.0",
		"/image/" + id + "/1.0/metal-amd64.raw.xz":          "embedding configuration is not supported for Talos version v1.0",
	})
}
