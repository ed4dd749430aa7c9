package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// TestSchemaDemoBuild builds the demo (without and with a schematic) and
// validates OUT/report.json against docs/schemas/report.schema.json and the
// lock file against docs/schemas/lock.schema.json: the contracts as
// documented are what the builder writes.
func TestSchemaDemoBuild(t *testing.T) {
	reportSchema, lockSchema := testutil.Schema(t, "report.schema.json"), testutil.Schema(t, "lock.schema.json")
	validate := testutil.Validate
	read := func(p string) []byte {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	dir, spec, cacheDir := lockedDemo(t)
	locks, _ := filepath.Glob(filepath.Join(dir, "*.lock.json"))
	if len(locks) != 1 {
		t.Fatalf("lock files: %v", locks)
	}
	if err := validate(lockSchema, read(locks[0])); err != nil {
		t.Errorf("%s does not validate: %v", locks[0], err)
	}
	if out, err := runBuilder(t, "build", "-q", "--spec", spec, "--cache", cacheDir); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	reportPath := filepath.Join(dir, "out", "report.json")
	plain := read(reportPath)
	checkSize(t, filepath.Join(dir, "out"))
	// Every --json of the lock and build steps follows its schema.
	for schema, args := range map[string][]string{
		"lock-summary.schema.json": {"lock", "-q", "--json", "--spec", spec, "--cache", cacheDir, "-o", filepath.Join(t.TempDir(), "again.lock.json")},
		"outputs.schema.json":      {"build", "-q", "--json", "--spec", spec, "--cache", cacheDir},
	} {
		js, err := runBuilder(t, args...)
		if err != nil {
			t.Fatalf("%s: %v", args[0], err)
		}
		validateSchema(t, schema, []byte(js))
	}
	if err := validate(reportSchema, plain); err != nil {
		t.Errorf("report.json does not validate: %v", err)
	}

	// With a schematic the report has its media part, and the
	// architecture's the initramfs segment of the extensions.
	sch := filepath.Join(t.TempDir(), "schematic.yaml")
	if err := os.WriteFile(sch, []byte("customization:\n  extraKernelArgs: [console=ttyS0]\n  systemExtensions:\n    officialExtensions: [zfs, cri]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runBuilder(t, "image", "-q", "--json", "--spec", spec, "--cache", cacheDir, "--schematic", sch, "--kind", "iso"); err != nil {
		t.Fatalf("image: %v\n%s", err, out)
	} else {
		validateSchema(t, "outputs.schema.json", []byte(out))
	}
	withMedia := read(reportPath)
	var rep struct {
		Media         map[string]any `json:"media"`
		Architectures map[string]struct {
			Media []any `json:"media"`
		} `json:"architectures"`
		Compressors map[string]string `json:"compressors"`
	}
	if err := json.Unmarshal(withMedia, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Media == nil || len(rep.Architectures["x86_64"].Media) == 0 {
		t.Fatal("the report of the build with a schematic has no media")
	}
	// The compressors that wrote the artifacts (their versions are
	// "unknown" in a test binary, which carries no build information).
	if !strings.HasPrefix(rep.Compressors["squashfs zstd"], "github.com/DataDog/zstd@") || len(rep.Compressors) != 7 {
		t.Errorf("report compressors: %v", rep.Compressors)
	}
	if err := validate(reportSchema, withMedia); err != nil {
		t.Errorf("report.json with media does not validate: %v", err)
	}

	// The schema holds: a report missing a part, with a digest that is not
	// hex, or with a field the builder does not write, is refused.
	arch := func(r map[string]any) map[string]any {
		return r["architectures"].(map[string]any)["x86_64"].(map[string]any)
	}
	firstRootfs := func(r map[string]any) map[string]any {
		return arch(r)["rootfs"].([]any)[0].(map[string]any)
	}
	for name, f := range map[string]func(r map[string]any){
		"no architectures": func(r map[string]any) { delete(r, "architectures") },
		"artifact sha256 not hex": func(r map[string]any) {
			r["artifacts"].(map[string]any)["x86_64/vmlinuz"].(map[string]any)["sha256"] = strings.Repeat("g", 64)
		},
		"ociIndex without sha256:":  func(r map[string]any) { r["ociIndex"] = strings.TrimPrefix(r["ociIndex"].(string), "sha256:") },
		"unknown field":             func(r map[string]any) { r["signature"] = "x" },
		"media without schematic":   func(r map[string]any) { delete(r["media"].(map[string]any), "schematic") },
		"rootfs entry without mode": func(r map[string]any) { delete(firstRootfs(r), "mode") },
		"origin package and generator": func(r map[string]any) {
			firstRootfs(r)["origin"] = map[string]any{"package": "a-1-1.x86_64", "generator": "accounts"}
		},
		"kernel modules negative": func(r map[string]any) { arch(r)["kernel"].(map[string]any)["modules"] = -1 },
		"compressor without a version": func(r map[string]any) {
			r["compressors"].(map[string]any)["squashfs zstd"] = "github.com/DataDog/zstd"
		},
	} {
		var r map[string]any
		if err := json.Unmarshal(withMedia, &r); err != nil {
			t.Fatal(err)
		}
		f(r)
		body, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(reportSchema, body); err == nil {
			t.Errorf("%s: the report schema accepts it", name)
		} else {
			t.Logf("%s: refused: %v", name, err)
		}
	}
}
