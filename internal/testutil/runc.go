package testutil

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// Runc is a container image of an OCI layout unpacked as a runc bundle
// (Debian's runc; root: CI runs as root, a workstation without it skips).
type Runc struct {
	Tool, Bundle string
	// Config is the bundle's config.json as runc spec wrote it; Run and
	// Start write it after the caller's changes.
	Config map[string]any
}

// FirstImage is the first image of an OCI layout's index.
func FirstImage(t testing.TB, dir string) v1.Image {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) == 0 {
		t.Fatalf("%s: an index without images (%v)", dir, err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// NewRunc unpacks the first image of the layout (its layers in order;
// the images of these tests have one) into a bundle.
func NewRunc(t testing.TB, dir string) *Runc {
	t.Helper()
	NeedRoot(t)
	r := &Runc{Tool: NeedTool(t, "runc"), Bundle: t.TempDir()}
	img := FirstImage(t, dir)
	layers, _ := img.Layers()
	rootfs := filepath.Join(r.Bundle, "rootfs")
	os.MkdirAll(rootfs, 0o755)
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("tar", "-x", "--numeric-owner", "-C", rootfs)
		cmd.Stdin = rc
		out, err := cmd.CombinedOutput()
		rc.Close()
		if err != nil {
			t.Fatalf("tar: %v\n%s", err, out)
		}
	}
	if out, err := exec.Command(r.Tool, "spec", "--bundle", r.Bundle).CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(filepath.Join(r.Bundle, "config.json"))
	if err := json.Unmarshal(b, &r.Config); err != nil {
		t.Fatal(err)
	}
	return r
}

// Process sets the process's arguments and user, without a terminal.
func (r *Runc) Process(args []string, uid, gid int) {
	proc := r.Config["process"].(map[string]any)
	proc["args"], proc["terminal"] = args, false
	proc["user"] = map[string]any{"uid": uid, "gid": gid}
}

// HostNetwork leaves the container in the host's network namespace: what
// it serves on loopback the test reaches.
func (r *Runc) HostNetwork() {
	linux := r.Config["linux"].(map[string]any)
	var kept []any
	for _, ns := range linux["namespaces"].([]any) {
		if ns.(map[string]any)["type"] != "network" {
			kept = append(kept, ns)
		}
	}
	linux["namespaces"] = kept
}

// Mount adds a mount: a bind (read-only unless rw) of a host path, or a
// tmpfs when source is "tmpfs".
func (r *Runc) Mount(dest, source string, rw bool) {
	m := map[string]any{"destination": dest, "type": "bind", "source": source, "options": []string{"rbind", "ro"}}
	switch {
	case source == "tmpfs":
		m = map[string]any{"destination": dest, "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "mode=1777"}}
	case rw:
		m["options"] = []string{"rbind", "rw"}
	}
	r.Config["mounts"] = append(r.Config["mounts"].([]any), m)
}

// Command is runc run of the bundle as a container of its own name, the
// config written.
func (r *Runc) Command(t testing.TB) (*exec.Cmd, string) {
	t.Helper()
	b, _ := json.Marshal(r.Config)
	if err := os.WriteFile(filepath.Join(r.Bundle, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	id := "nodeforge-test-" + filepath.Base(filepath.Dir(r.Bundle)) + "-" + filepath.Base(r.Bundle)
	return exec.Command(r.Tool, "--root", r.State(), "run", "--bundle", r.Bundle, id), id
}

// State is runc's state directory of the bundle (--root).
func (r *Runc) State() string { return filepath.Join(r.Bundle, "state") }

// Run runs the container to its end and returns what it printed on
// stdout; a failure fails the test with its stderr.
func (r *Runc) Run(t testing.TB) string {
	t.Helper()
	cmd, _ := r.Command(t)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("runc run %v: %v\n%s", r.Config["process"].(map[string]any)["args"], err, stderr.String())
	}
	return stdout.String()
}
