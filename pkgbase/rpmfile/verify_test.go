package rpmfile

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
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
