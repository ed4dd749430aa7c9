package cpio

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

func newc(name string, mode uint32, data string) []byte {
	h := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x", 1, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	b := []byte(h + name + "\x00")
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func archive(entries ...[]byte) []byte {
	var out []byte
	for _, e := range entries {
		out = append(out, e...)
	}
	return append(out, newc("TRAILER!!!", 0, "")...)
}

// FuzzCpio: the reader never panics and never reads an entry past its size.
func FuzzCpio(f *testing.F) {
	f.Add(archive(newc("./usr/bin/x", 0o100755, "#!/bin/sh\necho hi\n"), newc("./etc", 0o40755, ""), newc("./l", 0o120777, "x")))
	f.Add(archive())
	f.Add([]byte("070701"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		for i := 0; i < 10000; i++ {
			e, err := r.Next()
			if err != nil {
				return
			}
			n, err := io.Copy(io.Discard, r)
			if n > e.Size {
				t.Fatalf("read %d bytes of a %d-byte entry", n, e.Size)
			}
			if err != nil {
				return
			}
		}
	})
}

func TestReader(t *testing.T) {
	r := NewReader(bytes.NewReader(archive(newc("./a", 0o100644, "hello"), newc("./b", 0o100644, "abcdefgh"))))
	var got []string
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r)
		got = append(got, e.Name+"="+string(b))
	}
	if fmt.Sprint(got) != "[./a=hello ./b=abcdefgh]" {
		t.Fatalf("got %v", got)
	}
	// Missing trailer and bad magic are errors, not EOF.
	if _, err := NewReader(bytes.NewReader(newc("./a", 0o100644, "x"))).Next(); err != nil {
		t.Fatal(err)
	}
	r = NewReader(bytes.NewReader(newc("./a", 0o100644, "x")))
	r.Next()
	if _, err := r.Next(); err == nil || err == io.EOF {
		t.Errorf("no trailer: %v", err)
	}
	if _, err := NewReader(bytes.NewReader([]byte("070707000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"))).Next(); err == nil {
		t.Error("odc magic accepted")
	}
}
