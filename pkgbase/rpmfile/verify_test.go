package rpmfile

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/internal/xzdec"
	"github.com/nodeforge/builder/pkgbase/cpio"
)

func TestPayloadSigned(t *testing.T) {
	header := SigResult{Covers: "header", Verified: true}
	whole := SigResult{Covers: "header+payload", Verified: true}
	digest := Check{Name: "payload-digest", OK: true}
	for _, c := range []struct {
		name string
		v    Verification
		want bool
	}{
		{"header signature and payload digest", Verification{Checks: []Check{digest}, Signatures: []SigResult{header}}, true},
		{"header+payload signature", Verification{Signatures: []SigResult{header, whole}}, true},
		{"header signature, no payload digest", Verification{Signatures: []SigResult{header}}, false},
		{"payload digest failed", Verification{Checks: []Check{{Name: "payload-digest"}}, Signatures: []SigResult{header}}, false},
		{"nothing verified", Verification{Checks: []Check{digest}, Signatures: []SigResult{{Covers: "header+payload"}}}, false},
	} {
		if got := c.v.PayloadSigned(); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// DigestsOnly checks what rpm -K checks without decompressing: the same
// digests and signatures as a full verification, no archive walk, and a
// damaged payload still fails.
func TestVerifyDigestsOnly(t *testing.T) {
	dir := testutil.Fixtures(t, "rpm")
	files, _ := filepath.Glob(filepath.Join(dir, "*.rpm"))
	if len(files) < 10 {
		t.Fatalf("fixtures missing: %v", files)
	}
	verify := func(data []byte, opts VerifyOptions) *Verification {
		t.Helper()
		p, err := Open(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		v, err := p.Verify(opts)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		full := verify(data, VerifyOptions{})
		entries := 0
		quick := verify(data, VerifyOptions{DigestsOnly: true, Entry: func(*cpio.Entry, io.Reader) error { entries++; return nil }})
		if entries != 0 {
			t.Errorf("%s: DigestsOnly walked %d archive entries", filepath.Base(f), entries)
		}
		var want []Check
		for _, c := range full.Checks {
			if c.Name != "payload-archive" {
				want = append(want, c)
			}
		}
		if !reflect.DeepEqual(quick.Checks, want) || !reflect.DeepEqual(quick.Signatures, full.Signatures) || quick.PayloadSize != full.PayloadSize {
			t.Errorf("%s: DigestsOnly %+v, full %+v", filepath.Base(f), quick, full)
		}
		if quick.DigestsOK() && len(want) > 0 {
			// The last byte of the payload changed: a digest must fail.
			bad := bytes.Clone(data)
			bad[len(bad)-1] ^= 0x55
			if verify(bad, VerifyOptions{DigestsOnly: true}).DigestsOK() {
				t.Errorf("%s: DigestsOnly accepted a damaged payload", filepath.Base(f))
			}
		}
	}
}

// A payload whose xz Check is wrong is refused by the payload's digest
// when the header has one, which is why Verify lets the decoder skip xz's
// own checks then; without one, by the MD5 over header and payload.
func TestVerifyXZCheck(t *testing.T) {
	dir := testutil.Fixtures(t, "rpm")
	for _, c := range []struct {
		file, fails string
	}{
		{"payload-test-0.1-w6.xzdio.x86_64.rpm", "payload-digest"},
		{"centos-release-6-0.el6.centos.5.x86_64.rpm", "md5"},
	} {
		data, err := os.ReadFile(filepath.Join(dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		// The Check of the payload's last Block: before the Index, whose
		// size the Stream Footer (the file's last 12 bytes) gives.
		footer := data[len(data)-12:]
		if string(footer[10:]) != "YZ" || footer[9]&0x0F != 0x0A {
			t.Fatalf("%s: no .xz Stream Footer with a SHA-256 Check at the end", c.file)
		}
		index := (int(binary.LittleEndian.Uint32(footer[4:8])) + 1) * 4
		bad := bytes.Clone(data)
		bad[len(bad)-12-index-1] ^= 1
		payload := bad[bytes.Index(bad, []byte("\xfd7zXZ\x00")):]
		for _, digested := range []bool{false, true} {
			r, err := decompress("xz", bytes.NewReader(payload), digested)
			if err != nil {
				t.Fatal(err)
			}
			// Without cgo the pure Go decoder checks all the same.
			if _, err := io.ReadAll(r); (err == nil) != (digested && xzdec.CanEncode) {
				t.Errorf("%s: the payload decompressed with digested %v: %v", c.file, digested, err)
			}
			r.Close()
		}
		p, err := Open(bytes.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		v, err := p.Verify(VerifyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range v.Checks {
			if ch.Name == c.fails && ch.OK {
				t.Errorf("%s: %s passed with a wrong xz Check", c.file, ch.Name)
			}
		}
		if v.Err(false) == nil {
			t.Errorf("%s: a wrong xz Check was accepted", c.file)
		}
	}
}
