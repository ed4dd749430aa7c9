package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// StartSWTPM starts a software TPM 2.0 (Debian's swtpm) for the test and
// returns the socket to give its client; it is stopped when the test ends.
//   - forQEMU: the control socket, for qemu's tpm emulator
//     (-chardev socket,path=SOCK -tpmdev emulator), which sends the data
//     channel over it; the firmware starts the TPM up.
//   - otherwise: the server socket SOCK for the tss2 swtpm TCTI
//     ("swtpm:path=SOCK", which finds the control socket at SOCK.ctrl);
//     the TPM is started up already.
func StartSWTPM(t testing.TB, forQEMU bool) string {
	t.Helper()
	swtpm := NeedTool(t, "swtpm")
	dir := t.TempDir()
	sock := filepath.Join(dir, "sock")
	ctrl := sock + ".ctrl"
	args := []string{"socket", "--tpm2", "--tpmstate", "dir=" + dir, "--ctrl", "type=unixio,path=" + ctrl}
	want := []string{ctrl}
	if !forQEMU {
		args = append(args, "--server", "type=unixio,path="+sock, "--flags", "startup-clear")
		want = append(want, sock)
	}
	cmd := exec.Command(swtpm, args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("swtpm: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for i := 0; i < 100; i++ {
		ready := true
		for _, p := range want {
			if _, err := os.Stat(p); err != nil {
				ready = false
			}
		}
		if ready {
			return want[len(want)-1]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("swtpm made no sockets in 5 s")
	return ""
}
