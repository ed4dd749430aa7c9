package builder

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// tinyProgram builds a small Go program for GOARCH with cgo on or off
// (cgo across architectures with Debian's cross compiler).
func tinyProgram(t *testing.T, goarch string, cgo bool) string {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nfunc main() {}\n"
	if cgo {
		src = "package main\n\n// int one(void) { return 1; }\nimport \"C\"\n\nfunc main() { _ = C.one() }\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module tiny\n\ngo 1.22\n"), 0o644)
	out := filepath.Join(dir, "prog-"+goarch)
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+goarch, "CGO_ENABLED=0", "GOFLAGS=")
	if cgo {
		cmd.Env = append(cmd.Env, "CGO_ENABLED=1")
		if goarch == "arm64" && runtime.GOARCH != "arm64" {
			cmd.Env = append(cmd.Env, "CC="+testutil.NeedTool(t, "aarch64-linux-gnu-gcc"))
		}
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", goarch, err, b)
	}
	return out
}

// TestOtherBuilderDetection: another builder binary is refused, naming it
// and why, when it is missing, not executable, not an ELF program or for
// an architecture no qemu-user here runs; one of this host's architecture
// runs directly, an arm64 one through qemu-user (with Debian's cross libc
// as its loader's root when it is dynamically linked); its build
// information says cgo or not. Both arm64 programs run as Command says.
func TestOtherBuilderDetection(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("written for an amd64 host")
	}
	testutil.NeedTool(t, "go")
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755)
	noexec := filepath.Join(dir, "noexec")
	os.WriteFile(noexec, []byte("\x7fELF"), 0o644)
	// A riscv64 ELF header, no qemu-user for it in this test's PATH.
	riscv := filepath.Join(dir, "riscv")
	hdr := make([]byte, 64)
	copy(hdr, "\x7fELF\x02\x01\x01")
	hdr[16], hdr[18], hdr[20] = 2, 0xf3, 1 // ET_EXEC, EM_RISCV, EV_CURRENT
	hdr[52], hdr[54], hdr[58] = 64, 56, 64 // ehsize, phentsize, shentsize
	os.WriteFile(riscv, hdr, 0o755)
	for path, want := range map[string]string{
		filepath.Join(dir, "missing"): "not found",
		dir:                           "is a directory",
		noexec:                        "not executable",
		script:                        "not an ELF program",
	} {
		if _, err := OtherBuilder(path); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Errorf("OtherBuilder(%s): %v, want %q", path, err, want)
		}
	}
	path := os.Getenv("PATH")
	t.Setenv("PATH", dir)
	if _, err := OtherBuilder(riscv); err == nil || !strings.Contains(err.Error(), "linux/riscv64 program, and no qemu-user here runs it") {
		t.Errorf("riscv64: %v", err)
	}
	os.Setenv("PATH", path)

	native := tinyProgram(t, "amd64", false)
	b, err := OtherBuilder(native)
	if err != nil || b.Emulator != "" || b.Arch != "amd64" || b.Cgo != "no cgo" || !strings.HasPrefix(b.GoVersion, "go1.") {
		t.Fatalf("native: %+v, %v", b, err)
	}
	if argv, env := b.Command(); len(argv) != 1 || argv[0] != native || env != nil {
		t.Errorf("native command %v %v", argv, env)
	}
	if s := b.String(); s != native+" (linux/amd64, no cgo, "+b.GoVersion+")" {
		t.Errorf("native described as %q", s)
	}

	testutil.NeedTool(t, "qemu-aarch64-static")
	binfmtDir = t.TempDir() // no registration: qemu-user by name
	t.Cleanup(func() { binfmtDir = "/proc/sys/fs/binfmt_misc" })
	for _, cgo := range []bool{false, true} {
		p := tinyProgram(t, "arm64", cgo)
		b, err := OtherBuilder(p)
		if err != nil {
			t.Fatalf("arm64 (cgo %v): %v", cgo, err)
		}
		want := "linux/arm64 via qemu-aarch64-static, no cgo"
		if cgo {
			want = "linux/arm64 via qemu-aarch64-static, cgo"
			if b.Sysroot != "/usr/aarch64-linux-gnu" {
				t.Errorf("arm64 with cgo: sysroot %q", b.Sysroot)
			}
		}
		if !strings.Contains(b.String(), want) {
			t.Errorf("arm64 (cgo %v) described as %q", cgo, b.String())
		}
		argv, env := b.Command()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("arm64 (cgo %v) as %v: %v\n%s", cgo, argv, err, out)
		}
	}
	// Registered with binfmt_misc: the kernel runs it, qemu-user finds
	// the cross libc by QEMU_LD_PREFIX.
	os.WriteFile(filepath.Join(binfmtDir, "qemu-aarch64"), []byte("enabled\ninterpreter /usr/bin/qemu-aarch64-static\n"), 0o644)
	b, err = OtherBuilder(tinyProgram(t, "arm64", true))
	if argv, env := b.Command(); err != nil || len(argv) != 1 || len(env) != 1 || env[0] != "QEMU_LD_PREFIX=/usr/aarch64-linux-gnu" || !strings.Contains(b.String(), "via binfmt qemu-aarch64") {
		t.Errorf("through binfmt_misc: %v %v %q %v", argv, env, b, err)
	}
}
