// Package evr parses and compares RPM versions (Epoch:Version-Release:Disttag)
// under two semantics: upstream rpm's (rpm-md repositories) and ALT Linux's
// (apt-rpm repositories), and decides whether a provide satisfies a require.
package evr

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// Semantics selects the comparison rules.
type Semantics int

const (
	// ALT is ALT Linux rpm: alphabetic segments newer than numeric ones,
	// disttags, set-versions, epoch promotion, asymmetric release.
	ALT Semantics = iota
	// RPM is upstream rpm (rpm.org), used for rpm-md repositories.
	RPM
)

// String returns "alt" or "rpm".
func (s Semantics) String() string {
	switch s {
	case ALT:
		return "alt"
	case RPM:
		return "rpm"
	}
	return "Semantics(" + strconv.Itoa(int(s)) + ")"
}

// ParseSemantics maps "alt" or "rpm" (any case) to a Semantics.
func ParseSemantics(s string) (Semantics, error) {
	switch strings.ToLower(s) {
	case "alt":
		return ALT, nil
	case "rpm":
		return RPM, nil
	}
	return 0, fmt.Errorf("evr: unknown version semantics %q (want alt or rpm)", s)
}

// Dependency sense flags, as rpm stores them in RPMTAG_*FLAGS.
const (
	FlagLess    uint32 = 0x02
	FlagGreater uint32 = 0x04
	FlagEqual   uint32 = 0x08
	FlagSense          = FlagLess | FlagGreater | FlagEqual
	FlagPrereq  uint32 = 0x40
	FlagRPMLib  uint32 = 0x1000000
)

// EVR is a parsed version label.
type EVR struct {
	Epoch    int    // meaningful only when HasEpoch
	HasEpoch bool   // false when the label had no "E:" part
	Version  string //
	Release  string // "" when absent
	Disttag  string // "" when absent (ALT only)
}

// setPrefix marks ALT set-versions ("set:jhpXPckiq2"); see set.go.
const setPrefix = "set:"

// maxEpoch caps epochs that do not fit an int. rpm itself stores epochs as
// 32-bit numbers, so real labels never come near it; the cap only keeps
// Parse total on garbage input.
const maxEpoch = int(^uint(0) >> 1)

// Parse splits a label of the form [E:]V[-R[:DISTTAG]] the way rpm's
// parseEVR does, extended by ALT's disttag:
//   - the epoch is the text before the first ':' if that text is all ASCII
//     digits (an empty epoch, ":V", means 0, as in rpm);
//   - the release starts after the last '-' of the remainder;
//   - the disttag follows the first ':' inside the release.
//
// A version starting with "set:" is an ALT set-version and is kept whole.
// Parse never fails: every string is some label. apt's "@BUILDTIME"
// suffix is not recognised here; strip it before calling.
func Parse(s string) EVR {
	var e EVR
	rest := s
	if k := strings.IndexByte(s, ':'); k >= 0 && allDigits(s[:k]) {
		e.HasEpoch = true
		e.Epoch = atoiSat(s[:k])
		rest = s[k+1:]
	}
	if strings.HasPrefix(rest, setPrefix) {
		e.Version = rest
		return e
	}
	k := strings.LastIndexByte(rest, '-')
	if k < 0 {
		e.Version = rest
		return e
	}
	e.Version = rest[:k]
	rel := rest[k+1:]
	if d := strings.IndexByte(rel, ':'); d >= 0 {
		e.Release, e.Disttag = rel[:d], rel[d+1:]
	} else {
		e.Release = rel
	}
	return e
}

// String gives the canonical label: "E:" only when HasEpoch, "-R" only
// when there is a release and ":D" only when there is a disttag. Labels
// that Parse produces but that would not survive this rule keep an empty
// release: a disttag without a release is written "V-:D", and a version
// containing '-' without a release is written "V-", so that Parse always
// reads String's output back to the same EVR.
func (e EVR) String() string {
	n := len(e.Version) + len(e.Release) + len(e.Disttag) + 2
	if e.HasEpoch {
		n += 21
	}
	b := make([]byte, 0, n)
	if e.HasEpoch {
		b = strconv.AppendInt(b, int64(e.Epoch), 10)
		b = append(b, ':')
	}
	b = append(b, e.Version...)
	// The '-' is also needed when the version itself contains one, or
	// Parse would take the version's last '-' for the separator.
	if e.Release != "" || e.Disttag != "" ||
		(strings.IndexByte(e.Version, '-') >= 0 && !strings.HasPrefix(e.Version, setPrefix)) {
		b = append(b, '-')
		b = append(b, e.Release...)
	}
	if e.Disttag != "" {
		b = append(b, ':')
		b = append(b, e.Disttag...)
	}
	return string(b)
}

// epoch returns the epoch with an absent one counting as 0.
func (e EVR) epoch() int {
	if e.HasEpoch {
		return e.Epoch
	}
	return 0
}

// unversioned reports whether e is the empty label (a dependency without
// a version).
func (e EVR) unversioned() bool {
	return !e.HasEpoch && e.Version == "" && e.Release == "" && e.Disttag == ""
}

// Compare orders two labels the way rpm's label compare does: epoch (an
// absent epoch counts as 0), then Vercmp of the versions, then Vercmp of
// the releases. Disttags do not take part; see Newer.
func Compare(sem Semantics, a, b EVR) int {
	if c := cmp.Compare(a.epoch(), b.epoch()); c != 0 {
		return c
	}
	if c := Vercmp(sem, a.Version, b.Version); c != 0 {
		return c
	}
	return Vercmp(sem, a.Release, b.Release)
}

// CompareLabel is Compare of two unparsed labels.
func CompareLabel(sem Semantics, a, b string) int {
	return Compare(sem, Parse(a), Parse(b))
}

// Newer orders two candidate packages of one name, best (newest) last, and
// returns -1, 0 or 1 like Compare.
//
// Under ALT (rpmEVRDTCompare in ALT's rpm) this is epoch, version, release;
// then, only if both have a disttag, the branch prefixes of the disttags
// (the text before '+'; a disttag without '+' has an empty prefix): the
// prefix equal to targetBranch wins, otherwise an empty prefix is the
// oldest and other prefixes are ordered by Vercmp; finally the build times
// (0 means unknown and is the oldest).
//
// Under RPM it is Compare and then the build times.
func Newer(sem Semantics, a, b EVR, aBuildTime, bBuildTime int64, targetBranch string) int {
	if c := Compare(sem, a, b); c != 0 {
		return c
	}
	if sem == ALT && a.Disttag != "" && b.Disttag != "" {
		if c := cmpBranch(BranchOf(a.Disttag), BranchOf(b.Disttag), targetBranch); c != 0 {
			return c
		}
	}
	return cmp.Compare(aBuildTime, bBuildTime)
}

// BranchOf returns the branch prefix of an ALT disttag
// ("p10+415595.100.2.1" -> "p10"). Like ALT's rpm_cmp_disttag, a disttag
// without '+' has an empty branch.
func BranchOf(disttag string) string {
	if k := strings.IndexByte(disttag, '+'); k >= 0 {
		return disttag[:k]
	}
	return ""
}

// cmpBranch orders two disttag branch prefixes for Newer.
func cmpBranch(a, b, target string) int {
	switch {
	case a == b:
		return 0
	case target != "" && a == target:
		return 1
	case target != "" && b == target:
		return -1
	case a == "":
		return -1
	case b == "":
		return 1
	}
	return Vercmp(ALT, a, b)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// atoiSat converts a string of ASCII digits, saturating at maxEpoch
// instead of wrapping around.
func atoiSat(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		d := int(s[i] - '0')
		if n > (maxEpoch-d)/10 {
			return maxEpoch
		}
		n = n*10 + d
	}
	return n
}
