package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/testbase"
)

// TestReleaseTwoArches releases the x86_64 and aarch64 test base to a
// registry (docker-registry): skopeo sees linux/amd64 and linux/arm64 in
// the boot, installer and extension indexes, stock cosign verifies each
// index and each child; builder audit passes, every file of both
// architectures traced to a signed package or a generator; builder repro
// finds two builds of the two-architecture spec identical. The spec holds
// two container images (testImages), judged, audited, carried and
// tampered with by the helpers of images_release_test.go.
func TestReleaseTwoArches(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	specPath := testbase.ForTest(t, testbase.Options{Arches: []string{"x86_64", "aarch64"}})
	appendFile(t, specPath, testImages)
	keys := filepath.Join(t.TempDir(), "keys")
	if out, err := runBuilder(t, "keys", "generate", "--out", keys); err != nil {
		t.Fatalf("keys generate: %v\n%s", err, out)
	}
	pub := filepath.Join(keys, "cosign.pub")
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	prefix := reg.Host + "/boottest"
	cacheDir := t.TempDir()
	if out, err := runBuilder(t, "release", "-q", "--branch", "boottest", "--spec", specPath, "--cache", cacheDir,
		"--key", filepath.Join(keys, "cosign.key"), "--registry", prefix); err != nil {
		t.Fatalf("release: %v\n%s", err, out)
	}
	for _, repo := range []string{"boot", "installer", "extensions/testext", "images/init"} {
		ref := prefix + "/" + repo + ":0.1.0"
		var idx struct {
			Manifests []struct {
				Digest   string
				Platform struct{ OS, Architecture string }
			}
		}
		raw := judge(t, "skopeo", "inspect", "--tls-verify=false", "--raw", "docker://"+ref)
		if err := json.Unmarshal([]byte(raw), &idx); err != nil {
			t.Fatalf("%s: %v\n%s", ref, err, raw)
		}
		var platforms []string
		for _, m := range idx.Manifests {
			platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
			judge(t, "cosign", "verify", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry", prefix+"/"+repo+"@"+m.Digest)
		}
		slices.Sort(platforms)
		if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
			t.Errorf("%s: platforms %v", ref, platforms)
		}
		judge(t, "cosign", "verify", "--key", pub, "--insecure-ignore-tlog", "--allow-http-registry", ref)
	}
	judgeReleasedImages(t, prefix, pub)

	rep, auditDir, stdout, err := auditChild(t, "--key", pub, "--version", "0.1.0", "docker://"+prefix)
	if err != nil || rep.Verdict != "pass" {
		t.Errorf("audit of the two-architecture release: %v, %s %v\n%s", err, rep.Verdict, rep.Reasons, stdout)
	}
	checkAuditedImages(t, rep, auditDir)
	perArch := map[string]int{}
	for _, f := range rep.Files.List {
		for _, a := range []string{"x86_64", "aarch64"} {
			if strings.HasSuffix(f.Artifact, "/"+a) && (f.Package != "" || f.Generator != "") {
				perArch[a]++
			}
		}
	}
	if rep.Files.Unowned != 0 || perArch["x86_64"] < 100 || perArch["aarch64"] < 100 {
		t.Errorf("audit: %d unowned, traced files per architecture %v\n%s", rep.Files.Unowned, perArch, stdout)
	}
	t.Logf("audit: %s, %d files, traced per architecture %v", rep.Verdict, rep.Files.Total, perArch)

	out, err := runBuilder(t, "repro", "--json", "--spec", specPath, "--cache", cacheDir)
	if err != nil || !strings.Contains(out, `"reproducible": true`) {
		t.Errorf("repro of the two-architecture spec: %v\n%s", err, out)
	}
	carryReleasedImages(t, specPath, reg.Host, prefix, keys)
}
