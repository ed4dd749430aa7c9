package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/attest/pkcs11key"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/testbase"
)

// TestSecureBootImage: builder image --secureboot on the Debian test base
// writes a signed UKI and Secure Boot ISO and raw images (sbverify accepts
// the UKI with the set's db certificate; the boot itself is
// build.TestBootDebianKernel's), builder repro --secureboot finds two
// builds (UKI, ISO and disk images) identical, and what cannot be signed is refused with the reason.
func TestSecureBootImage(t *testing.T) {
	testutil.Slow(t)
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
	signWithToken(t, keys, outs[0], "image", "-q", "--json", "--spec", specPath, "--cache", cacheDir, "--schematic", sch, "--kind", "uki")
	// Without keys, --kind uki is the plain UKI (upstream's PLATFORM-ARCH-uki.efi):
	// unsigned, the disk images' command line inside.
	var plain outputsJSON
	builderJSON(t, &plain, "image", "-q", "--json", "--spec", specPath, "--cache", cacheDir, "--out", out, "--schematic", sch, "--kind", "uki")
	if p := pathsOf(plain); len(p) != 1 || !strings.HasSuffix(p[0], "/metal-x86_64-uki.efi") {
		t.Errorf("--kind uki without keys printed %v", p)
	} else if b, err := os.ReadFile(p[0]); err != nil || !bytes.Contains(b, []byte("talos.platform=metal console=tty0 console=ttyS0 ")) {
		t.Errorf("the plain UKI's command line: %v", err)
	} else if o, err := exec.Command(sbverify, "--list", p[0]).CombinedOutput(); err != nil || !strings.Contains(string(o), "No signature table present") {
		t.Errorf("sbverify --list of the plain UKI: %v\n%s", err, o)
	}
	var inst outputsJSON
	builderJSON(t, &inst, "image", "-q", "--json", "--spec", specPath, "--cache", cacheDir, "--out", out, "--schematic", sch, "--kind", "installer", "--secureboot", keys)
	if p := pathsOf(inst); len(p) != 1 || filepath.Base(p[0]) != "installer-secureboot" || !strings.HasPrefix(inst.Outputs[0].Digest, "sha256:") {
		t.Errorf("--kind installer --secureboot printed %+v", inst)
	}

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
		"pxe with keys":      {[]string{"--kind", "pxe", "--secureboot", keys}, "makes none of them"},
		"no key set":         {[]string{"--kind", "iso", "--secureboot", t.TempDir()}, "db.pem"},
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

// signWithToken moves the db and PCR keys of the set in keys onto a
// SoftHSM token (db.pkcs11 and pcr.pkcs11 name them, the key files are
// left out) and runs builder args with --secureboot on that set: the UKI
// it writes is the one signed with the files, byte for byte.
func signWithToken(t *testing.T, keys, want string, args ...string) {
	h := testutil.StartSoftHSM(t)
	h.Import(filepath.Join(keys, "db.key"), "db", 1)
	h.Import(filepath.Join(keys, "pcr.key"), "pcr", 2)
	onToken := t.TempDir()
	entries, err := os.ReadDir(keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".key") {
			b, err := os.ReadFile(filepath.Join(keys, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(onToken, e.Name()), b, 0o600)
		}
	}
	// The PIN as an operator would keep it: db's in a file, pcr's in
	// the environment.
	pin := filepath.Join(t.TempDir(), "pin")
	os.WriteFile(pin, []byte(h.PIN+"\n"), 0o600)
	t.Setenv(pkcs11key.PINEnv, h.PIN)
	uris := map[string]string{
		"db":  strings.Replace(h.URI("db"), "pin-value="+h.PIN, "pin-source=file:"+pin, 1),
		"pcr": strings.Replace(h.URI("pcr"), "&pin-value="+h.PIN, "", 1),
	}
	for k, uri := range uris {
		os.WriteFile(filepath.Join(onToken, k+".pkcs11"), []byte(uri+"\n"), 0o600)
	}
	out := t.TempDir()
	var o outputsJSON
	builderJSON(t, &o, append(args, "--out", out, "--secureboot", onToken)...)
	got := pathsOf(o)
	if len(got) != 1 {
		t.Fatalf("signing on the token wrote %v", got)
	}
	a, errA := os.ReadFile(got[0])
	b, errB := os.ReadFile(want)
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Errorf("the UKI signed on the token differs from the one signed with the key files (%v, %v)", errA, errB)
	}
}
