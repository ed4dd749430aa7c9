package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/certification"
	"github.com/nodeforge/builder/pkgbase/testbase"
)

// testImages is the images section TestReleaseTwoArches adds to the test
// base's spec: the static init as a container image of both
// architectures, and of x86_64 alone with the root's skeleton and a link.
const testImages = `
images:
  init:
    packages: [` + testbase.InitPackage + `]
    entrypoint: [` + testbase.InitPath + `]
  tree:
    packages: [` + testbase.FilesystemPackage + `, ` + testbase.InitPackage + `]
    entrypoint: [/usr/local/bin/init]
    architectures: [x86_64]
    links: {/usr/local/bin/init: ` + testbase.InitPath + `}
`

// judgeReleasedImages has the stock tools judge the container images of a
// release of the test base with testImages under prefix: cosign verifies
// each index and child and the three attestations, crane validates each
// image in the registry (every layer read against its digest), skopeo
// copies each.
func judgeReleasedImages(t *testing.T, prefix, pub string) {
	t.Helper()
	for name, platforms := range map[string]int{"init": 2, "tree": 1} {
		ref := prefix + "/images/" + name + ":0.1.0"
		var idx struct{ Manifests []struct{ Digest string } }
		raw := judge(t, "skopeo", "inspect", "--tls-verify=false", "--raw", "docker://"+ref)
		if err := json.Unmarshal([]byte(raw), &idx); err != nil || len(idx.Manifests) != platforms {
			t.Errorf("%s: %d platforms, want %d (%v)\n%s", ref, len(idx.Manifests), platforms, err, raw)
		}
		judge(t, "cosign", "verify", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry", ref)
		for _, m := range idx.Manifests {
			judge(t, "cosign", "verify", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry", prefix+"/images/"+name+"@"+m.Digest)
		}
		for _, typ := range []string{"spdxjson", "cyclonedx", "slsaprovenance1"} {
			judge(t, "cosign", "verify-attestation", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry", "--type", typ, ref)
		}
		judge(t, "crane", "validate", "--insecure", "--remote", ref)
		judge(t, "skopeo", "copy", "--all", "--src-tls-verify=false", "docker://"+ref, "oci:"+filepath.Join(t.TempDir(), name))
	}
}

// carryReleasedImages promotes the release of the test base with
// testImages into an OCI layout, and mirrors it through an archive into a
// second prefix of the registry: builder verify accepts the images at
// both ends. A flipped byte in an image's layer then fails builder verify
// and the audit, each naming the image.
func carryReleasedImages(t *testing.T, specPath, regHost, prefix, keys string) {
	t.Helper()
	pub, key := filepath.Join(keys, "cosign.pub"), filepath.Join(keys, "cosign.key")
	prod := filepath.Join(t.TempDir(), "prod")
	if out, err := builderStdout(t, "promote", "--spec", specPath, "--from-registry", prefix, "--from-key", pub,
		"--to-layout", prod, "--key", key, "0.1.0"); err != nil {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	archive := filepath.Join(t.TempDir(), "release.tar")
	if _, out, err := mirrorChild(t, "--version", "0.1.0", "--key", pub, "docker://"+prefix, "oci-archive:"+archive); err != nil {
		t.Fatalf("mirror into an archive: %v\n%s", err, out)
	}
	perimeter := "docker://" + regHost + "/perimeter"
	if _, out, err := mirrorChild(t, "--key", pub, "oci-archive:"+archive, perimeter); err != nil {
		t.Fatalf("mirror from the archive: %v\n%s", err, out)
	}
	for _, st := range []string{"oci:" + prod, perimeter} {
		out, err := builderStdout(t, "verify", "--key", pub, "--version", "0.1.0", st)
		for _, name := range []string{"images/init", "images/tree"} {
			if err != nil || !strings.Contains(out, "OK ") || !strings.Contains(out, name+":0.1.0") {
				t.Errorf("verify %s: %v, want %s\n%s", st, err, name, out)
			}
		}
	}
	exportReleasedImage(t, "oci:"+prod, pub)
	flipLayerByte(t, prod, "images/init:0.1.0")
	media := t.TempDir()
	if out, err := builderStdout(t, "image", "--release", "oci:"+prod, "--version", "0.1.0", "--key", pub, "--kind", "container", "--name", "init", "--out", media); err == nil || !strings.Contains(err.Error(), "images/init") {
		t.Errorf("image --kind container of a tampered image: %v\n%s", err, out)
	}
	if ents, _ := os.ReadDir(filepath.Join(media, "images")); len(ents) > 0 {
		t.Errorf("image --kind container of a tampered image left %v", ents)
	}
	out, err := builderStdout(t, "verify", "--key", pub, "--version", "0.1.0", "oci:"+prod)
	if err == nil || !strings.Contains(out, "images/init") || !strings.Contains(out, "layer sha256:") {
		t.Errorf("verify with a tampered image layer: %v\n%s", err, out)
	}
	rep, _, stdout, err := auditChild(t, "--key", pub, "--version", "0.1.0", prod)
	if err == nil || rep.Verdict != "fail" || !strings.Contains(strings.Join(rep.Reasons, "\n"), "images/init") {
		t.Errorf("audit with a tampered image layer: %v, %s: %v\n%s", err, rep.Verdict, rep.Reasons, stdout)
	}
}

// exportReleasedImage: builder image --release --kind container writes the
// release's image init, verified, as an OCI archive that skopeo reads
// (the index the release verified, under the version's tag, named
// localhost/images/init:0.1.0 for containerd); an image the release does
// not have is refused, naming those it has.
func exportReleasedImage(t *testing.T, store, pub string) {
	t.Helper()
	media := t.TempDir()
	out, err := builderStdout(t, "image", "--release", store, "--version", "0.1.0", "--key", pub, "--kind", "container", "--name", "init", "--out", media)
	archive := filepath.Join(media, "images", "init.tar")
	if err != nil || !strings.HasPrefix(out, archive+"  sha256:") {
		t.Fatalf("image --kind container --release: %v\n%s", err, out)
	}
	want, err := builderStdout(t, "verify", "--key", pub, store+"#images/init:0.1.0")
	if err != nil {
		t.Fatalf("verify: %v\n%s", err, want)
	}
	raw := judge(t, "skopeo", "inspect", "--raw", "oci-archive:"+archive+":0.1.0")
	if d := sha256.Sum256([]byte(raw)); !strings.Contains(want, "sha256:"+hex.EncodeToString(d[:])) {
		t.Errorf("the archive's index %x is not the one verify names:\n%s", d, want)
	}
	judge(t, "skopeo", "copy", "--all", "oci-archive:"+archive+":0.1.0", "oci:"+filepath.Join(t.TempDir(), "copy"))
	b, _ := exec.Command("tar", "-xOf", archive, "index.json").Output()
	if !strings.Contains(string(b), `"io.containerd.image.name":"localhost/images/init:0.1.0"`) {
		t.Errorf("the archive's index.json: %s", b)
	}
	if out, err := builderStdout(t, "image", "--release", store, "--version", "0.1.0", "--key", pub, "--kind", "container", "--name", "nosuch", "--out", media); err == nil || !strings.Contains(err.Error(), "no container image nosuch (it has: init, tree)") {
		t.Errorf("image --kind container --name nosuch: %v\n%s", err, out)
	}
}

// flipLayerByte flips a byte in the layer of the linux/amd64 image of
// ref (REPO:TAG) in an OCI layout.
func flipLayerByte(t *testing.T, dir, ref string) {
	t.Helper()
	blob := func(d string) string { return filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(d, "sha256:")) }
	var top struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
			Platform    *struct{ Architecture string }
		}
		Layers []struct{ Digest string }
	}
	readJSON := func(file string) {
		top.Manifests, top.Layers = nil, nil
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &top); err != nil {
			t.Fatal(err)
		}
	}
	readJSON(filepath.Join(dir, "index.json"))
	next := ""
	for _, m := range top.Manifests {
		if m.Annotations["org.opencontainers.image.ref.name"] == ref {
			next = m.Digest
		}
	}
	if next == "" {
		t.Fatalf("%s: no %s", dir, ref)
	}
	readJSON(blob(next))
	for _, m := range top.Manifests {
		if m.Platform != nil && m.Platform.Architecture == "amd64" {
			next = m.Digest
		}
	}
	readJSON(blob(next))
	if len(top.Layers) != 1 {
		t.Fatalf("%s: %d layers", ref, len(top.Layers))
	}
	file := blob(top.Layers[0].Digest)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	os.Chmod(file, 0o644)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkAuditedImages checks the audit of a release with testImages: each
// image's layer of each architecture was unpacked and compared with the
// build report, every file of every image is traced (the link to its
// generator), the audit's three renderings list the images, and the JSON
// holds to its schema.
func checkAuditedImages(t *testing.T, rep *certification.Report, dir string) {
	t.Helper()
	archs := map[string]string{}
	for _, im := range rep.Images {
		for _, a := range im.Architectures {
			archs[im.Name] += a.Arch + " "
			if !im.Verified || a.Unpacked == 0 || a.Unpacked != a.Files || a.Packages == 0 || !strings.HasPrefix(a.Layer, "sha256:") {
				t.Errorf("audit of image %s %s: %+v (verified %v)", im.Name, a.Arch, a, im.Verified)
			}
		}
	}
	if archs["init"] != "aarch64 x86_64 " || archs["tree"] != "x86_64 " || len(rep.Images) != 2 {
		t.Errorf("audited images: %v", archs)
	}
	files := map[string]certification.File{}
	for _, f := range rep.Files.List {
		if strings.HasPrefix(f.Artifact, "image/") {
			files[f.Artifact+":"+f.Path] = f
			if f.Problem != "" || (f.Package == "") == (f.Generator == "") {
				t.Errorf("image file %s %s: %+v", f.Artifact, f.Path, f)
			}
		}
	}
	for key, origin := range map[string]string{"image/tree/x86_64:/usr/local/bin/init": "image-link", "image/init/aarch64:" + testbase.InitPath: testbase.InitPackage,
		"image/init/x86_64:/etc/passwd": "accounts", "image/tree/x86_64:/etc/os-release": "os-release"} {
		if f, ok := files[key]; !ok || (f.Generator != origin && !strings.HasPrefix(f.Package, origin+"-")) {
			t.Errorf("%s: %+v, want from %s", key, f, origin)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "audit.json"))
	if err != nil {
		t.Fatal(err)
	}
	validateSchema(t, "../audit.schema.json", b)
	for _, file := range []string{"audit.html", "audit.md"} {
		page, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || !strings.Contains(string(page), "Container images") || !strings.Contains(string(page), "/images/tree:0.1.0") {
			t.Errorf("%s lists no container images (%v)", file, err)
		}
	}
}

// appendFile appends text to a file.
func appendFile(t *testing.T, file, text string) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}
