package cpio

import (
	"bytes"
	"fmt"
	"io"
	"strings"
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

// stripped is one entry of rpm's stripped form: the file index, then
// the data (the header gives its size).
func stripped(index uint32, data string) []byte {
	b := []byte(fmt.Sprintf("07070X%08x", index))
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// fuzzFiles is the file list the fuzzer's stripped entries index.
var fuzzFiles = []Entry{
	{Name: "./usr/bin/x", Mode: 0o100755, Size: 5},
	{Name: "./etc", Mode: 0o40755},
	{Name: "./l", Mode: 0o120777, Size: 1},
}

// fileList answers stripped entries from a fixed list, as an RPM header
// would, refusing an index beyond it.
func fileList(files []Entry) func(int) (*Entry, error) {
	return func(i int) (*Entry, error) {
		if i < 0 || i >= len(files) {
			return nil, fmt.Errorf("names file index %d, the header lists %d files", i, len(files))
		}
		e := files[i]
		return &e, nil
	}
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
	f.Add(archive(stripped(0, "hello"), stripped(1, ""), stripped(2, "x")))
	f.Add(append(stripped(0, "hello"), []byte("07070Xffffffff")...))
	f.Add([]byte("07070X00000009"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		r.Stripped = fileList(fuzzFiles)
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

func TestStripped(t *testing.T) {
	files := []Entry{
		{Name: "./big", Mode: 0o100644, Size: 6},
		{Name: "./dir", Mode: 0o40755},
		{Name: "./link", Mode: 0o120777, Size: 3},
		{Name: "./odd", Mode: 0o100644, Size: 1},
	}
	read := func(data []byte, fn func(int) (*Entry, error)) ([]string, error) {
		r := NewReader(bytes.NewReader(data))
		r.Stripped = fn
		var got []string
		for {
			e, err := r.Next()
			if err == io.EOF {
				return got, nil
			}
			if err != nil {
				return got, err
			}
			b, err := io.ReadAll(r)
			if err != nil {
				return got, err
			}
			got = append(got, fmt.Sprintf("%d:%s=%s", e.Index, e.Name, b))
			if !e.Stripped {
				t.Errorf("%s: not marked stripped", e.Name)
			}
		}
	}
	// rpm's order (hard-link sets last), a newc trailer as rpm writes it.
	got, err := read(archive(stripped(3, "z"), stripped(0, "abcdef"), stripped(1, ""), stripped(2, "big")), fileList(files))
	if err != nil {
		t.Fatal(err)
	}
	if want := "[3:./odd=z 0:./big=abcdef 1:./dir= 2:./link=big]"; fmt.Sprint(got) != want {
		t.Fatalf("got %v, want %s", got, want)
	}
	// The stripped end marker (index -1) ends the archive too.
	if got, err := read(append(stripped(3, "z"), stripped(strippedEnd, "")...), fileList(files)); err != nil || len(got) != 1 {
		t.Errorf("end marker: %v, %v", got, err)
	}
	// An index beyond the file list is an error naming it.
	if _, err := read(archive(stripped(4, "")), fileList(files)); err == nil || !strings.Contains(err.Error(), "names file index 4, the header lists 4 files") {
		t.Errorf("index beyond the list: %v", err)
	}
	// Without a file list a stripped entry cannot be read.
	if _, err := read(archive(stripped(0, "abcdef")), nil); err == nil || !strings.Contains(err.Error(), "07070X") {
		t.Errorf("no file list: %v", err)
	}
	if _, err := read([]byte("07070Xzzzzzzzz"), fileList(files)); err == nil || !strings.Contains(err.Error(), "bad file index") {
		t.Errorf("bad index: %v", err)
	}
	// Data shorter than the header says is a truncated archive.
	if _, err := read(stripped(0, "ab")[:16], fileList(files)); err == nil {
		t.Error("short data accepted")
	}
}
