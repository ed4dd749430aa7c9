package builder

import (
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
)

// Builder is a builder binary of the reproducibility experiment: this one,
// or another (another build configuration or CPU architecture), and how
// it runs on this host.
type Builder struct {
	// Path is the binary ("" for this builder, whose path the caller
	// knows).
	Path string
	// Arch is its GOARCH ("arm64"), read from its ELF header.
	Arch string
	// Emulator is the qemu-user program that runs it ("" when it runs
	// natively, or through a binfmt_misc registration, Binfmt).
	Emulator string
	// Binfmt names the binfmt_misc registration the kernel runs it
	// through, when there is one and no Emulator is needed.
	Binfmt string
	// Sysroot holds its architecture's dynamic loader and libc, when the
	// binary needs them and this host has them elsewhere than the
	// loader's path (Debian's cross libc, /usr/aarch64-linux-gnu).
	Sysroot string
	// Cgo is "cgo", "no cgo" or "" (no build information), GoVersion the
	// Go release it was built with.
	Cgo, GoVersion string
}

// elfArches maps ELF machines to GOARCH and to qemu-user's name of the
// architecture.
var elfArches = map[elf.Machine][2]string{
	elf.EM_X86_64:  {"amd64", "x86_64"},
	elf.EM_AARCH64: {"arm64", "aarch64"},
	elf.EM_386:     {"386", "i386"},
	elf.EM_ARM:     {"arm", "arm"},
	elf.EM_RISCV:   {"riscv64", "riscv64"},
	elf.EM_PPC64:   {"ppc64le", "ppc64le"},
	elf.EM_S390:    {"s390x", "s390x"},
}

// crossSysroots are where Debian's cross libc packages (libc6-<arch>-cross)
// put an architecture's loader and libraries.
var crossSysroots = map[string]string{
	"arm64": "/usr/aarch64-linux-gnu", "amd64": "/usr/x86_64-linux-gnu", "arm": "/usr/arm-linux-gnueabihf",
	"riscv64": "/usr/riscv64-linux-gnu", "ppc64le": "/usr/powerpc64le-linux-gnu", "s390x": "/usr/s390x-linux-gnu", "386": "/usr/i686-linux-gnu",
}

// binfmtDir is where the kernel lists binfmt_misc registrations (tests
// point it elsewhere).
var binfmtDir = "/proc/sys/fs/binfmt_misc"

// OtherBuilder inspects another builder binary: it must exist, be
// executable, be a Linux ELF program of this host's architecture or of
// one a qemu-user program here runs. Its build information, when it has
// some, says whether it was built with cgo and with which Go.
func OtherBuilder(path string) (*Builder, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("builder %s: not found", path)
	case err != nil:
		return nil, fmt.Errorf("builder %s: %w", path, err)
	case st.IsDir():
		return nil, fmt.Errorf("builder %s: is a directory, not a builder binary", path)
	case st.Mode().Perm()&0o111 == 0:
		return nil, fmt.Errorf("builder %s: not executable (chmod +x it)", path)
	}
	f, err := elf.Open(abs)
	if err != nil {
		return nil, fmt.Errorf("builder %s: not an ELF program (%v): give a builder binary built for Linux", path, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return nil, fmt.Errorf("builder %s: an ELF %s, not a program", path, f.Type)
	}
	arch, ok := elfArches[f.Machine]
	if !ok {
		return nil, fmt.Errorf("builder %s: a program for %s, an architecture the builder is not built for and no qemu-user here runs", path, f.Machine)
	}
	b := &Builder{Path: abs, Arch: arch[0]}
	if err := b.runner(path, arch[1], interpreter(f)); err != nil {
		return nil, err
	}
	if info, err := buildinfo.ReadFile(abs); err == nil {
		b.GoVersion, b.Cgo = info.GoVersion, cgoOf(info)
	}
	return b, nil
}

// runner finds how this host runs a program of the qemu architecture
// qarch whose dynamic loader is interp ("" for a static program).
func (b *Builder) runner(path, qarch, interp string) error {
	if b.Arch != runtime.GOARCH {
		if reg := filepath.Join(binfmtDir, "qemu-"+qarch); binfmtEnabled(reg) {
			b.Binfmt = "qemu-" + qarch
		} else if p, err := lookAny("qemu-"+qarch+"-static", "qemu-"+qarch); err == nil {
			b.Emulator = p
		} else {
			return fmt.Errorf("builder %s: a linux/%s program, and no qemu-user here runs it (neither qemu-%s-static nor a binfmt_misc registration; Debian's qemu-user-static)", path, b.Arch, qarch)
		}
	}
	if interp == "" {
		return nil
	}
	if _, err := os.Stat(interp); err == nil && b.Arch == runtime.GOARCH {
		return nil
	}
	root := crossSysroots[b.Arch]
	if _, err := os.Stat(filepath.Join(root, interp)); err != nil {
		return fmt.Errorf("builder %s: a dynamically linked linux/%s program, and its loader %s is not here (for arm64, Debian's libc6-arm64-cross in /usr/aarch64-linux-gnu)", path, b.Arch, interp)
	}
	b.Sysroot = root
	return nil
}

// Command is the start of the command line that runs the builder (its
// arguments follow), and Env what its environment needs besides.
func (b *Builder) Command() (argv, env []string) {
	switch {
	case b.Emulator != "" && b.Sysroot != "":
		return []string{b.Emulator, "-L", b.Sysroot, b.Path}, nil
	case b.Emulator != "":
		return []string{b.Emulator, b.Path}, nil
	case b.Sysroot != "":
		// Through binfmt_misc, qemu-user finds the loader by this.
		return []string{b.Path}, []string{"QEMU_LD_PREFIX=" + b.Sysroot}
	}
	return []string{b.Path}, nil
}

// String describes the builder for the summary of the experiment:
// "/tmp/builder-arm64 (linux/arm64 via qemu-aarch64-static, cgo, go1.26.8)".
func (b *Builder) String() string {
	how := "linux/" + b.Arch
	switch {
	case b.Emulator != "":
		how += " via " + filepath.Base(b.Emulator)
	case b.Binfmt != "":
		how += " via binfmt " + b.Binfmt
	}
	for _, s := range []string{b.Cgo, b.GoVersion} {
		if s != "" {
			how += ", " + s
		}
	}
	if b.Cgo == "" {
		how += ", no build information"
	}
	name := b.Path
	if name == "" {
		name = "this builder"
	}
	return name + " (" + how + ")"
}

// ThisBuilder describes the running builder.
func ThisBuilder() *Builder {
	b := &Builder{Arch: runtime.GOARCH}
	if info, ok := debug.ReadBuildInfo(); ok {
		b.GoVersion, b.Cgo = info.GoVersion, cgoOf(info)
	}
	return b
}

// cgoOf is "cgo" or "no cgo" by the build setting, "" when unrecorded.
func cgoOf(info *debug.BuildInfo) string {
	for _, s := range info.Settings {
		if s.Key == "CGO_ENABLED" {
			if s.Value == "1" {
				return "cgo"
			}
			return "no cgo"
		}
	}
	return ""
}

// interpreter is the program's dynamic loader (PT_INTERP), "" for a
// static program.
func interpreter(f *elf.File) string {
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return ""
		}
		return strings.TrimRight(string(b), "\x00")
	}
	return ""
}

// binfmtEnabled says whether a binfmt_misc registration exists and is on.
func binfmtEnabled(reg string) bool {
	b, err := os.ReadFile(reg)
	return err == nil && strings.HasPrefix(string(b), "enabled")
}

func lookAny(names ...string) (string, error) {
	var err error
	for _, n := range names {
		var p string
		if p, err = exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", err
}
