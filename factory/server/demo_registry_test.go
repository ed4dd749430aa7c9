package server

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/internal/ocilayout"
	"github.com/nodeforge/builder/internal/testutil"
)

// imageInstallers writes the installers of schYAML for platformName as
// builder image --release --kind installer does (factory.WriteImage on the
// release factory.Open verified, no disk image) and returns their
// layouts' index digests by name (installer, <platform>-installer),
// each checked against the digest WriteImage lists it with.
func (f *demoFactory) imageInstallers(t *testing.T, schYAML, platformName string) map[string]string {
	t.Helper()
	sch, err := schematic.Parse([]byte(schYAML))
	if err != nil {
		t.Fatal(err)
	}
	id, err := sch.ID()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := factory.Open(context.Background(), f.rel.Store(t), f.rel.Version, f.rel.Keys)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	files, err := factory.WriteImage(context.Background(), rel, factory.ImageOptions{Schematic: sch, Platform: platformName, DiskFormats: []string{}, Out: out, Installers: true})
	if err != nil {
		t.Fatalf("factory.WriteImage, installers: %v", err)
	}
	got := map[string]string{}
	for path, info := range files {
		name := filepath.Base(path)
		if name != "installer" && !strings.HasSuffix(name, "-installer") {
			continue
		}
		ld, err := ocilayout.Open(filepath.Join(out, path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		idx, err := ld.Root()
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if "sha256:"+info.SHA256 != d.String() || path != filepath.ToSlash(filepath.Join("media", id, name)) {
			t.Errorf("WriteImage listed %s as %s, its index is %s", path, info.SHA256, d)
		}
		got[name] = d.String()
	}
	return got
}

// tarFileMap reads a tar file's regular files (and hard links to them)
// by name, as cmd/builder's tarFiles does.
func tarFileMap(t *testing.T, path string) map[string][]byte {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(fh)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch h.Typeflag {
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimPrefix(h.Name, "./")] = b
		case tar.TypeLink: // a hard link to a file before it
			files[strings.TrimPrefix(h.Name, "./")] = files[strings.TrimPrefix(strings.TrimPrefix(h.Linkname, "/"), "./")]
		}
	}
}

// TestFactoryRegistry: the /v2/ front serves a schematic's installer
// images as builder image --release --kind installer writes them
// (factory.WriteImage): crane and skopeo pull them by Talos's
// reference (installer/ID:v1.11.0-demo), the release's spelling and
// latest, crane validates them, stock cosign verifies them with the
// factory's key and the identity users pull; the second pull builds
// nothing; what is not an installer of a known schematic and version is a
// registry error.
func TestFactoryRegistry(t *testing.T) {
	f := newDemoFactory(t)
	schYAML := "customization:\n  extraKernelArgs: [console=ttyS0]\n  systemExtensions:\n    officialExtensions: [zfs, cri]\n"
	id := f.postSchematic(t, schYAML)
	want := f.imageInstallers(t, schYAML, "aws")
	if len(want) != 2 || want["installer"] == "" || want["aws-installer"] == "" {
		t.Fatalf("factory.WriteImage wrote the installers %v", want)
	}
	for name, digest := range want {
		ref := f.host + "/" + name + "/" + id + ":v1.11.0-demo"
		if got := strings.TrimSpace(judge(t, "crane", "digest", "--insecure", ref)); got != digest {
			t.Errorf("crane digest %s = %s, factory.WriteImage wrote %s", ref, got, digest)
		}
		judge(t, "crane", "validate", "--insecure", "--remote", ref)
		if out := judge(t, "cosign", "verify", "--key", f.rel.PubFile, "--insecure-ignore-tlog", "--allow-http-registry", "--allow-insecure-registry", ref); !strings.Contains(out, `"docker-reference":"`+ref+`"`) {
			t.Errorf("cosign verify %s: the signature claims another identity:\n%s", ref, out)
		}
		// skopeo 1.9 refuses --preserve-digests for any index; the copy
		// keeps the digest all the same.
		dst := filepath.Join(t.TempDir(), "copy")
		judge(t, "skopeo", "copy", "--all", "--src-tls-verify=false", "docker://"+ref, "oci:"+dst+":v")
		var copied struct{ Manifests []struct{ Digest string } }
		if b, err := os.ReadFile(filepath.Join(dst, "index.json")); err != nil || json.Unmarshal(b, &copied) != nil || len(copied.Manifests) != 1 || copied.Manifests[0].Digest != digest {
			b, _ := os.ReadFile(filepath.Join(dst, "blobs", "sha256", strings.TrimPrefix(copied.Manifests[0].Digest, "sha256:")))
			t.Errorf("skopeo copy of %s: %v %+v, want %s\n%s\n%s", ref, err, copied, digest, b, judge(t, "crane", "manifest", "--insecure", ref))
		}
		raw := judge(t, "skopeo", "inspect", "--tls-verify=false", "--raw", "docker://"+ref)
		if !strings.Contains(raw, `"dev.nodeforge.schematic":"`+id+`"`) {
			t.Errorf("%s: the index is not annotated with the schematic: %s", ref, raw)
		}
	}
	builds := f.srv.Stats().Builds
	if builds != 2 {
		t.Errorf("%d builds for two installers", builds)
	}
	judge(t, "crane", "pull", "--insecure", "--format", "oci", f.host+"/installer/"+id+":1.11.0-demo", t.TempDir())
	talos := f.host + "/installer/" + id + ":v1.11.0-demo"
	if a, b := judge(t, "crane", "manifest", "--insecure", talos), judge(t, "crane", "manifest", "--insecure", f.host+"/installer/"+id+":1.11.0-demo"); a != b || digest.OCI([]byte(a)).String() != want["installer"] {
		t.Errorf("crane manifest %s:\n%s\nthe release's spelling:\n%s", talos, a, b)
	}
	// latest: the newest stable version (the demo's only one).
	latest := filepath.Join(t.TempDir(), "latest")
	judge(t, "skopeo", "copy", "--all", "--src-tls-verify=false", "docker://"+f.host+"/installer/"+id+":latest", "oci:"+latest+":latest")
	if b, err := os.ReadFile(filepath.Join(latest, "index.json")); err != nil || !strings.Contains(string(b), want["installer"]) {
		t.Errorf("skopeo copy --all installer/ID:latest: %v %s, want %s", err, b, want["installer"])
	}
	if got := f.srv.Stats().Builds; got != builds {
		t.Errorf("pulling a cached installer built %d more", got-builds)
	}
	checkTalosInstallerLayout(t, f, id)

	for _, c := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"GET", "/v2/", 200, ""},
		{"GET", "/v2", 200, ""},
		{"GET", "/v2/installer/" + strings.Repeat("0", 64) + "/manifests/1.11.0-demo", 404, "NAME_UNKNOWN"},
		{"GET", "/v2/installer/" + id + "/manifests/9.9.9", 404, "MANIFEST_UNKNOWN"},
		{"GET", "/v2/nosuch-installer/" + id + "/manifests/1.11.0-demo", 404, "NAME_UNKNOWN"},
		{"GET", "/v2/installer-secureboot/" + id + "/manifests/1.11.0-demo", 404, "no Secure Boot key"},
		{"GET", "/v2/boot/manifests/1.11.0-demo", 404, "NAME_UNKNOWN"},
		{"GET", "/v2/installer/" + id + "/blobs/sha256:" + strings.Repeat("a", 64), 404, "BLOB_UNKNOWN"},
		{"GET", "/v2/installer/" + id + "/blobs/../../etc/passwd", 404, "NAME_UNKNOWN"},
		{"PUT", "/v2/installer/" + id + "/manifests/x", 405, "UNSUPPORTED"},
		{"GET", "/v2/installer/" + id + "/tags/list", 200, ""},
	} {
		req, _ := http.NewRequest(c.method, f.hs.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.code) || resp.Header.Get("Docker-Distribution-API-Version") != "registry/2.0" {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, b)
		}
	}
}

// checkTalosInstallerLayout reads the installers of schematic id (console=ttyS0)
// with crane, as Talos's installer finds its inputs: two layers, the
// installer's (the release's blob in both) and the boot assets'; the
// entrypoint /usr/bin/installer; the files under usr/install/amd64/ by
// Talos's names, aws's with its command line (docs/talos-compatibility.md,
// "Installer image"); installer-amd64.tar is the same image, a docker
// tarball.
func checkTalosInstallerLayout(t *testing.T, f *demoFactory, id string) {
	t.Helper()
	host := f.host
	var first []string
	var plain struct {
		Config struct{ Digest string }
		Layers []struct{ Digest string }
	}
	for _, name := range []string{"installer", "aws-installer"} {
		ref := host + "/" + name + "/" + id + ":1.11.0-demo"
		var m struct{ Layers []struct{ Digest string } }
		if err := json.Unmarshal([]byte(judge(t, "crane", "manifest", "--insecure", "--platform", "linux/amd64", ref)), &m); err != nil || len(m.Layers) != 2 {
			t.Fatalf("%s: %v, %d layers, want the installer's and the boot assets'", ref, err, len(m.Layers))
		}
		first = append(first, m.Layers[0].Digest)
		if name == "installer" {
			json.Unmarshal([]byte(judge(t, "crane", "manifest", "--insecure", "--platform", "linux/amd64", ref)), &plain)
		}
		if cfg := judge(t, "crane", "config", "--insecure", "--platform", "linux/amd64", ref); !strings.Contains(cfg, `"Entrypoint":["/usr/bin/installer"]`) || !strings.Contains(cfg, `"architecture":"amd64"`) {
			t.Errorf("%s: config %s", ref, cfg)
		}
		exported := filepath.Join(t.TempDir(), "fs.tar")
		judge(t, "crane", "export", "--insecure", "--platform", "linux/amd64", ref, exported)
		files := tarFileMap(t, exported)
		for _, p := range []string{"usr/bin/installer", "usr/install/amd64/vmlinuz", "usr/install/amd64/initramfs.xz", "usr/install/amd64/systemd-boot.efi", "usr/install/amd64/demo.spdx.json"} {
			if len(files[p]) == 0 {
				t.Errorf("%s: no %s (has %v)", ref, p, slices.Sorted(maps.Keys(files)))
			}
		}
		for p := range files {
			if strings.HasPrefix(p, "usr/install/") && !strings.HasPrefix(p, "usr/install/amd64/") {
				t.Errorf("%s: %s outside usr/install/amd64/", ref, p)
			}
		}
		if c := string(files["usr/install/amd64/cmdline"]); name == "aws-installer" && !strings.HasPrefix(c, "talos.platform=aws console=ttyS0 net.ifnames=0 nvme_core.io_timeout=4294967295 init_on_alloc=1 ") {
			t.Errorf("%s: cmdline %q", ref, c)
		}
	}
	if first[0] != first[1] {
		t.Errorf("the installer's layers differ: %v", first)
	}
	resp, err := http.Get(f.hs.URL + "/image/" + id + "/1.11.0-demo/installer-amd64.tar")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var names []string
	var m []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	for tr := tar.NewReader(resp.Body); ; {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
		if h.Name == "manifest.json" {
			json.NewDecoder(tr).Decode(&m)
		}
	}
	if resp.StatusCode != 200 || len(m) != 1 || m[0].Config != plain.Config.Digest || len(m[0].Layers) != 2 || len(plain.Layers) != 2 ||
		m[0].Layers[1] != strings.TrimPrefix(plain.Layers[1].Digest, "sha256:")+".tar.gz" || !slices.Equal(m[0].RepoTags, []string{"installer/" + id + ":v1.11.0-demo"}) {
		t.Errorf("installer-amd64.tar: %d, files %v, manifest %+v; the image's %+v", resp.StatusCode, names, m, plain)
	}
}

// conformance runs the OCI distribution-spec conformance suite read-only
// against repo on host, preloaded with the given tag, manifests and blobs,
// and returns the status of each check (Pass, FAIL, Skip, Disabled...) by
// name (#N for the Nth of a name) and the printed report.
func conformance(t *testing.T, host, repo, tag string, manifests, blobs []string) (map[string]string, string) {
	t.Helper()
	bin := testutil.NeedTool(t, "oci-conformance")
	cmd := exec.Command(bin)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "OCI_REGISTRY="+host, "OCI_TLS=disabled", "OCI_REPO1="+repo, "OCI_REPO2="+repo,
		"OCI_API_PUSH=false", "OCI_API_TAGS_DELETE=false", "OCI_API_MANIFESTS_DELETE=false", "OCI_API_BLOBS_DELETE=false",
		"OCI_API_REFERRER=false", "OCI_RO_DATA_TAGS="+tag, "OCI_RO_DATA_MANIFESTS="+strings.Join(manifests, " "),
		"OCI_RO_DATA_BLOBS="+strings.Join(blobs, " "), "OCI_RESULTS_DIR="+filepath.Join(cmd.Dir, "results"))
	// It exits 1 on any failure, and this version then panics writing its
	// YAML report: the printed results say what passed.
	out, _ := cmd.CombinedOutput()
	results := map[string]string{}
	seen := map[string]int{}
	for _, m := range conformanceLine.FindAllStringSubmatch(string(out), -1) {
		seen[m[1]]++
		results[fmt.Sprintf("%s#%d", m[1], seen[m[1]])] = m[2]
	}
	if len(results) == 0 {
		t.Fatalf("the conformance suite printed no results:\n%s", out)
	}
	return results, string(out)
}

var conformanceLine = regexp.MustCompile(`(?m)^\s*(OCI Conformance Test[^:\n]*): (\w+)$`)

// TestFactoryConformance: the /v2/ front passes, read-only, every check of
// the OCI distribution-spec conformance suite that Debian's docker-registry
// passes on the same installer image.
func TestFactoryConformance(t *testing.T) {
	f := newDemoFactory(t)
	id := f.postSchematic(t, "customization:\n  systemExtensions:\n    officialExtensions: [zfs]\n")
	ref := f.host + "/installer/" + id + ":v1.11.0-demo" // the tag tags/list gives
	index := strings.TrimSpace(judge(t, "crane", "digest", "--insecure", ref))
	var m struct{ Manifests []struct{ Digest string } }
	json.Unmarshal([]byte(judge(t, "crane", "manifest", "--insecure", ref)), &m)
	manifests := []string{index}
	var blobs []string
	for _, c := range m.Manifests {
		manifests = append(manifests, c.Digest)
		var im struct {
			Config struct{ Digest string }
			Layers []struct{ Digest string }
		}
		json.Unmarshal([]byte(judge(t, "crane", "manifest", "--insecure", f.host+"/installer/"+id+"@"+c.Digest)), &im)
		blobs = append(blobs, im.Config.Digest)
		for _, l := range im.Layers {
			blobs = append(blobs, l.Digest)
		}
	}
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	judge(t, "crane", "copy", "--insecure", ref, reg.Host+"/installer/"+id+":v1.11.0-demo")

	ours, ourReport := conformance(t, f.host, "installer/"+id, "v1.11.0-demo", manifests, blobs)
	theirs, theirReport := conformance(t, reg.Host, "installer/"+id, "v1.11.0-demo", manifests, blobs)
	passed := 0
	for name, st := range theirs {
		if st != "Pass" {
			continue
		}
		passed++
		if ours[name] != "Pass" {
			t.Errorf("conformance %s: docker-registry passes, the factory: %q", name, ours[name])
		}
	}
	if passed < 10 || t.Failed() {
		t.Errorf("docker-registry passed %d checks\nfactory:\n%s\ndocker-registry:\n%s", passed, ourReport, theirReport)
	}
	var extra []string
	for name, st := range ours {
		if st == "Pass" && theirs[name] != "Pass" {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	t.Logf("%d checks pass on both; the factory also passes: %s", passed, strings.Join(extra, ", "))
}
