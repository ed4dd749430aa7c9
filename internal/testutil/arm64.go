package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Arm64ToolsDir holds Debian's arm64 packages of the judges that run
// under qemu-user (kmod's depmod, glibc's ldconfig, and the libraries
// they load), below the test cache directory; scripts/fetch-test-kernel.sh
// fetches them.
const Arm64ToolsDir = "/var/cache/nodeforge/arm64-tools"

var (
	arm64Once    sync.Once
	arm64Sysroot string
	arm64Err     string
)

// Arm64Sysroot is a directory with Debian's arm64 judges unpacked (shared
// by the tests of the process, removed at its end by the OS's temporary
// directory cleaning); where a package or qemu-aarch64-static is missing
// the test is skipped on a workstation and fails under CI=true.
func Arm64Sysroot(t testing.TB) string {
	t.Helper()
	NeedTool(t, "qemu-aarch64-static")
	NeedTool(t, "dpkg-deb")
	arm64Once.Do(func() {
		debs, _ := filepath.Glob(filepath.Join(Arm64ToolsDir, "*_arm64.deb"))
		if len(debs) == 0 {
			arm64Err = "Debian's arm64 kmod and libc-bin in " + Arm64ToolsDir + " (scripts/fetch-test-kernel.sh fetches them)"
			return
		}
		dir, err := os.MkdirTemp("", "nodeforge-arm64-sysroot-")
		if err != nil {
			arm64Err = err.Error()
			return
		}
		for _, d := range debs {
			if out, err := exec.Command("dpkg-deb", "-x", d, dir).CombinedOutput(); err != nil {
				arm64Err = "dpkg-deb -x " + d + ": " + err.Error() + ": " + string(out)
				return
			}
		}
		arm64Sysroot = dir
	})
	if arm64Sysroot == "" {
		Missing(t, arm64Err)
	}
	return arm64Sysroot
}

// Arm64Command runs an arm64 program of the sysroot under qemu-user with
// the sysroot as its library root; argv0 is the name it runs as (kmod's
// tools are one program named by argv[0]).
func Arm64Command(sysroot, argv0, prog string, args ...string) *exec.Cmd {
	return exec.Command("qemu-aarch64-static", append([]string{"-L", sysroot, "-0", argv0, filepath.Join(sysroot, prog)}, args...)...)
}
