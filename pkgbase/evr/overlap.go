package evr

import (
	"cmp"
	"strings"
)

// Overlap reports whether a provide (its sense flags and label) satisfies a
// require, i.e. whether the two version ranges intersect; it is rpm's
// rpmRangesOverlap with A = provide and B = require. Names are compared by
// the caller.
//
// Both semantics agree on the frame: if either side has no sense flags or
// an empty label, the versions do not matter and Overlap is true; at the
// end the sign of the comparison of the two labels is checked against the
// flags (see rangesOverlap). They differ in how the labels compare.
//
// ALT (ALT Linux rpm):
//   - set-versions: if both versions are "set:..." the require must be
//     ">=" and is met iff the provided set is a superset of (or equal to)
//     the required one (SetCmp returns 1 or 0); a set-version on one side
//     only never matches;
//   - epoch: compared when both have one; an epoch on the provide alone is
//     ignored ("promotion"); an epoch > 0 on the require alone makes the
//     provide older. An explicit epoch 0 on the require alone counts as
//     absent, as in rpm's code (atol(bE) > 0), so "Requires: N >= 0:1"
//     is met by "Provides: N = 1";
//   - release: compared when both have one; a release on the provide alone
//     is ignored; a release on the require alone never matches
//     ("Provides: N = V" does not meet "Requires: N = V-R");
//   - disttag, consulted only when epoch, version and release compare
//     equal: both present and different, or only on the require, never
//     matches; on the provide alone it is ignored.
//
// RPM (upstream rpm 4.x rpmverOverlap): a missing epoch is 0 on both
// sides; releases are compared only when both have one, and if one side
// has a release and the other side's flags include EQUAL the ranges
// overlap outright (upstream's "always matches if the side with no
// release has SENSE_EQUAL"); disttags and set-versions have no meaning.
func Overlap(sem Semantics, provide EVR, pflags uint32, require EVR, rflags uint32) bool {
	if pflags&FlagSense == 0 || rflags&FlagSense == 0 {
		return true
	}
	if provide.unversioned() || require.unversioned() {
		return true
	}
	if sem != ALT {
		return overlapRPM(provide, pflags, require, rflags)
	}

	pset := strings.HasPrefix(provide.Version, setPrefix)
	rset := strings.HasPrefix(require.Version, setPrefix)
	if pset || rset {
		if !pset || !rset {
			return false
		}
		if rflags&FlagSense != FlagGreater|FlagEqual {
			return false
		}
		c := SetCmp(provide.Version, require.Version)
		return c == 0 || c == 1
	}

	sense := 0
	switch {
	case provide.HasEpoch && require.HasEpoch:
		sense = cmp.Compare(provide.Epoch, require.Epoch)
	case require.HasEpoch && require.Epoch > 0:
		sense = -1
	}
	if sense == 0 {
		sense = Vercmp(ALT, provide.Version, require.Version)
	}
	if sense == 0 {
		switch {
		case provide.Release != "" && require.Release != "":
			sense = Vercmp(ALT, provide.Release, require.Release)
		case require.Release != "":
			return false
		}
	}
	if sense == 0 {
		switch {
		case provide.Disttag != "" && require.Disttag != "":
			if provide.Disttag != require.Disttag {
				return false
			}
		case require.Disttag != "":
			return false
		}
	}
	return rangesOverlap(sense, pflags, rflags)
}

// Satisfies is Overlap under the name used by resolvers.
func Satisfies(sem Semantics, provide EVR, pflags uint32, require EVR, rflags uint32) bool {
	return Overlap(sem, provide, pflags, require, rflags)
}

// OverlapLabel is Overlap of two unparsed labels.
func OverlapLabel(sem Semantics, provide string, pflags uint32, require string, rflags uint32) bool {
	return Overlap(sem, Parse(provide), pflags, Parse(require), rflags)
}

func overlapRPM(provide EVR, pflags uint32, require EVR, rflags uint32) bool {
	sense := cmp.Compare(provide.epoch(), require.epoch())
	if sense == 0 {
		sense = Vercmp(RPM, provide.Version, require.Version)
	}
	if sense == 0 {
		switch {
		case provide.Release != "" && require.Release != "":
			sense = Vercmp(RPM, provide.Release, require.Release)
		case provide.Release != "" && rflags&FlagEqual != 0,
			require.Release != "" && pflags&FlagEqual != 0:
			return true
		}
	}
	return rangesOverlap(sense, pflags, rflags)
}

// rangesOverlap is the final test of rpmRangesOverlap: sense is the sign
// of compare(provide, require); the ranges "provide pflags" and "require
// rflags" intersect iff one of them extends towards the other or both
// include the meeting point.
func rangesOverlap(sense int, pflags, rflags uint32) bool {
	switch {
	case sense < 0:
		return pflags&FlagGreater != 0 || rflags&FlagLess != 0
	case sense > 0:
		return pflags&FlagLess != 0 || rflags&FlagGreater != 0
	}
	return pflags&rflags&FlagSense != 0
}
