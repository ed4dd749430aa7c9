package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodeforge/builder/internal/testbase"
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

// addTestImages appends testImages to a spec.
func addTestImages(t *testing.T, specPath string) {
	t.Helper()
	f, err := os.OpenFile(specPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(testImages); err != nil {
		t.Fatal(err)
	}
}

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
