// Package evr parses and compares RPM versions (Epoch:Version-Release:Disttag)
// under two semantics: upstream rpm's (rpm-md repositories) and ALT Linux's
// (apt-rpm repositories), and decides whether a provide satisfies a require.
package evr

// Semantics selects the comparison rules.
type Semantics int

const (
	// ALT is ALT Linux rpm: alphabetic segments newer than numeric ones,
	// disttags, set-versions, epoch promotion, asymmetric release.
	ALT Semantics = iota
	// RPM is upstream rpm (rpm.org), used for rpm-md repositories.
	RPM
)

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
