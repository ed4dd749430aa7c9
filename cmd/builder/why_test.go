package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// validateSchema checks a document against a schema of docs/schemas.
func validateSchema(t *testing.T, schema string, doc []byte) {
	t.Helper()
	// A schema file, or one definition of it: "commands.schema.json#/$defs/published".
	s, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "..", "docs", "schemas", schema))
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("%s: %v\n%s", schema, err, doc)
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("the document does not validate against %s: %v\n%s", schema, err, doc)
	}
}

// lockedDemo writes the demo base and locks it: its directory, spec and
// package cache.
func lockedDemo(t *testing.T) (dir, spec, cacheDir string) {
	t.Helper()
	dir, cacheDir = filepath.Join(t.TempDir(), "demo"), t.TempDir()
	if _, err := runBuilder(t, "demo-base", dir); err != nil {
		t.Fatal(err)
	}
	spec = filepath.Join(dir, "spec.yaml")
	if _, err := runBuilder(t, "lock", "-q", "--spec", spec, "--cache", cacheDir); err != nil {
		t.Fatal(err)
	}
	return dir, spec, cacheDir
}

// TestWhyDemo: why names the full chain to a package the demo's cri
// extension only pulls in transitively (containerd -> runc -> libseccomp),
// the same from the spec and from the lock alone; a package outside the
// release is exit 1.
func TestWhyDemo(t *testing.T) {
	dir, spec, cacheDir := lockedDemo(t)
	lockFile := filepath.Join(dir, "demo.lock.json")
	fromSpec, err := runBuilder(t, "why", "-q", "--json", "--spec", spec, "--cache", cacheDir, "libseccomp")
	if err != nil {
		t.Fatal(err)
	}
	validateSchema(t, "why.schema.json", []byte(fromSpec))
	// From the lock, with no index cache: the indexes are read again.
	fromLock, err := runBuilder(t, "why", "-q", "--json", "--lock", lockFile, "--cache", "", "libseccomp")
	if err != nil {
		t.Fatal(err)
	}
	if fromLock != fromSpec {
		t.Errorf("the lock's answer differs from the spec's:\n%s\nspec:\n%s", fromLock, fromSpec)
	}
	var doc whyJSON
	if err := json.Unmarshal([]byte(fromSpec), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Answers) != 1 || doc.Answers[0].Component != "cri" || doc.Answers[0].Requested {
		t.Fatalf("answers: %s", fromSpec)
	}
	var chain []string
	for _, e := range doc.Answers[0].Paths[0].Edges {
		chain = append(chain, strings.SplitN(e.Provider, "-", 2)[0]+" for "+e.Requirement)
	}
	if want := "containerd for containerd | runc for runc >= 1.1 | libseccomp for libseccomp.so.2()(64bit) >= set:jgnqiGZ8iBZF5"; strings.Join(chain, " | ") != want {
		t.Errorf("chain %q, want %q", strings.Join(chain, " | "), want)
	}
	text, err := runBuilder(t, "why", "-q", "--lock", lockFile, "--cache", cacheDir, "libseccomp")
	if err != nil || !strings.Contains(text, "runc-1.2.6-alt1.x86_64 requires libseccomp.so.2()(64bit) >= set:jgnqiGZ8iBZF5 -> libseccomp-2.5.5-alt1.x86_64") {
		t.Errorf("text: %v\n%s", err, text)
	}

	// Not in the release: exit 1, saying so.
	_, err = runBuilder(t, "why", "-q", "--lock", lockFile, "--cache", cacheDir, "no-such-package")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(err.Error(), "no-such-package is not in any component of x86_64") {
		t.Errorf("a package outside the release: %v", err)
	}
	// A lock whose repository changed since is refused, naming it.
	rel := filepath.Join(dir, "alt", "noarch", "base", "release")
	b, err := os.ReadFile(rel)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rel, append(b, "\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runBuilder(t, "why", "-q", "--lock", lockFile, "--cache", "", "libseccomp"); err == nil || !strings.Contains(err.Error(), "changed since the lock was made") {
		t.Errorf("a changed repository: %v", err)
	}
}
