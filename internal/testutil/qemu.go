package testutil

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// BootResult is what one qemu run printed.
type BootResult struct {
	Lines    []string
	Marker   string // the console line holding the OK marker ("" if none)
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
			res.Lines = append(res.Lines, line)
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
