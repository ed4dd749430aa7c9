package kernel

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
)

// indexGet looks key up in a kmod index exactly (libkmod's index_search
// without wildcards), as an independent check of the writer.
func indexGet(data []byte, key string) ([]indexValue, error) {
	if len(data) < 12 || binary.BigEndian.Uint32(data) != indexMagic || binary.BigEndian.Uint32(data[4:]) != indexVersion {
		return nil, fmt.Errorf("bad header")
	}
	off := binary.BigEndian.Uint32(data[8:])
	for {
		p := int(off & 0x0FFFFFFF)
		if p >= len(data) {
			return nil, fmt.Errorf("offset %d out of range", p)
		}
		var prefix string
		if off&nodePrefix != 0 {
			end := bytes.IndexByte(data[p:], 0)
			prefix, p = string(data[p:p+end]), p+end+1
		}
		if len(key) < len(prefix) || key[:len(prefix)] != prefix {
			return nil, nil
		}
		key = key[len(prefix):]
		var first, last int
		var child []byte
		if off&nodeChilds != 0 {
			first, last = int(data[p]), int(data[p+1])
			child = data[p+2 : p+2+4*(last-first+1)]
			p += 2 + 4*(last-first+1)
		}
		if key == "" {
			var vals []indexValue
			if off&nodeValues != 0 {
				n := int(binary.BigEndian.Uint32(data[p:]))
				p += 4
				for i := 0; i < n; i++ {
					prio := binary.BigEndian.Uint32(data[p:])
					end := bytes.IndexByte(data[p+4:], 0)
					vals = append(vals, indexValue{prio, string(data[p+4 : p+4+end])})
					p += 4 + end + 1
				}
			}
			return vals, nil
		}
		c := int(key[0])
		if child == nil || c < first || c > last {
			return nil, nil
		}
		off = binary.BigEndian.Uint32(child[4*(c-first):])
		if off == 0 {
			return nil, nil
		}
		key = key[1:]
	}
}

func TestIndexRoundTrip(t *testing.T) {
	idx := newIndex()
	entries := []struct {
		key, value string
		prio       uint32
	}{
		{"once", "1", 5}, {"one", "2", 1}, {"on", "3", 2}, {"ask", "4", 0}, {"ate", "5", 0},
		{"on", "6", 2}, {"on", "7", 1}, {"", "root", 0}, {"a", "8", 3},
	}
	for _, e := range entries {
		if err := idx.insert(e.key, e.value, e.prio); err != nil {
			t.Fatal(err)
		}
	}
	data, err := idx.bytes()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]indexValue{
		"on":   {{1, "7"}, {2, "6"}, {2, "3"}}, // equal priorities: newest first, as depmod
		"once": {{5, "1"}}, "one": {{1, "2"}}, "ask": {{0, "4"}}, "ate": {{0, "5"}}, "": {{0, "root"}},
		"a": {{3, "8"}}, "o": nil, "onc": nil, "ones": nil, "b": nil,
	}
	for k, w := range want {
		got, err := indexGet(data, k)
		if err != nil || !slices.Equal(got, w) {
			t.Errorf("lookup %q = %v, %v; want %v", k, got, err, w)
		}
	}
	if err := idx.insert("caf\xc3\xa9", "x", 0); err == nil {
		t.Error("non-ASCII key accepted")
	}
}

// An empty index is a header and a root node with nothing in it.
func TestIndexEmpty(t *testing.T) {
	data, err := newIndex().bytes()
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0xb0, 0x07, 0xf4, 0x57, 0, 2, 0, 1, 0, 0, 0, 12}
	if !bytes.Equal(data, want) {
		t.Errorf("empty index = % x, want % x", data, want)
	}
}
