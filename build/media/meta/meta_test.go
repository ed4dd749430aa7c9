package meta

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"
)

func TestRoundTripAndLayout(t *testing.T) {
	vals := map[uint8][]byte{0x0a: []byte(`{"externalIPs":["1.2.3.4"]}`), 0x0c: []byte("second")}
	b, err := Encode(vals)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != Size || !bytes.Equal(b[:CopyLength], b[CopyLength:]) {
		t.Fatalf("%d bytes, copies equal: %v", len(b), bytes.Equal(b[:CopyLength], b[CopyLength:]))
	}
	// The layout by hand: magic, first tag 0x0a with its length, checksum.
	c := append([]byte(nil), b[:CopyLength]...)
	if binary.BigEndian.Uint32(c) != 0x5a4b3c2d || binary.BigEndian.Uint32(c[4:]) != 0x0a || binary.BigEndian.Uint32(c[8:]) != uint32(len(vals[0x0a])) {
		t.Errorf("header % x", c[:12])
	}
	sum := append([]byte(nil), c[CopyLength-36:CopyLength-4]...)
	clear(c[CopyLength-36 : CopyLength-4])
	if got := sha256.Sum256(c); !bytes.Equal(got[:], sum) {
		t.Error("checksum")
	}
	got, err := Decode(b)
	if err != nil || len(got) != 2 || string(got[0x0c]) != "second" {
		t.Errorf("decode: %v %q", err, got)
	}
	// A damaged first copy: the second is read.
	b[100] ^= 1
	if got, err := Decode(b); err != nil || string(got[0x0a]) != string(vals[0x0a]) {
		t.Errorf("second copy: %v", err)
	}
	b[CopyLength+100] ^= 1
	if _, err := Decode(b); err == nil {
		t.Error("two damaged copies accepted")
	}
	if _, err := Encode(map[uint8][]byte{0: []byte("x")}); err == nil {
		t.Error("key 0 accepted")
	}
	if _, err := Encode(map[uint8][]byte{1: make([]byte, CopyLength)}); err == nil {
		t.Error("oversized value accepted")
	}
}
