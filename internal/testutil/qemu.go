package testutil

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// BootResult is what one qemu run printed.
type BootResult struct {
	Lines    []string
	At       []time.Duration // when each line reached the console, from qemu's start
	Marker   string          // the console line holding the OK marker ("" if none)
	ToMarker time.Duration
	Total    time.Duration
	Err      error // qemu's exit error, or the timeout
}

// Find returns the first console line from prefix on, or "".
func (r *BootResult) Find(prefix string) string {
	for _, l := range r.Lines {
		if i := strings.Index(l, prefix); i >= 0 {
			return l[i:]
		}
	}
	return ""
}

// Tail is the console's last n lines.
func (r *BootResult) Tail(n int) string {
	l := r.Lines
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// BootQEMU runs qemu until it exits (the init powers off) or the timeout,
// collecting the serial console line by line.
func BootQEMU(t testing.TB, qemu string, timeout time.Duration, args ...string) *BootResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	res := &BootResult{}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("qemu: %v", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := strings.TrimRight(string(bytes.ReplaceAll(sc.Bytes(), []byte("\r"), nil)), " ")
			res.Lines, res.At = append(res.Lines, line), append(res.At, time.Since(start))
			if i := strings.Index(line, "NODEFORGE-BOOT-OK"); i >= 0 && res.Marker == "" {
				res.Marker, res.ToMarker = line[i:], time.Since(start)
			}
		}
		io.Copy(io.Discard, pr)
	}()
	res.Err = cmd.Wait()
	res.Total = time.Since(start)
	pw.Close()
	wg.Wait()
	if ctx.Err() != nil {
		res.Err = fmt.Errorf("timed out after %s", timeout)
	}
	return res
}

// BootTimeoutDefault bounds one qemu run of the boot tests. A boot under
// TCG takes seconds to tens of seconds (longer on a loaded machine).
const BootTimeoutDefault = 180 * time.Second

// BootTimeout is d, or NODEFORGE_BOOT_TIMEOUT (a Go duration) when set.
func BootTimeout(t testing.TB, d time.Duration) time.Duration {
	t.Helper()
	if v := os.Getenv("NODEFORGE_BOOT_TIMEOUT"); v != "" {
		o, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("NODEFORGE_BOOT_TIMEOUT: %v", err)
		}
		return o
	}
	return d
}

// TCG is the machine of the x86_64 boot tests: qemu's TCG, one CPU, 1 GB.
var TCG = []string{"-accel", "tcg", "-cpu", "max", "-m", "1024", "-smp", "1"}

// OVMF returns qemu's arguments for Debian's OVMF (no Secure Boot): the
// firmware read-only and a fresh copy of its variables for this boot.
// Where OVMF is missing the test is skipped on a workstation and fails
// under CI=true.
func OVMF(t testing.TB) []string {
	t.Helper()
	code := NeedFile(t, "/usr/share/OVMF/OVMF_CODE_4M.fd", "ovmf")
	vb, err := os.ReadFile(NeedFile(t, "/usr/share/OVMF/OVMF_VARS_4M.fd", "ovmf"))
	if err != nil {
		t.Fatal(err)
	}
	vars := filepath.Join(t.TempDir(), "vars.fd")
	if err := os.WriteFile(vars, vb, 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + code,
		"-drive", "if=pflash,format=raw,unit=1,file=" + vars}
}

// BootCheck runs qemu (args: the machine and its media) with the console
// on stdio until the init's marker or the timeout, and fails the test
// unless the console shows want, no failure from the init, every one of
// lines, and a clean power-off.
func BootCheck(t testing.TB, qemu, what, want string, timeout time.Duration, args []string, lines ...string) *BootResult {
	t.Helper()
	args = append(append([]string{}, args...), "-nographic", "-serial", "stdio", "-monitor", "none", "-no-reboot", "-nic", "none")
	res := BootQEMU(t, qemu, timeout, args...)
	failed := false
	switch {
	case res.Marker == "":
		t.Errorf("%s: no %q on the console (qemu: %v)", what, want, res.Err)
		failed = true
	case res.Marker != want:
		t.Errorf("%s: console says %q, want %q", what, res.Marker, want)
		failed = true
	}
	if fail := res.Find("NODEFORGE-BOOT-FAIL"); fail != "" {
		t.Errorf("%s: init reported: %s", what, fail)
		failed = true
	}
	for _, l := range lines {
		if res.Find(l) == "" {
			t.Errorf("%s: no %q on the console", what, l)
			failed = true
		}
	}
	if res.Marker != "" && res.Err != nil {
		t.Errorf("%s: qemu did not power off cleanly: %v", what, res.Err)
		failed = true
	}
	if failed || testing.Verbose() {
		t.Logf("%s: console (last 60 lines):\n%s", what, res.Tail(60))
	}
	t.Logf("%s: milestones (s from qemu's start, s since the one before):\n%s", what, strings.Join(res.Milestones(), "\n"))
	return res
}
