package binrpm

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestELFDeps: a static program needs nothing; a dynamic one needs its
// libraries and their symbol versions; what is not an ELF program is
// refused, named.
func TestELFDeps(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ELF programs are Linux's")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	os.WriteFile(src, []byte("package main\nfunc main() {}\n"), 0o644)
	static := filepath.Join(dir, "static")
	cmd := exec.Command("go", "build", "-o", static, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("go build: %v\n%s", err, out)
	}
	arch, deps, err := elfDeps(static)
	if err != nil || arch != "aarch64" || len(deps) != 0 {
		t.Errorf("a static arm64 program: %s %v %v", arch, deps, err)
	}
	if sh, err := exec.LookPath("sh"); err == nil {
		sh, _ = filepath.EvalSymlinks(sh)
		_, deps, err := elfDeps(sh)
		var names []string
		for _, d := range deps {
			names = append(names, d.Name)
		}
		if err != nil || !strings.Contains(strings.Join(names, " "), "libc.so.6()(64bit) libc.so.6(GLIBC_") {
			t.Errorf("%s: %v %v", sh, names, err)
		}
	}
	if _, _, err := elfDeps(src); err == nil || !strings.Contains(err.Error(), "not an ELF program") {
		t.Errorf("a Go source as a program: %v", err)
	}
	if _, _, err := Package(Options{Binary: static, Name: "x", Version: "1", Release: "alt1"}); err == nil || !strings.Contains(err.Error(), "date") {
		t.Errorf("no date: %v", err)
	}
	if _, _, err := Package(Options{Binary: static, Name: "x", Version: "1", Release: "alt1", Built: time.Unix(1, 0)}); err == nil || !strings.Contains(err.Error(), "signed") {
		t.Errorf("no signer: %v", err)
	}
}
