package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestExtensionValidate(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	os.MkdirAll(filepath.Join(good, "rootfs/usr/local/bin"), 0o755)
	os.WriteFile(filepath.Join(good, "manifest.yaml"), []byte("version: v1alpha1\nmetadata:\n  name: good\n  version: 1.0.0\n  compatibility:\n    talos:\n      version: \">= v1.8.0\"\n"), 0o644)
	os.WriteFile(filepath.Join(good, "rootfs/usr/local/bin/tool"), []byte("x"), 0o755)
	out, err := runBuilder(t, "extension", "validate", good)
	if err != nil || !strings.Contains(out, "valid (good 1.0.0)") {
		t.Fatalf("good: %v\n%s", err, out)
	}
	bad := filepath.Join(dir, "bad")
	os.MkdirAll(filepath.Join(bad, "rootfs/usr/bin"), 0o755)
	os.WriteFile(filepath.Join(bad, "rootfs/usr/bin/tool"), []byte("x"), 0o755)
	os.WriteFile(filepath.Join(bad, "extra.txt"), []byte("x"), 0o644)
	out, err = runBuilder(t, "extension", "validate", good, bad)
	if err == nil {
		t.Fatal("a bad extension passed")
	}
	for _, want := range []string{"manifest.yaml is missing", "/usr/bin/tool: outside the allowed paths", "/extra.txt: top-level entries", "1 of 2 extension images"} {
		if !strings.Contains(out+err.Error(), want) {
			t.Errorf("output lacks %q:\n%s\n%v", want, out, err)
		}
	}
	js, _ := runBuilder(t, "extension", "validate", "--json", good, bad)
	validateSchema(t, "extension-validate.schema.json", []byte(js))
	var doc validationJSON
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatal(err)
	}
	// The hint is not a violation.
	if doc.Invalid != 1 || len(doc.Results) != 2 || len(doc.Results[1].Hints) != 1 || slices.ContainsFunc(doc.Results[1].Violations, func(v string) bool { return strings.HasPrefix(v, "(allowed") || strings.HasPrefix(v, "allowed") }) {
		t.Errorf("extension validate --json: %s", js)
	}
}
