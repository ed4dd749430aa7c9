package meta

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"io"
	"strings"
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

// TestEnv holds the INSTALLER_META_BASE64 encoding to Talos's: the
// upstream factory's own vector (its integration test's META schematic),
// several values in the schematic's order, and gzip above 256 bytes.
func TestEnv(t *testing.T) {
	for _, c := range []struct {
		values []Value
		want   string
	}{
		{[]Value{{0xa, `{"externalIPs":["1.2.3.4"]}`}}, "MHhhPXsiZXh0ZXJuYWxJUHMiOlsiMS4yLjMuNCJdfQ=="},
		// "0xc=b;0xa=a;0xff=" in the order given, keys in lower-case hex.
		{[]Value{{0xc, "b"}, {0xa, "a"}, {0xff, ""}}, "MHhjPWI7MHhhPWE7MHhmZj0="},
		{nil, ""},
	} {
		got := Env(c.values)
		if got != c.want {
			t.Errorf("Env(%v) = %q, want %q", c.values, got, c.want)
		}
		back, err := DecodeEnv(got)
		if err != nil || len(back) != len(c.values) {
			t.Errorf("DecodeEnv(%q) = %v, %v", got, back, err)
		}
	}
	long := []Value{{0xa, strings.Repeat("x", 300)}}
	enc := Env(long)
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(raw) < 2 || raw[0] != 0x1f || raw[1] != 0x8b {
		t.Fatalf("a long value is not gzipped: % x %v", raw[:min(len(raw), 4)], err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(zr)
	if err != nil || string(text) != "0xa="+strings.Repeat("x", 300) {
		t.Errorf("gunzipped: %q %v", text, err)
	}
	if back, err := DecodeEnv(enc); err != nil || len(back) != 1 || back[0] != long[0] {
		t.Errorf("DecodeEnv of the gzipped: %v %v", back, err)
	}
	// Longer than a copy once gunzipped: refused, not cut short.
	tooLong := Env([]Value{{0xa, strings.Repeat("x", CopyLength)}})
	for _, bad := range []string{"!!!", base64.StdEncoding.EncodeToString([]byte("0x100=a")), base64.StdEncoding.EncodeToString([]byte("novalue")), tooLong} {
		if _, err := DecodeEnv(bad); err == nil {
			t.Errorf("DecodeEnv(%q) took it", bad)
		}
	}
}
