package disktar

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// TestDiskTarJudged: GNU tar lists disk.raw (and only it) with the source
// date, and gives back the raw bytes.
func TestDiskTarJudged(t *testing.T) {
	tarTool := testutil.NeedTool(t, "tar")
	dir := t.TempDir()
	raw := make([]byte, 3<<20)
	copy(raw, "boot sector")
	copy(raw[len(raw)-10:], "backup gpt")
	var a, b bytes.Buffer
	if err := Write(&a, raw, 1700000000); err != nil {
		t.Fatal(err)
	}
	if err := Write(&b, raw, 1700000000); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two writes of one disk differ")
	}
	p := filepath.Join(dir, "gcp.raw.tar.gz")
	if err := os.WriteFile(p, a.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tarTool, "-tvzf", p)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Count(string(out), "\n") != 1 || !strings.Contains(string(out), "3145728 2023-11-14 22:13 disk.raw") {
		t.Fatalf("tar -tvzf: %v\n%s", err, out)
	}
	if out, err := exec.Command(tarTool, "-xzf", p, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar -xzf: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, Name))
	if err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("disk.raw read back: %v, %d bytes", err, len(got))
	}
	if err := Write(&a, nil, 0); err == nil {
		t.Error("an empty disk accepted")
	}
}
