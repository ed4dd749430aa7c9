package testbase

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/target"
	"github.com/nodeforge/builder/internal/testutil"
)

// TestHelloImageArches: the extensions' image of a two-architecture base
// is an image index of both inits, platforms set, as skopeo resolves it
// for each architecture; a one-architecture base's is the image itself.
func TestHelloImageArches(t *testing.T) {
	skopeo := testutil.NeedTool(t, "skopeo")
	dir := t.TempDir()
	var inputs []archInput
	for _, name := range []string{"x86_64", "aarch64"} {
		a, _ := target.Lookup(name)
		bin := filepath.Join(dir, "init-"+name)
		if err := os.WriteFile(bin, []byte("the init for "+name), 0o755); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, archInput{arch: a, initBin: bin})
	}
	inspect := func(archive string, args ...string) map[string]any {
		t.Helper()
		out, err := exec.Command(skopeo, append(append([]string{"inspect"}, args...), "oci-archive:"+archive)...).CombinedOutput()
		if err != nil {
			t.Fatalf("skopeo inspect %v %s: %v\n%s", args, archive, err, out)
		}
		var v map[string]any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return v
	}
	both := filepath.Join(dir, "both.tar")
	if err := writeHelloImage(both, inputs, 1700000000); err != nil {
		t.Fatal(err)
	}
	if raw := inspect(both, "--raw"); raw["mediaType"] != "application/vnd.oci.image.index.v1+json" || len(raw["manifests"].([]any)) != 2 {
		t.Errorf("two architectures: the image is %v", raw)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		if got := inspect(both, "--override-arch", arch, "--override-os", "linux"); got["Architecture"] != arch {
			t.Errorf("skopeo resolves %s to %v", arch, got["Architecture"])
		}
	}
	one := filepath.Join(dir, "one.tar")
	if err := writeHelloImage(one, inputs[:1], 1700000000); err != nil {
		t.Fatal(err)
	}
	if raw := inspect(one, "--raw"); !strings.HasSuffix(raw["mediaType"].(string), "manifest.v1+json") {
		t.Errorf("one architecture: the image is %v", raw)
	}
}
