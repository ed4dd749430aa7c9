package qcow2

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// rawImage is a disk image with data, holes of zeros and a short last
// cluster: 5 MiB and 3 sectors.
func rawImage() []byte {
	raw := make([]byte, 5<<20+3*512)
	for i := 0; i < 300<<10; i++ { // the first clusters: data
		raw[i] = byte(i*7 + i>>9)
	}
	copy(raw[2<<20:], bytes.Repeat([]byte("nodeforge"), 1000)) // an island
	for i := len(raw) - 700; i < len(raw); i++ {               // the short tail
		raw[i] = 0xA5
	}
	return raw
}

// TestQcow2Judged: qemu-img checks the image, reads it as qcow2 of the raw
// image's size, and finds it equal to the raw image, byte for byte.
func TestQcow2Judged(t *testing.T) {
	qemuImg := testutil.NeedTool(t, "qemu-img")
	dir := t.TempDir()
	raw := rawImage()
	rawPath, qPath := filepath.Join(dir, "disk.raw"), filepath.Join(dir, "disk.qcow2")
	if err := os.WriteFile(rawPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, raw); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(qPath, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"check", "-f", "qcow2", qPath},
		{"compare", "-f", "raw", "-F", "qcow2", rawPath, qPath},
	} {
		if out, err := exec.Command(qemuImg, args...).CombinedOutput(); err != nil {
			t.Errorf("qemu-img %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	out, err := exec.Command(qemuImg, "info", "--output=json", qPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"format": "qcow2"`) || !strings.Contains(string(out), `"virtual-size": 5244416`) {
		t.Errorf("qemu-img info: %v\n%s", err, out)
	}
	// Sparse: the holes take no room.
	if b.Len() > 1<<20 {
		t.Errorf("qcow2 of %d bytes for %d bytes of data", b.Len(), 300<<10+9000+700)
	}
}

// TestQcow2Deterministic: the same raw image, the same bytes, as many as
// Size says; and what a
// qcow2 image cannot hold is refused.
func TestQcow2Deterministic(t *testing.T) {
	var a, b bytes.Buffer
	if err := Write(&a, rawImage()); err != nil {
		t.Fatal(err)
	}
	if err := Write(&b, rawImage()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two writes of one image differ")
	}
	if n := Size(rawImage()); n != int64(a.Len()) {
		t.Errorf("Size says %d bytes, Write wrote %d", n, a.Len())
	}
	for _, raw := range [][]byte{nil, make([]byte, 1000)} {
		if err := Write(&a, raw); err == nil {
			t.Errorf("a raw image of %d bytes accepted", len(raw))
		}
	}
}
