package debext

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/internal/testutil"
)

// TestDefinitions: the definitions follow docs/schemas/extension.schema.json
// and parse, as the shipped ones do, and relocate Debian's layout into the
// contract's.
func TestDefinitions(t *testing.T) {
	s := testutil.Schema(t, "extension.schema.json")
	want := map[string]map[string]string{
		"cri":   {"/usr/bin/ctr": "/usr/local/bin/ctr", "/usr/sbin/runc": "/usr/local/sbin/runc", "/usr/lib/cni/loopback": "/usr/local/lib/cni/bin/loopback"},
		"btrfs": {"/sbin/mkfs.btrfs": "/usr/local/sbin/mkfs.btrfs", "/bin/btrfs": "/usr/local/bin/btrfs"},
	}
	for _, d := range Definitions() {
		if err := s.Validate(testutil.YAMLDoc(t, []byte(d.YAML))); err != nil {
			t.Errorf("%s: %v", d.File, err)
		}
		def, err := extensions.Parse([]byte(d.YAML), d.File)
		if err != nil {
			t.Fatalf("%s: %v", d.File, err)
		}
		if def.Name+".yaml" != d.File {
			t.Errorf("%s defines %s", d.File, def.Name)
		}
		for from, to := range want[def.Name] {
			if got := def.Relocated(from); got != to {
				t.Errorf("%s relocates %s to %s, want %s", def.Name, from, got, to)
			}
		}
	}
}

// TestFindMissing names the package and the directory, and wraps ErrNoDebs.
func TestFindMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := Find(dir, "amd64")
	if !errors.Is(err, ErrNoDebs) || !strings.Contains(err.Error(), "containerd_*_amd64.deb") || !strings.Contains(err.Error(), dir) {
		t.Errorf("empty cache: %v", err)
	}
}

// TestImage: the same init and time give the same bytes; the archive
// holds an OCI layout whose index names ImageName.
func TestImage(t *testing.T) {
	init := []byte("\x7fELF init")
	mtime := time.Date(2025, 9, 1, 0, 0, 0, 0, time.FixedZone("x", 3600))
	a, err := Image([]Init{{"amd64", init}}, mtime)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Image([]Init{{"amd64", init}}, mtime.UTC())
	if !bytes.Equal(a, b) {
		t.Error("two images of the same init differ")
	}
	names := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(a))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		names[h.Name] = string(data)
	}
	if !strings.Contains(names["index.json"], ImageName) || names["oci-layout"] == "" || names["blobs/"] != "" {
		t.Errorf("archive: %v", names)
	}
	if _, err := Image(nil, mtime); err == nil {
		t.Error("an image of no init")
	}
}
