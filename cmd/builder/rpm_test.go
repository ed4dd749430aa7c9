package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/demobase"
	"github.com/nodeforge/builder/pkgbase/keyring"
)

// packagerKey writes the demo base's key (public by design) as a
// packager's armored private key and its public half.
func packagerKey(t *testing.T) (priv, pub string) {
	t.Helper()
	e, err := demobase.Key()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var b bytes.Buffer
	w, _ := armor.Encode(&b, "PGP PRIVATE KEY BLOCK", nil)
	if err := e.SerializePrivate(w, nil); err != nil {
		t.Fatal(err)
	}
	w.Close()
	priv, pub = filepath.Join(dir, "packager.asc"), filepath.Join(dir, "packager.pub")
	os.WriteFile(priv, b.Bytes(), 0o600)
	p, err := keyring.ArmoredPublic(e)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(pub, p, 0o644)
	return priv, pub
}

// TestRPMSelf: builder rpm packages a program (a small real one, the
// system's true, standing in for the 30 MB builder whose xz payload takes
// half a minute) as nodeforge-builder, signed: rpm -K accepts it with the
// packager's key imported, rpm reads the libc requirements rpm's own
// dependency finder would write, rpm2cpio gives the program back byte for
// byte, and a second run writes the same bytes. Bad input is refused with
// its reason.
func TestRPMSelf(t *testing.T) {
	rpmTool := testutil.NeedTool(t, "rpm")
	rpm2cpio := testutil.NeedTool(t, "rpm2cpio")
	prog, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true program on PATH")
	}
	prog, _ = filepath.EvalSymlinks(prog)
	priv, pub := packagerKey(t)
	args := []string{"rpm", "--binary", prog, "--key", priv, "--version", "1.11.0", "--release", "alt1", "--disttag", "p11+1.1.1.1", "--date", "1764547200", "--doc", "../../README.md"}
	var outs [][]byte
	for i := range 2 {
		dir := t.TempDir()
		if out, err := runBuilder(t, append(args, "--out", dir)...); err != nil || !strings.Contains(out, "nodeforge-builder-1.11.0-alt1.x86_64.rpm sha256:") {
			t.Fatalf("run %d: %v\n%s", i, err, out)
		}
		b, err := os.ReadFile(filepath.Join(dir, "nodeforge-builder-1.11.0-alt1.x86_64.rpm"))
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, b)
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatal("two runs wrote different packages")
	}
	file := filepath.Join(t.TempDir(), "nodeforge-builder.rpm")
	os.WriteFile(file, outs[0], 0o644)

	db := t.TempDir()
	if out, err := exec.Command(rpmTool, "--dbpath", db, "--import", pub).CombinedOutput(); err != nil {
		t.Fatalf("rpm --import: %v\n%s", err, out)
	}
	out, err := exec.Command(rpmTool, "--dbpath", db, "-K", file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "signatures OK") {
		t.Errorf("rpm -K: %v\n%s", err, out)
	}
	out, _ = exec.Command(rpmTool, "-qp", "--nosignature", "--qf", "[%{REQUIRENAME}\n][%{PROVIDENAME} %{PROVIDEVERSION}\n][%{FILENAMES}\n]", file).CombinedOutput()
	for _, want := range []string{"libc.so.6()(64bit)\n", "libc.so.6(GLIBC_2.2.5)(64bit)\n", "rpmlib(PayloadIsXz)\n",
		"nodeforge-builder 1.11.0-alt1:p11+1.1.1.1\n", "/usr/bin/builder\n", "/usr/share/doc/nodeforge-builder-1.11.0/README.md\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("rpm -qp lacks %q:\n%s", want, out)
		}
	}
	x := t.TempDir()
	cmd := exec.Command("sh", "-c", `"$0" "$1" | cpio -idm --quiet --no-absolute-filenames`, rpm2cpio, file)
	cmd.Dir = x
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rpm2cpio | cpio: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(filepath.Join(x, "usr/bin/builder"))
	want, _ := os.ReadFile(prog)
	if !bytes.Equal(got, want) {
		t.Error("the packaged program is not the one given")
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--binary", "../../README.md"}, "not an ELF program"},
		{[]string{"--version", "1.0-1"}, `version "1.0-1"`},
		{[]string{"--date", "yesterday"}, `--date="yesterday" is not a number`},
		{[]string{"--key", pub}, "holds no OpenPGP private key"},
	} {
		a := append(append([]string{}, args...), "--out", t.TempDir())
		a = append(a, c.args...)
		if _, err := runBuilder(t, a...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	t.Setenv("SOURCE_DATE_EPOCH", "")
	if _, err := runBuilder(t, "rpm", "--key", priv, "--version", "1", "--out", t.TempDir()); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
		t.Errorf("no date: %v", err)
	}
}
