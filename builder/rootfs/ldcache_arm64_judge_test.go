package rootfs

import (
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// TestLdSoCacheMatchesArm64Ldconfig: for an aarch64 root made of
// Debian's real arm64 libraries (glibc, liblzma, libzstd, libssl,
// libkmod) in the RPM layout, with crafted neighbours (a name that sorts
// differently with unsigned chars, a hard-float ARM library, an x86-64
// one, which aarch64 ldconfig caches as AArch64: it checks no machine),
// our ld.so.cache is byte for byte what aarch64 glibc's own ldconfig
// writes, run here under qemu-user.
func TestLdSoCacheMatchesArm64Ldconfig(t *testing.T) {
	sysroot := testutil.Arm64Sysroot(t)
	libs, _ := filepath.Glob(filepath.Join(sysroot, "lib", "aarch64-linux-gnu", "*.so*"))
	more, _ := filepath.Glob(filepath.Join(sysroot, "usr", "lib", "aarch64-linux-gnu", "*.so*"))
	tr := New()
	addLink(t, tr, "/lib64", "usr/lib64")
	n := 0
	for _, p := range append(libs, more...) {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		dst := "/usr/lib64/" + filepath.Base(p)
		if fi.Mode()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			if tr.Get(dst) == nil {
				addLink(t, tr, dst, filepath.Base(target))
			}
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		addFile(t, tr, dst, data)
		n++
	}
	if n < 10 {
		t.Fatalf("%d arm64 libraries in the sysroot", n)
	}
	addFile(t, tr, "/usr/lib64/lib\xe9.so.1", craftSO(elf.ELFCLASS64, elf.EM_AARCH64, "lib\xe9.so.1", "libc.so.6"))
	addFile(t, tr, "/usr/lib64/liba.so.1", craftSO(elf.ELFCLASS64, elf.EM_AARCH64, "liba.so.1", "libc.so.6"))
	addFile(t, tr, "/usr/lib64/libx86.so.1", so64("libx86.so.1"))
	hf := craftSO(elf.ELFCLASS32, elf.EM_ARM, "libhf.so.1")
	binary.LittleEndian.PutUint32(hf[36:], 0x05000400) // EABI5, hard float
	addFile(t, tr, "/usr/lib/libhf.so.1", hf)
	addFile(t, tr, "/usr/lib/lib386.so.1", craftSO(elf.ELFCLASS32, elf.EM_386, "lib386.so.1", "libc.so.6"))
	addFile(t, tr, "/usr/lib/lib386e.so.1", craftSO(elf.ELFCLASS32, elf.EM_386, "lib386e.so.1"))
	addFile(t, tr, "/etc/ld.so.conf", []byte("/opt/lib\n"))
	addFile(t, tr, "/opt/lib/libopt.so.2", craftSO(elf.ELFCLASS64, elf.EM_AARCH64, "libopt.so.2", "libc.so.6"))

	ldconfig := func(args ...string) *exec.Cmd {
		return testutil.Arm64Command(sysroot, "ldconfig", "sbin/ldconfig", args...)
	}
	want, root := judgeWith(t, tr, "/lib\n/lib64\n/libilp32\n/usr/lib\n/usr/lib64\n/usr/libilp32\n", ldconfig)
	got := compareCaches(t, tr, "aarch64", want, root, ldconfig)
	all := "\n" + strings.Join(got, "\n") + "\n"
	for _, w := range []string{"libc.so.6 => /lib64/libc.so.6", "liblzma.so.5 => /lib64/liblzma.so.5", "libopt.so.2 => /opt/lib/libopt.so.2", "libhf.so.1 => /usr/lib/libhf.so.1", "libx86.so.1 => /lib64/libx86.so.1"} {
		if !strings.Contains(all, "\n"+w+"\n") {
			t.Errorf("missing %q in\n%s", w, all)
		}
	}
	t.Logf("%d entries, identical to arm64 ldconfig's", len(got))
}
