package build

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveOutput(t *testing.T) {
	base := t.TempDir()
	mk := func(rel, content string) string {
		p := filepath.Join(base, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if content != "" {
			os.WriteFile(p, []byte(content), 0o644)
		}
		return p
	}
	report := `{"spec":{"name":"demo"},"lockSha256":"ab","architectures":{"x86_64":{}}}`
	mk("foreign/notes.txt", "mine")
	mk("specdir/spec.yaml", "name: demo")
	mk("file", "mine")
	mk("prev/report.json", report)
	mk("prev/x86_64/vmlinuz", "k")
	mk("prev/oci/index.json", "{}")
	mk("dirty/report.json", report)
	mk("dirty/thesis.tex", "mine")
	mk("fake/report.json", `{"name":"not a build report"}`)
	os.Mkdir(filepath.Join(base, "empty"), 0o755)
	os.Symlink(filepath.Join(base, "foreign"), filepath.Join(base, "link-foreign"))
	os.Symlink(filepath.Join(base, "prev"), filepath.Join(base, "link-prev"))

	for _, tc := range []struct{ out, want string }{
		{"foreign", `"notes.txt"`},
		{"specdir", `"spec.yaml"`},
		{"file", "is a file"},
		{"dirty", `"thesis.tex"`},
		{"fake", "not a build report"},
		{"link-foreign", `"notes.txt"`},
	} {
		_, err := ResolveOutput(filepath.Join(base, tc.out))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal naming %s", tc.out, err, tc.want)
		}
	}
	for _, tc := range []struct{ out, want string }{
		{"missing", "missing"},
		{"empty", "empty"},
		{"prev", "prev"},
		{"link-prev", "prev"}, // followed: the target is replaced, not the link
	} {
		got, err := ResolveOutput(filepath.Join(base, tc.out))
		if err != nil || got != filepath.Join(base, tc.want) {
			t.Errorf("%s: %q, %v; want %s", tc.out, got, err, tc.want)
		}
	}
}
