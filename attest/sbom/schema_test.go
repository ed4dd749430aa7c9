package sbom

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compileSchema loads the official schemas in testdata/schemas (every file
// under its own $id, so the CycloneDX schema's relative $refs resolve
// offline) and compiles the one with the given $id.
func compileSchema(t *testing.T, id string) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	files, _ := filepath.Glob("testdata/schemas/*.json")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		sid, _ := doc.(map[string]any)["$id"].(string)
		if err := c.AddResource(sid, doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	s, err := c.Compile(id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, name string, b []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("%s does not validate against its schema: %v", name, err)
	}
}

// TestOfficialSchemas validates both documents against SPDX 2.3 and
// CycloneDX 1.5 as published, and checks the schemas do reject a broken
// document (so a pass means something).
func TestOfficialSchemas(t *testing.T) {
	spdxSchema := compileSchema(t, "http://spdx.org/rdf/terms/2.3")
	cdxSchema := compileSchema(t, "http://cyclonedx.org/schema/bom-1.5.schema.json")
	spdx, err := SPDX(doc())
	if err != nil {
		t.Fatal(err)
	}
	cdx, err := CycloneDX(doc())
	if err != nil {
		t.Fatal(err)
	}
	validate(t, spdxSchema, "SPDX", spdx)
	validate(t, cdxSchema, "CycloneDX", cdx)

	bad, _ := jsonschema.UnmarshalJSON(bytes.NewReader(bytes.Replace(spdx, []byte(`"downloadLocation"`), []byte(`"downloadURL"`), 1)))
	if spdxSchema.Validate(bad) == nil {
		t.Error("the SPDX schema accepted a package without downloadLocation")
	}
	bad, _ = jsonschema.UnmarshalJSON(bytes.NewReader(bytes.Replace(cdx, []byte(`"type": "library"`), []byte(`"type": "rpm"`), 1)))
	if cdxSchema.Validate(bad) == nil {
		t.Error("the CycloneDX schema accepted a component of type rpm")
	}
}
