package evr

import (
	"fmt"
	"testing"
)

const (
	LT = FlagLess
	LE = FlagLess | FlagEqual
	EQ = FlagEqual
	GE = FlagGreater | FlagEqual
	GT = FlagGreater
)

func flagString(f uint32) string {
	switch f & FlagSense {
	case 0:
		return ""
	case LT:
		return "<"
	case LE:
		return "<="
	case EQ:
		return "="
	case GE:
		return ">="
	case GT:
		return ">"
	}
	return fmt.Sprintf("%#x", f)
}

type overlapCase struct {
	name   string
	p      string
	pflags uint32
	r      string
	rflags uint32
	want   bool
}

func runOverlap(t *testing.T, sem Semantics, tests []overlapCase) {
	t.Helper()
	for _, tt := range tests {
		got := Overlap(sem, Parse(tt.p), tt.pflags, Parse(tt.r), tt.rflags)
		if got != tt.want {
			t.Errorf("%s: %v: Provides: N %s %s vs Requires: N %s %s = %v, want %v",
				tt.name, sem, flagString(tt.pflags), tt.p, flagString(tt.rflags), tt.r, got, tt.want)
		}
		if got2 := OverlapLabel(sem, tt.p, tt.pflags, tt.r, tt.rflags); got2 != got {
			t.Errorf("%s: OverlapLabel disagrees with Overlap", tt.name)
		}
		if got3 := Satisfies(sem, Parse(tt.p), tt.pflags, Parse(tt.r), tt.rflags); got3 != got {
			t.Errorf("%s: Satisfies disagrees with Overlap", tt.name)
		}
	}
}

func TestOverlapALT(t *testing.T) {
	s3, _ := EncodeSet(16, []string{"mama", "myla", "ramu"})
	s2, _ := EncodeSet(16, []string{"myla", "mama"})
	s2wide, _ := EncodeSet(20, []string{"myla", "mama"})
	other, _ := EncodeSet(16, []string{"baba"})
	runOverlap(t, ALT, []overlapCase{
		// Unversioned sides always match.
		{"unversioned provide vs < 0", "", 0, "0", LT, true}, // python3(argparse) < 0
		{"unversioned provide vs >=", "", 0, "1.0-alt1", GE, true},
		{"unversioned require", "1.0-alt1", EQ, "", 0, true},
		{"flags without version", "", EQ, "1.0", GE, true},
		{"prereq bit is not a sense", "1.0", EQ, "2.0", FlagPrereq, true},

		// Plain ranges.
		{"= equal", "1.0-alt1", EQ, "1.0-alt1", EQ, true},
		{"= different", "1.0-alt1", EQ, "1.0-alt2", EQ, false},
		{">= met", "1.1-alt1", EQ, "1.0-alt1", GE, true},
		{">= met equal", "1.0-alt1", EQ, "1.0-alt1", GE, true},
		{">= unmet", "0.9-alt1", EQ, "1.0-alt1", GE, false},
		{"> met", "1.1", EQ, "1.0", GT, true},
		{"> unmet equal", "1.0", EQ, "1.0", GT, false},
		{"< met", "0.9", EQ, "1.0", LT, true},
		{"< unmet equal", "1.0", EQ, "1.0", LT, false},
		{"< unmet", "1.1", EQ, "1.0", LT, false},
		{"<= met equal", "1.0", EQ, "1.0", LE, true},
		{"<= unmet", "1.1", EQ, "1.0", LE, false},
		{"ALT alpha newer", "1.0a", EQ, "1.0.1", GE, true},
		{"range provide >= vs <", "1.0", GE, "2.0", LT, true},
		{"range provide < vs >", "1.0", LT, "2.0", GT, false},

		// Epoch promotion.
		{"provide epoch ignored", "3:1.0-alt1", EQ, "1.0-alt1", EQ, true},
		{"provide epoch ignored, version decides", "3:1.0-alt1", EQ, "2.0-alt1", GE, false},
		{"require epoch: provide older", "1.0-alt1", EQ, "1:1.0-alt1", EQ, false},
		{"require epoch: provide older, < met", "5.0-alt1", EQ, "1:1.0-alt1", LT, true},
		{"require epoch 0 counts as none", "1.0-alt1", EQ, "0:1.0-alt1", GE, true},
		{"both epochs compared", "2:0.1", EQ, "1:9.0", GE, true},
		{"both epochs compared, older", "1:9.0", EQ, "2:0.1", GE, false},
		{"both epochs equal", "1:1.0", EQ, "1:1.0", EQ, true},

		// Release asymmetry.
		{"N = V vs N = V-R", "1.0", EQ, "1.0-alt1", EQ, false},
		{"N = V vs N >= V-R", "1.0", EQ, "1.0-alt1", GE, false},
		{"N = V vs N <= V-R", "1.0", EQ, "1.0-alt1", LE, false},
		{"N = V vs N >= V-R, newer V", "1.1", EQ, "1.0-alt1", GE, true},
		{"N = V-R vs N = V", "1.0-alt1", EQ, "1.0", EQ, true},
		{"N = V-R vs N >= V", "1.0-alt1", EQ, "1.0", GE, true},
		{"N = V-R vs N > V", "1.0-alt1", EQ, "1.0", GT, false},

		// Disttags, only when E:V:R are equal.
		{"disttag same", "1.0-alt1:p10+1.2.3.4", EQ, "1.0-alt1:p10+1.2.3.4", EQ, true},
		{"disttag different", "1.0-alt1:p10+1.2.3.4", EQ, "1.0-alt1:p10+1.2.3.5", EQ, false},
		{"disttag different, >=", "1.0-alt1:p10+1.2.3.4", EQ, "1.0-alt1:sisyphus+1.2.3.4", GE, false},
		{"disttag provide only", "1.0-alt1:p10+1.2.3.4", EQ, "1.0-alt1", EQ, true},
		{"disttag provide only, <", "1.0-alt1:p10+1.2.3.4", EQ, "1.0-alt1", LT, false},
		{"disttag require only", "1.0-alt1", EQ, "1.0-alt1:p10+1.2.3.4", EQ, false},
		{"disttag require only, >=", "1.0-alt1", EQ, "1.0-alt1:p10+1.2.3.4", GE, false},
		{"disttag different but release newer", "1.0-alt2:p10+1.2.3.4", EQ, "1.0-alt1:p9+9.9.9.9", GE, true},
		{"disttag require only but version newer", "1.1-alt1", EQ, "1.0-alt1:p10+1.2.3.4", GE, true},
		{"disttag different but version older", "0.9-alt1:p10+1", EQ, "1.0-alt1:p9+1", LT, true},
		{"real kernel", "2:5.10.253-alt1:p10+415595.100.2.1", EQ, "2:5.10.253-alt1", EQ, true},

		// Set-versions.
		{"set superset", s3, EQ, s2, GE, true},
		{"set equal", s2, EQ, s2, GE, true},
		{"set subset", s2, EQ, s3, GE, false},
		{"set disjoint", s2, EQ, other, GE, false},
		{"set downsampled", s3, EQ, s2wide, GE, true},
		{"set with = require", s3, EQ, s3, EQ, false},
		{"set with > require", s3, EQ, s2, GT, false},
		{"set provide only", s3, EQ, "1.0", GE, false},
		{"set require only", "1.0", EQ, s2, GE, false},
		{"set provided garbage", "set:jh!!", EQ, s2, GE, false},
		{"set required garbage", s3, EQ, "set:xx", GE, false},
		{"set unversioned provide", "", 0, s2, GE, true},
		{"real set vs itself", "set:jgtcU6BLBccTnteGxrE0", EQ, "set:jgtcU6BLBccTnteGxrE0", GE, true},

		// ALT's self-conflicts: X = EVR against Conflicts: X < EVR / X > EVR.
		{"self-conflict <", "1.0-alt1", EQ, "1.0-alt1", LT, false},
		{"self-conflict >", "1.0-alt1", EQ, "1.0-alt1", GT, false},
	})
}

func TestOverlapRPM(t *testing.T) {
	runOverlap(t, RPM, []overlapCase{
		{"unversioned provide", "", 0, "0", LT, true},
		{"unversioned require", "1.0-1", EQ, "", 0, true},
		{"= equal", "1.0-1", EQ, "1.0-1", EQ, true},
		{"= different", "1.0-1", EQ, "1.0-2", EQ, false},
		{">= met", "1.1-1", EQ, "1.0-1", GE, true},
		{">= unmet", "0.9-1", EQ, "1.0-1", GE, false},
		{"> unmet equal", "1.0-1", EQ, "1.0-1", GT, false},
		{"< met", "0.9-1", EQ, "1.0-1", LT, true},
		{"<= met", "1.0-1", EQ, "1.0-1", LE, true},
		{"RPM numeric newer", "1.0a", EQ, "1.0.1", GE, false},
		{"tilde", "1.0~rc1-1", EQ, "1.0-1", GE, false},
		{"caret", "1.0^git1-1", EQ, "1.0-1", GT, true},

		// Missing epoch is 0 on both sides (no promotion).
		{"provide epoch, require none", "1:1.0-1", EQ, "1.0-1", EQ, false},
		{"provide epoch, require none, >=", "1:1.0-1", EQ, "2.0-1", GE, true},
		{"require epoch, provide none", "1.0-1", EQ, "1:1.0-1", EQ, false},
		{"require epoch, provide none, <", "9.0-1", EQ, "1:1.0-1", LT, true},
		{"epoch 0 equals none", "1.0-1", EQ, "0:1.0-1", EQ, true},
		{"epochs compared", "2:1.0", EQ, "1:9.0", GE, true},

		// Release only when both have one; the side without a release
		// matches if the other one's flags include EQUAL.
		{"N = V vs N = V-R", "1.0", EQ, "1.0-1", EQ, true},
		{"N = V vs N > V-R", "1.0", EQ, "1.0-1", GT, true},
		{"N = V-R vs N >= V", "1.0-1", EQ, "1.0", GE, true},
		{"N = V-R vs N > V", "1.0-1", EQ, "1.0", GT, false},
		{"N = V-R vs N < V", "1.0-1", EQ, "1.0", LT, false},
		{"N > V vs N < V-R", "1.0", GT, "1.0-1", LT, false},

		// No disttags and no sets under RPM.
		{"disttag ignored", "1.0-1:p10+1", EQ, "1.0-1:p11+2", EQ, true},
		{"set as plain version", "set:jhpXPckiq2", EQ, "set:jhpXPuD0", GE, false},
		{"set as plain version equal", "set:jhpXPuD0", EQ, "set:jhpXPuD0", EQ, true},
	})
}

func TestOverlapNoAlloc(t *testing.T) {
	p, r := Parse("2:5.10.253-alt1:p10+415595.100.2.1"), Parse("2:5.10.253-alt1")
	n := testing.AllocsPerRun(100, func() {
		Overlap(ALT, p, EQ, r, GE)
		Overlap(RPM, p, EQ, r, GE)
	})
	if n != 0 {
		t.Errorf("Overlap allocates %v times", n)
	}
}
