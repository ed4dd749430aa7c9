package testutil

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// Schema compiles docs/schemas/<name> with the library's file loader (the
// draft 2020-12 metaschema is built in: nothing is fetched).
func Schema(t testing.TB, name string) *jsonschema.Schema {
	t.Helper()
	p := filepath.Join(RepoRoot(), "docs", "schemas", name)
	s, err := jsonschema.NewCompiler().Compile(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return s
}

// Validate checks a JSON document against a schema; a document that is not
// JSON is an error too.
func Validate(s *jsonschema.Schema, doc []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// YAMLDoc is a YAML document as the JSON value the schema validator reads.
func YAMLDoc(t testing.TB, b []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	j, err := json.Marshal(stringKeys(v))
	if err != nil {
		t.Fatalf("json: %v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// stringKeys turns the map[any]any of a YAML mapping with non-string keys
// into the map[string]any that encoding/json can write.
func stringKeys(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = stringKeys(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = stringKeys(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = stringKeys(e)
		}
		return x
	}
	return v
}
