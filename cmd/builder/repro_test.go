package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/internal/testutil"
)

// otherBuilder builds this builder's source into another binary, with the
// go build flags and environment given (another build configuration).
func otherBuilder(t *testing.T, env []string, flags ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "builder-other")
	build := exec.Command("go", append(append([]string{"build"}, flags...), "-o", p, ".")...)
	build.Env = append(append(os.Environ(), "NODEFORGE_TEST_AS_MAIN="), env...)
	start := time.Now()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %v %v: %v\n%s", env, flags, err, out)
	}
	t.Logf("built %v %v in %s", env, flags, time.Since(start).Round(time.Second))
	return p
}

// TestReproOtherBuilder: repro --builder compares this builder's build of
// the demo with one by another build of the builder (stripped, without
// the build ID and paths: another binary, the same compressors), finds
// them identical and names the variations it tried, the two builders
// among them.
func TestReproOtherBuilder(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	_, spec, cacheDir := lockedDemo(t)
	other := otherBuilder(t, nil, "-trimpath", "-ldflags=-s -w -buildid=")
	out, err := runBuilder(t, "repro", "--json", "--builder", other, "--spec", spec, "--cache", cacheDir)
	if err != nil {
		t.Fatalf("repro --builder: %v\n%s", err, out)
	}
	validateSchema(t, "repro.schema.json", []byte(out))
	var doc reproJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil || !doc.Reproducible || len(doc.Differences) != 0 || doc.FilesCompared < 10 {
		t.Fatalf("repro --builder: %v\n%s", err, out)
	}
	all := strings.Join(doc.Variations, "\n")
	for _, want := range []string{"TZ: ", "umask: ", "GOMAXPROCS: ", "package order: ", "HOME: ", "working directory: ",
		"builder: this builder (linux/", other + " (linux/amd64, cgo, go1."} {
		if !strings.Contains(all, want) {
			t.Errorf("the variations do not say %q:\n%s", want, all)
		}
	}
	// Refused before any build: what cannot run here.
	for path, want := range map[string]string{filepath.Join(t.TempDir(), "none"): "not found", spec: "not executable"} {
		if out, err := runBuilder(t, "repro", "--builder", path, "--spec", spec, "--cache", cacheDir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("repro --builder %s: %v, want %q\n%s", path, err, want, out)
		}
	}
}

// TestNonCgoBuilder (issue 38, acceptance (b)): a builder built with
// CGO_ENABLED=0 refuses to build the demo release in one line that says
// what it lacks and how to build one that can; given to repro --builder,
// the experiment fails with that line. It still verifies and audits the
// release the normal builder made, and its factory serves it.
func TestNonCgoBuilder(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	d := newDemoRelease(t)
	if _, err := d.publish(t); err != nil {
		t.Fatal(err)
	}
	noCgo := otherBuilder(t, []string{"CGO_ENABLED=0"}, "-trimpath")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(noCgo, args...)
		cmd.Env = append(os.Environ(), "NODEFORGE_TEST_AS_MAIN=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	const refusal = "this builder was built without cgo: its squashfs zstd compressor"
	out, err := run("release", "-q", "--branch", "p11", "--spec", d.spec, "--cache", d.cache, "--key", d.devKey, "--layout", filepath.Join(t.TempDir(), "refused"))
	if err == nil || !strings.Contains(out, refusal) || !strings.Contains(out, "CGO_ENABLED=1") {
		t.Errorf("release by the non-cgo builder: %v\n%s", err, out)
	}
	if o, err := runBuilder(t, "repro", "--builder", noCgo, "--spec", d.spec, "--cache", d.cache); err == nil || !strings.Contains(err.Error(), "build 2 ("+noCgo+") failed: ") || !strings.Contains(err.Error(), refusal) {
		t.Errorf("repro --builder with the non-cgo builder: %v\n%s", err, o)
	}

	layout := filepath.Join(d.dir, "release", "dev")
	if out, err := run("verify", "--key", d.devPub, "--version", demoVersion, "oci:"+layout); err != nil || strings.Count(out, "OK ") != 7 {
		t.Errorf("verify by the non-cgo builder: %v\n%s", err, out)
	}
	auditDir := filepath.Join(t.TempDir(), "audit")
	if out, err := run("audit", "-o", auditDir, "--key", d.devPub, "--version", demoVersion, "oci:"+layout); err != nil || !strings.Contains(out, "PASS") {
		t.Errorf("audit by the non-cgo builder: %v\n%s", err, out)
	}

	addr := freeAddr(t)
	serve := exec.Command(noCgo, "factory", "serve", "--release", "oci:"+layout, "--key", d.devPub, "--listen", addr)
	var log strings.Builder
	serve.Stdout, serve.Stderr = &log, &log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer serve.Wait()
	defer serve.Process.Kill()
	url := "http://" + addr
	for i := 0; ; i++ {
		if _, code, _ := fetch(url + "/readyz"); code == http.StatusOK {
			break
		}
		if i == 100 {
			t.Fatalf("the non-cgo factory never got ready:\n%s", log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The initramfs with the schematic's extensions, composed on request
	// (its segments compressed as the release's are: zstd, or xz).
	resp, err := http.Post(url+"/schematics", "application/yaml", strings.NewReader("customization:\n  systemExtensions:\n    officialExtensions: [zfs]\n"))
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	b, code, err := fetch(url + "/image/" + created.ID + "/v" + demoVersion + "/initramfs-amd64.xz")
	if err != nil || code != http.StatusOK || len(b) < 4096 || !strings.HasPrefix(string(b), "\x28\xb5\x2f\xfd") && !strings.HasPrefix(string(b), "\xfd7zXZ\x00") {
		t.Errorf("the non-cgo factory's initramfs: %d, %d bytes (%q), %v\n%s", code, len(b), b[:min(len(b), 8)], err, log.String())
	}
}
