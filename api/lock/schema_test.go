package lock_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/demobase"
	"github.com/nodeforge/builder/pkgbase/demobase/demotest"
)

// TestLockSchema validates a lock of the demo base against
// docs/schemas/lock.schema.json, and checks that what Parse refuses for
// its shape (unknown fields, another lockVersion, a package not pinned)
// the schema refuses too.
func TestLockSchema(t *testing.T) {
	sch := testutil.Schema(t, "lock.schema.json")
	_, l, _ := demotest.Locked(t)
	good, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.Validate(sch, good); err != nil {
		t.Fatalf("the demo lock does not validate against lock.schema.json: %v", err)
	}

	// edit returns the demo lock changed by f, on its JSON form.
	edit := func(f func(l map[string]any, pkg map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		arch := m["architectures"].(map[string]any)[demobase.Arch].(map[string]any)
		f(m, arch["packages"].([]any)[0].(map[string]any))
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// A lock written elsewhere than beside its spec: accepted by both.
	elsewhere := edit(func(l, _ map[string]any) { l["specDir"] = "../demo" })
	if _, err := lock.Parse(elsewhere, "elsewhere"); err != nil {
		t.Errorf("a lock with specDir: %v", err)
	}
	if err := testutil.Validate(sch, elsewhere); err != nil {
		t.Errorf("a lock with specDir does not validate: %v", err)
	}
	// A lock with container images: accepted by both.
	images := edit(func(l, p map[string]any) {
		l["architectures"].(map[string]any)[demobase.Arch].(map[string]any)["images"] = map[string]any{"etcd": []any{p["nevra"]}}
		l["resolution"].(map[string]any)["images"] = map[string]any{"etcd": []any{"etcd-server"}}
	})
	if _, err := lock.Parse(images, "images"); err != nil {
		t.Errorf("a lock with images: %v", err)
	}
	if err := testutil.Validate(sch, images); err != nil {
		t.Errorf("a lock with images does not validate: %v", err)
	}
	// Refused by both. "not json" and a component naming a NEVRA the lock
	// does not pin (TestReadRejects) are beyond a schema.
	for name, body := range map[string][]byte{
		"read rejects: lockVersion 9": []byte(`{"lockVersion": 9}`),
		"read rejects: bogus field":   []byte(`{"lockVersion":2,"bogus":1}`),
		"lockVersion 1":               edit(func(l, _ map[string]any) { l["lockVersion"] = 1 }),
		"unknown top-level field":     edit(func(l, _ map[string]any) { l["bogus"] = 1 }),
		"unknown package field":       edit(func(_, p map[string]any) { p["mirror"] = "x" }),
		"unknown spec field":          edit(func(l, _ map[string]any) { l["spec"].(map[string]any)["dir"] = "/tmp" }),
		"package without sha256":      edit(func(_, p map[string]any) { p["sha256"] = "" }),
		"package without location":    edit(func(_, p map[string]any) { p["location"] = "" }),
		"size a string":               edit(func(_, p map[string]any) { p["size"] = "3140" }),
		"image of an unpinned NEVRA": edit(func(l, _ map[string]any) {
			l["architectures"].(map[string]any)[demobase.Arch].(map[string]any)["images"] = map[string]any{"Etcd": []any{"x-1-1.x86_64"}}
		}),
	} {
		if _, err := lock.Parse(body, name); err == nil {
			t.Errorf("%s: Parse accepts it", name)
		}
		if err := testutil.Validate(sch, body); err == nil {
			t.Errorf("%s: the schema accepts what Parse refuses", name)
		} else {
			t.Logf("%s: refused: %v", name, err)
		}
	}
	// Stricter than Parse, as the writer always writes hex digests and
	// every field.
	for name, body := range map[string][]byte{
		"sha256 not hex":        edit(func(_, p map[string]any) { p["sha256"] = strings.Repeat("z", 64) }),
		"index digest algo":     edit(func(_, p map[string]any) { p["indexDigest"].(map[string]any)["algorithm"] = "crc32" }),
		"no architectures":      edit(func(l, _ map[string]any) { delete(l, "architectures") }),
		"fingerprint lowercase": edit(func(_, p map[string]any) { p["signerFingerprint"] = strings.ToLower(p["signerFingerprint"].(string)) }),
	} {
		if err := testutil.Validate(sch, body); err == nil {
			t.Errorf("%s: the schema accepts it", name)
		} else {
			t.Logf("%s: refused: %v", name, err)
		}
	}
}
