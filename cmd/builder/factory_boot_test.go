package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/testbase"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
)

// TestFactoryBoot releases the boot test's base (Debian's kernel, a static
// init, an extension) into a layout, asks a factory for a schematic's ISO
// and boots what it served under OVMF, as a CD and as a disk (written to
// a stick with dd), to the marker, the extension's layer mounted.
func TestFactoryBoot(t *testing.T) {
	specPath := testbase.ForTest(t, testbase.Options{})
	qemu := testutil.NeedTool(t, "qemu-system-x86_64")
	code := testutil.NeedFile(t, "/usr/share/OVMF/OVMF_CODE_4M.fd", "ovmf")
	varsTemplate, err := os.ReadFile(testutil.NeedFile(t, "/usr/share/OVMF/OVMF_VARS_4M.fd", "ovmf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("COSIGN_PASSWORD", "test-password")
	keys := filepath.Join(t.TempDir(), "keys")
	if out, err := runBuilder(t, "keys", "generate", "--out", keys); err != nil {
		t.Fatalf("keys generate: %v\n%s", err, out)
	}
	if out, err := runBuilder(t, "release", "-q", "--branch", "boottest", "--spec", specPath, "--cache", t.TempDir(), "--key", filepath.Join(keys, "cosign.key")); err != nil {
		t.Fatalf("release: %v\n%s", err, out)
	}
	st, err := oci.OpenLayout(filepath.Join(filepath.Dir(specPath), "release", "dev"))
	if err != nil {
		t.Fatal(err)
	}
	cache, err := oci.CreateLayout(filepath.Join(t.TempDir(), "factory-cache"))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := loadVerifiers([]string{filepath.Join(keys, "cosign.pub")})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := factory.NewServer(context.Background(), factory.ServerOptions{Releases: []factory.ReleaseStore{{Store: st, Keys: vs}},
		Cache: cache, BuilderVersion: "test", Work: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	resp, err := http.Post(hs.URL+"/schematics", "application/yaml", strings.NewReader("customization:\n  systemExtensions:\n    officialExtensions: [testext]\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	id, _, _ := strings.Cut(strings.TrimPrefix(string(b), `{"id":"`), `"`)
	if resp.StatusCode != 201 || len(id) != 64 {
		t.Fatalf("POST /schematics: %d %s", resp.StatusCode, b)
	}
	versions := getBody(t, hs.URL+"/versions")
	version := strings.Trim(strings.TrimSpace(versions), `[]"`)
	iso := filepath.Join(t.TempDir(), "metal-amd64.iso")
	if err := os.WriteFile(iso, []byte(getBody(t, hs.URL+"/image/"+id+"/"+version+"/metal-amd64.iso")), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, _ := os.ReadFile(specPath)
	pretty := ""
	for _, l := range strings.Split(string(spec), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "pretty-name:"); ok {
			pretty = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	want := "NODEFORGE-BOOT-OK PRETTY_NAME=" + pretty
	for _, c := range []struct{ what, drive string }{
		{"the factory's ISO as a CD", "-cdrom"},
		{"the factory's ISO as a disk", "-drive"},
	} {
		vars := filepath.Join(t.TempDir(), "vars.fd")
		if err := os.WriteFile(vars, varsTemplate, 0o644); err != nil {
			t.Fatal(err)
		}
		media := []string{c.drive, iso}
		if c.drive == "-drive" {
			media = []string{"-drive", "if=virtio,format=raw,readonly=on,file=" + iso}
		}
		args := append([]string{"-accel", "tcg", "-cpu", "max", "-m", "1024", "-smp", "1", "-nographic", "-serial", "stdio",
			"-monitor", "none", "-no-reboot", "-nic", "none",
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + code, "-drive", "if=pflash,format=raw,unit=1,file=" + vars}, media...)
		res := testutil.BootQEMU(t, qemu, 180*time.Second, args...)
		if res.Marker != want || res.Find("nodeforge-init: check testext: "+testbase.ExtCheckContent) == "" {
			t.Errorf("%s: marker %q, want %q (qemu: %v)\n%s", c.what, res.Marker, want, res.Err, res.Tail(60))
			continue
		}
		t.Logf("%s: marker after %s", c.what, res.ToMarker.Round(time.Millisecond))
	}
}

// getBody GETs url and wants 200.
func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}
