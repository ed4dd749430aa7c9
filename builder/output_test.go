package builder

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/nodeforge/builder/internal/ocilayout"
)

// writeOutput makes in dir what a build writes: report.json, an
// architecture's files, media and two OCI layouts.
func writeOutput(t *testing.T, dir string) {
	t.Helper()
	rep := map[string]any{
		"spec": map[string]any{"name": "demo"}, "lockSha256": "ab", "architectures": map[string]any{"x86_64": map[string]any{}},
		"artifacts": map[string]any{"x86_64/vmlinuz": map[string]any{}, "x86_64/cmdline": map[string]any{}},
		"media":     map[string]any{"schematic": "s1", "files": map[string]any{"media/s1/metal-x86_64.iso": map[string]any{}}},
	}
	for _, l := range []struct{ dir, key string }{{"oci", "ociIndex"}, {"media/s1/installer", ""}} {
		idx, err := random.Index(64, 2, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := ocilayout.WriteRoot(context.Background(), filepath.Join(dir, l.dir), idx); err != nil {
			t.Fatal(err)
		}
		d, _ := idx.Digest()
		if l.key != "" {
			rep[l.key] = d.String()
		} else {
			rep["media"].(map[string]any)["installer"] = d.String()
		}
	}
	for _, f := range []string{"x86_64/vmlinuz", "x86_64/cmdline", "media/s1/metal-x86_64.iso"} {
		mkfile(t, filepath.Join(dir, f), "data")
	}
	b, _ := json.Marshal(rep)
	mkfile(t, filepath.Join(dir, "report.json"), string(b))
}

func mkfile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestResolveOutput(t *testing.T) {
	base := t.TempDir()
	mk := func(rel, content string) {
		p := filepath.Join(base, rel)
		if content == "" {
			os.MkdirAll(p, 0o755)
			return
		}
		mkfile(t, p, content)
	}
	report := `{"spec":{"name":"demo"},"lockSha256":"ab","architectures":{"x86_64":{}}}`
	mk("foreign/notes.txt", "mine")
	mk("specdir/spec.yaml", "name: demo")
	mk("file", "mine")
	mk("dirty/report.json", report)
	mk("dirty/thesis.tex", "mine")
	mk("fake/report.json", `{"name":"not a build report"}`)
	os.Mkdir(filepath.Join(base, "empty"), 0o755)
	// An earlier output, and copies with something of the user's added
	// deep inside.
	writeOutput(t, filepath.Join(base, "prev"))
	writeOutput(t, filepath.Join(base, "partial"))
	os.RemoveAll(filepath.Join(base, "partial", "x86_64"))
	os.RemoveAll(filepath.Join(base, "partial", "media", "s1", "installer"))
	writeOutput(t, filepath.Join(base, "index-gone"))
	os.Remove(filepath.Join(base, "index-gone", "oci", "index.json"))
	for name, add := range map[string]string{
		"subdir":      "x86_64/mydata/notes.txt",
		"emptydir":    "x86_64/mydata/",
		"in-layout":   "oci/mine/x",
		"in-blobs":    "oci/blobs/sha256/notes",
		"media":       "media/s1/mine.iso",
		"other-media": "media/s2/metal-x86_64.iso",
		"in-partial":  "oci/blobs/sha256/" + strings.Repeat("a", 64),
	} {
		writeOutput(t, filepath.Join(base, name))
		content := "mine"
		if strings.HasSuffix(add, "/") {
			content = ""
		}
		mk(filepath.Join(name, add), content)
	}
	// Another image added to a layout: its index.json changed.
	writeOutput(t, filepath.Join(base, "pushed"))
	mk("pushed/oci/index.json", `{"schemaVersion":2,"manifests":[]}`)
	os.Symlink(filepath.Join(base, "foreign"), filepath.Join(base, "link-foreign"))
	os.Symlink(filepath.Join(base, "prev"), filepath.Join(base, "link-prev"))
	writeOutput(t, filepath.Join(base, "symlink"))
	os.Symlink("/etc/passwd", filepath.Join(base, "symlink", "x86_64", "passwd"))

	for _, tc := range []struct{ out, want string }{
		{"foreign", `"notes.txt"`},
		{"specdir", `"spec.yaml"`},
		{"file", "is a file"},
		{"dirty", `"thesis.tex"`},
		{"fake", "not a build report"},
		{"link-foreign", `"notes.txt"`},
		{"subdir", `"x86_64/mydata/"`},
		{"emptydir", `"x86_64/mydata/"`},
		{"in-layout", `"oci/mine/"`},
		{"in-blobs", `"oci/blobs/sha256/notes"`},
		{"media", `"media/s1/mine.iso"`},
		{"other-media", `"media/s2/"`},
		{"in-partial", `"oci/blobs/sha256/aaaa`},
		{"pushed", "oci/index.json is not the index the build wrote"},
		{"index-gone", "oci/index.json is gone"},
		{"symlink", `"x86_64/passwd"`},
	} {
		before := treeHash(t, base)
		_, err := ResolveOutput(filepath.Join(base, tc.out))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal naming %s", tc.out, err, tc.want)
		}
		if treeHash(t, base) != before {
			t.Errorf("%s: the refusal changed files", tc.out)
		}
	}
	for _, tc := range []struct{ out, want string }{
		{"missing", "missing"},
		{"empty", "empty"},
		{"prev", "prev"},
		{"partial", "partial"}, // what is missing, the build writes again
		{"link-prev", "prev"},  // followed: the target is replaced, not the link
	} {
		got, err := ResolveOutput(filepath.Join(base, tc.out))
		if err != nil || got != filepath.Join(base, tc.want) {
			t.Errorf("%s: %q, %v; want %s", tc.out, got, err, tc.want)
		}
	}
}
