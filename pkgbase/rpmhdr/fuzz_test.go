package rpmhdr

import (
	"bytes"
	"testing"
)

// FuzzHeader: any bytes either parse or fail cleanly, and every accessor on
// a parsed header stays within bounds; a parsed header re-marshals and
// parses again.
func FuzzHeader(f *testing.F) {
	b := NewBuilder()
	b.SetString(TagName, "x")
	b.SetStrings(TagRequireName, []string{"a", "b"})
	b.SetInt32(TagRequireFlags, 8, 0)
	b.SetInt16(TagFileModes, 0o100644)
	b.SetInt64(TagLongFileSizes, 12)
	b.SetBin(TagPayloadDigest, []byte{1, 2, 3})
	f.Add(b.Marshal())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ReadHeader(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, e := range h.Entries {
			_ = h.Strings(e.Tag)
			_ = h.Ints(e.Tag)
			_ = h.Bytes(e.Tag)
			_ = h.String(e.Tag)
		}
		nb := NewBuilder()
		nb.CopyFrom(h)
		if _, err := Parse(nb.Marshal()); err != nil {
			t.Fatalf("re-marshalled header does not parse: %v", err)
		}
	})
}
