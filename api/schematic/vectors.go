package schematic

import (
	"encoding/json"
	"fmt"
	"os"
)

// Vector is one schematic of testdata/vectors.json, the compatibility
// tests' vectors (here and in factory/): a document as a client sends it,
// the ID upstream's factory gives it and the canonical YAML it stores and
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

// ReadVectors reads a vectors file; it must hold at least 40.
func ReadVectors(path string) ([]Vector, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var vs []Vector
	if err := json.Unmarshal(b, &vs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(vs) < 40 {
		return nil, fmt.Errorf("%s: %d vectors, want at least 40", path, len(vs))
	}
	return vs, nil
}
