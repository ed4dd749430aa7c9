package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testbase"
	"github.com/nodeforge/builder/internal/testutil"
)

// TestSecureBootImage: builder image --secureboot on the Debian test base
// writes a signed UKI and Secure Boot ISO and raw images (sbverify accepts
// the UKI with the set's db certificate; the boot itself is
// build.TestBootDebianKernel's), builder repro --secureboot finds two
// builds (UKI, ISO and disk images) identical, and what cannot be signed is refused with the reason.
func TestSecureBootImage(t *testing.T) {
	specPath := testbase.ForTest(t, testbase.Options{})
	sbverify := testutil.NeedTool(t, "sbverify")
	keys := filepath.Join(t.TempDir(), "sb")
	if out, err := runBuilder(t, "keys", "generate", "--secureboot", "--out", keys); err != nil {
		t.Fatalf("keys generate --secureboot: %v\n%s", err, out)
	}
	sch := filepath.Join(t.TempDir(), "schematic.yaml")
	if err := os.WriteFile(sch, []byte("customization:\n  systemExtensions:\n    officialExtensions: [testext]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cacheDir, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
	if out, err := runBuilder(t, "lock", "-q", "--spec", specPath, "--cache", cacheDir); err != nil {
		t.Fatalf("lock: %v\n%s", err, out)
	}
	var uki outputsJSON
	doc := builderJSON(t, &uki, "image", "-q", "--json", "--spec", specPath, "--cache", cacheDir, "--out", out, "--schematic", sch, "--kind", "uki", "--secureboot", keys)
	validateSchema(t, "outputs.schema.json", doc)
	outs := pathsOf(uki)
	if len(outs) != 1 || !strings.HasSuffix(outs[0], "/metal-x86_64-secureboot-uki.efi") {
		t.Fatalf("--kind uki printed %v", outs)
	}
	if o, err := exec.Command(sbverify, "--cert", filepath.Join(keys, "db.pem"), outs[0]).CombinedOutput(); err != nil {
		t.Errorf("sbverify --cert db.pem: %v\n%s", err, o)
	}

	t.Setenv("NODEFORGE_TEST_AS_MAIN", "1") // repro's builds run main()
	// The compressed variants are left out: the demo's repro compares
	// them, and xz of these images twice is minutes of CI.
	rep, err := runBuilder(t, "repro", "--json", "--spec", specPath, "--cache", cacheDir, "--schematic", sch, "--secureboot", keys, "--compress", "")
	if err != nil {
		t.Fatalf("repro --secureboot: %v\n%s", err, rep)
	}
	validateSchema(t, "repro.schema.json", []byte(rep))
	if !strings.Contains(rep, `"reproducible": true`) {
		t.Errorf("repro --secureboot: %s", rep)
	}

	for what, c := range map[string]struct {
		args []string
		want string
	}{
		"uki without keys":   {[]string{"--kind", "uki"}, "give --secureboot"},
		"pxe with keys":      {[]string{"--kind", "pxe", "--secureboot", keys}, "makes none of them"},
		"no key set":         {[]string{"--kind", "iso", "--secureboot", t.TempDir()}, "db.key"},
		"repro keys, no sch": {nil, ""},
	} {
		if c.args == nil {
			if _, err := runBuilder(t, "repro", "--spec", specPath, "--secureboot", keys); err == nil || !strings.Contains(err.Error(), "give --schematic") {
				t.Errorf("%s: %v", what, err)
			}
			continue
		}
		args := append([]string{"image", "-q", "--spec", specPath, "--cache", cacheDir, "--out", t.TempDir(), "--schematic", sch}, c.args...)
		if _, err := runBuilder(t, args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", what, err, c.want)
		}
	}
}

func pathsOf(o outputsJSON) []string {
	var p []string
	for _, x := range o.Outputs {
		p = append(p, x.Path)
	}
	return p
}
