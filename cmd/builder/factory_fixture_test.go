package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/internal/ocilayout"
)

// factoryFixture is a factory the commands' tests started (factory warm
// and gc tests) on the demo release in a local layout. The factory's own
// HTTP tests are in factory/server, on pipelinetest's demo release.
type factoryFixture struct {
	d      *demoRelease
	layout string
	hs     *httptest.Server
	host   string // 127.0.0.1:PORT
}

// postSchematic creates a schematic and returns its ID.
func (f *factoryFixture) postSchematic(t *testing.T, yaml string) string {
	t.Helper()
	resp, err := http.Post(f.hs.URL+"/schematics", "application/yaml", strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var created struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&created); err != nil || resp.StatusCode != 201 {
		t.Fatalf("POST /schematics: %d %v", resp.StatusCode, err)
	}
	return created.ID
}

// cliInstallers runs builder image --release --kind installer and returns
// the index digests of the installer layouts it wrote, by name.
func (f *factoryFixture) cliInstallers(t *testing.T, schYAML, platformName string) map[string]string {
	t.Helper()
	sch := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(sch, []byte(schYAML), 0o644)
	out := t.TempDir()
	o, err := runBuilder(t, "image", "--release", "oci:"+f.layout, "--version", "1.11.0-demo", "--key", f.d.devPub,
		"--schematic", sch, "--platform", platformName, "--kind", "installer", "--out", out)
	if err != nil {
		t.Fatalf("image --kind installer: %v\n%s", err, o)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(o), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			t.Fatalf("image printed %q", line)
		}
		dir := fields[0]
		ld, err := ocilayout.Open(dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		idx, err := ld.Root()
		if err != nil {
			t.Fatal(err)
		}
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if "sha256:"+strings.TrimPrefix(fields[1], "sha256:") != d.String() {
			t.Errorf("image printed %s for %s, its index is %s", fields[1], dir, d)
		}
		got[filepath.Base(dir)] = d.String()
	}
	return got
}

// devKeys are the demo's dev public key, as a factory trusts it, and its
// signer, as a factory signs with it.
func devKeys(t *testing.T, d *demoRelease) ([]signing.Verifier, *signing.Signer) {
	t.Helper()
	vs, err := loadVerifiers([]string{d.devPub})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := loadSigner(d.devKey)
	if err != nil {
		t.Fatal(err)
	}
	return vs, signer
}
