package vhd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// rawImage is a 5 MiB disk with some data at both ends.
func rawImage() []byte {
	raw := make([]byte, 5<<20)
	copy(raw, "a boot sector, say")
	copy(raw[len(raw)-4096:], "a backup GPT header, say")
	return raw
}

// TestVHDJudged: qemu-img reads our disk as a fixed VHD of the raw image's
// size with the same content, and the footer is the one qemu-img itself
// writes for the raw image, but for the fields that differ by design (the
// timestamp and the unique id, and so the checksum).
func TestVHDJudged(t *testing.T) {
	qemuImg := testutil.NeedTool(t, "qemu-img")
	dir := t.TempDir()
	raw := rawImage()
	rawPath, vPath, qPath := filepath.Join(dir, "disk.raw"), filepath.Join(dir, "disk.vhd"), filepath.Join(dir, "qemu.vhd")
	if err := os.WriteFile(rawPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Write(&b, raw, 1700000000); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vPath, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"compare", "-f", "raw", "-F", "vpc", rawPath, vPath},
		{"convert", "-f", "raw", "-O", "vpc", "-o", "subformat=fixed,force_size", rawPath, qPath},
	} {
		if out, err := exec.Command(qemuImg, args...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	out, err := exec.Command(qemuImg, "info", "-f", "vpc", "--output=json", vPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"virtual-size": 5242880`) {
		t.Errorf("qemu-img info: %v\n%s", err, out)
	}
	theirs, err := os.ReadFile(qPath)
	if err != nil {
		t.Fatal(err)
	}
	ours := b.Bytes()
	if len(ours) != len(theirs) || !bytes.Equal(ours[:len(raw)], theirs[:len(raw)]) {
		t.Fatalf("%d bytes, qemu-img wrote %d", len(ours), len(theirs))
	}
	of, tf := ours[len(raw):], theirs[len(raw):]
	for _, f := range [][]byte{of, tf} {
		clear(f[24:28]) // timestamp
		clear(f[64:84]) // checksum, unique id
	}
	if !bytes.Equal(of, tf) {
		t.Errorf("footers differ beyond timestamp, checksum and id:\nours   %x\nqemu's %x", of[:96], tf[:96])
	}
}

func TestVHDDeterministic(t *testing.T) {
	var a, b bytes.Buffer
	if err := Write(&a, rawImage(), 1700000000); err != nil {
		t.Fatal(err)
	}
	if err := Write(&b, rawImage(), 1700000000); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two writes of one image differ")
	}
	f := a.Bytes()[a.Len()-footerSize:]
	if checksum(f) != uint32(f[64])<<24|uint32(f[65])<<16|uint32(f[66])<<8|uint32(f[67]) {
		t.Error("the checksum does not hold")
	}
	for _, raw := range [][]byte{nil, make([]byte, 1000), make([]byte, 1<<20+512)} {
		if err := Write(&a, raw, 0); err == nil || !strings.Contains(err.Error(), "whole number of MiB") {
			t.Errorf("a raw image of %d bytes: %v", len(raw), err)
		}
	}
}
