// Package testschematic reads the schematic vectors the tests of
// api/schematic and factory/ share (here, not in api/schematic: only
// tests read them).
package testschematic

import (
	"encoding/json"
	"os"
	"testing"
)

// Vector is one schematic of api/schematic/testdata/vectors.json, the
// compatibility tests' vectors: a document as a client sends it, the ID
// upstream's factory gives it and the canonical YAML it stores and
// returns. The IDs were computed by a separate program with
// go.yaml.in/yaml/v4 v4.0.0-rc.6 and upstream's types; upstream's own
// pinned vectors (pkg/schematic tests) and its integration test's
// schematics are among them. IDAfterRC6 is the ID go-yaml's next releases
// (rc.7, v4.0.0) give where they differ (docs/talos-compatibility.md).
type Vector struct {
	Name       string `json:"name"`
	Doc        string `json:"doc"`
	ID         string `json:"id"`
	Canonical  string `json:"canonical"`
	IDAfterRC6 string `json:"idAfterRC6"`
}

// Vectors reads a vectors file; it must hold at least 40.
func Vectors(t testing.TB, path string) []Vector {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var vs []Vector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(vs) < 40 {
		t.Fatalf("%s: %d vectors, want at least 40", path, len(vs))
	}
	return vs
}
