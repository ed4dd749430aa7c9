package extensions

import (
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// TestDefinitionSchema: every shipped definition follows
// docs/schemas/extension.schema.json, and the relocate and links rules
// Parse refuses for their form the schema refuses too.
func TestDefinitionSchema(t *testing.T) {
	s := testutil.Schema(t, "extension.schema.json")
	ents, err := shipped.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, _ := shipped.ReadFile(e.Name())
		if err := s.Validate(testutil.YAMLDoc(t, b)); err != nil {
			t.Errorf("%s: %v", e.Name(), err)
		}
	}
	const head = "name: x\npackages: [a]\ncompatibility: '>= v1.8.0'\n"
	good := head + "relocate: [{from: /usr/bin/, to: /usr/local/bin/}, {from: /usr/lib/cni/, to: /usr/local/lib/cni/bin/}]\nlinks: [{path: /usr/local/sbin/btrfs, target: ../bin/btrfs}]\n"
	if err := s.Validate(testutil.YAMLDoc(t, []byte(good))); err != nil {
		t.Errorf("good: %v", err)
	}
	for _, doc := range []string{
		"relocate: [{from: /usr/bin/, to: /opt/bin/}]",
		"relocate: [{from: /usr/bin, to: /usr/local/bin/}]",
		"relocate: [{from: /usr/bin/, to: /usr/local/bin}]",
		"links: [{path: /usr/bin/x, target: /usr/local/bin/x}]",
		"links: [{path: /usr/local/bin/x}]",
		"links: [{path: /usr/local/bin/x, to: a}]",
	} {
		b := []byte(head + doc + "\n")
		if err := s.Validate(testutil.YAMLDoc(t, b)); err == nil {
			t.Errorf("the schema accepts %s", doc)
		}
		if _, err := Parse(b, "test"); err == nil {
			t.Errorf("Parse accepts %s", doc)
		} else if strings.TrimSpace(err.Error()) == "" {
			t.Errorf("Parse refuses %s without a reason", doc)
		}
	}
}
