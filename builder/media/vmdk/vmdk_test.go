package vmdk

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// rawImage is a disk of size bytes with data at both ends, in the middle
// and across a grain table's end, the rest zeros.
func rawImage(size int) []byte {
	raw := make([]byte, size)
	copy(raw, "a boot sector, say")
	for i := 1 << 20; i < 3<<20; i++ {
		raw[i] = byte(i * 7 % 251)
	}
	copy(raw[32<<20-10:], "across the first grain table's end")
	copy(raw[len(raw)-4096:], "a backup GPT header, say")
	return raw
}

// TestVMDKJudged: qemu-img reads our VMDK as a streamOptimized disk of the
// raw image's size with the same content, and finds it consistent.
func TestVMDKJudged(t *testing.T) {
	qemuImg := testutil.NeedTool(t, "qemu-img")
	dir := t.TempDir()
	raw := rawImage(40<<20 + 512)
	var b bytes.Buffer
	if err := Write(&b, raw, "disk.vmdk"); err != nil {
		t.Fatal(err)
	}
	rawPath, vPath := filepath.Join(dir, "disk.raw"), filepath.Join(dir, "disk.vmdk")
	if err := os.WriteFile(rawPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vPath, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(qemuImg, "compare", "-f", "raw", "-F", "vmdk", rawPath, vPath).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img compare: %v\n%s", err, out)
	}
	if out, err := exec.Command(qemuImg, "check", "-f", "vmdk", vPath).CombinedOutput(); err != nil {
		t.Errorf("qemu-img check: %v\n%s", err, out)
	}
	out, err := exec.Command(qemuImg, "info", "-f", "vmdk", "--output=json", vPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"virtual-size": 41943552`) || !strings.Contains(string(out), `"create-type": "streamOptimized"`) ||
		!strings.Contains(string(out), `"compressed": true`) {
		t.Errorf("qemu-img info: %v\n%s", err, out)
	}
	// Zeros are left out: the stream is far smaller than the disk.
	if b.Len() > 4<<20 {
		t.Errorf("%d bytes for a disk of 2 MiB of data", b.Len())
	}
	var again bytes.Buffer
	if err := Write(&again, raw, "disk.vmdk"); err != nil || !bytes.Equal(again.Bytes(), b.Bytes()) {
		t.Errorf("not the same bytes twice: %v", err)
	}
	// The footer before the end-of-stream marker holds the directory.
	v := b.Bytes()
	if binary.LittleEndian.Uint32(v[len(v)-1024:]) != magic || binary.LittleEndian.Uint64(v[len(v)-1024+56:]) == gdAtEnd ||
		binary.LittleEndian.Uint64(v[56:]) != gdAtEnd || !bytes.Equal(v[len(v)-512:], make([]byte, 512)) {
		t.Error("header, footer or end-of-stream marker out of place")
	}
	for _, bad := range [][]byte{nil, make([]byte, 1000)} {
		if err := Write(&bytes.Buffer{}, bad, "disk.vmdk"); err == nil {
			t.Errorf("%d bytes accepted", len(bad))
		}
	}
}
