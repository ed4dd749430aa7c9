package rpmfile

import "testing"

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
