package hugepage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// Bytes and ReadFile behave as make and os.ReadFile, whatever the kernel
// does with the advice; Advise takes any range, aligned or not.
func TestBytesAndReadFile(t *testing.T) {
	for _, n := range []int{0, 1, size - 1, size, 3*size + 17} {
		b := Bytes(n)
		if len(b) != n || bytes.ContainsFunc(b, func(r rune) bool { return r != 0 }) {
			t.Fatalf("Bytes(%d): %d bytes, not all zero", n, len(b))
		}
		for i := range b {
			b[i] = byte(i)
		}
		p := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(p)
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("ReadFile of %d bytes: %v, %d bytes", n, err, len(got))
		}
	}
	b := make([]byte, 5*size)
	Advise(unsafe.Pointer(&b[3]), uintptr(len(b)-3))
	Advise(unsafe.Pointer(&b[0]), 10)
	if _, err := ReadFile(filepath.Join(t.TempDir(), "missing")); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
}
