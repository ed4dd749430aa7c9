package evr

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// canonicalInput reports whether String(Parse(s)) must give s back: the
// known non-canonical spellings are an epoch that is not the decimal form
// of its value ("007:", ":", overflow), a '-' with nothing after it, and a
// ':' in the release with nothing after it.
func canonicalInput(s string, e EVR) bool {
	rest := s
	if e.HasEpoch {
		k := strings.IndexByte(s, ':')
		if s[:k] != strconv.Itoa(e.Epoch) {
			return false
		}
		rest = s[k+1:]
	}
	if strings.HasPrefix(rest, setPrefix) {
		return true
	}
	if k := strings.LastIndexByte(rest, '-'); k >= 0 {
		rel := rest[k+1:]
		if rel == "" && strings.IndexByte(rest[:k], '-') < 0 {
			return false
		}
		if d := strings.IndexByte(rel, ':'); d >= 0 && d == len(rel)-1 {
			return false
		}
	}
	return true
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "1.0", "1.0-alt1", "2:5.10.253-alt1:p10+415595.100.2.1", "set:jgtcU6BLBccTnteGxrE0",
		"007:1-", ":1.0-:x", "1:2:3-4:5:6",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Parse(s)
		out := e.String()
		// String is a fixed point of Parse: re-parsing gives the same label.
		if e2 := Parse(out); e2 != e {
			t.Fatalf("Parse(%q) = %+v, String %q, re-parsed %+v", s, e, out, e2)
		}
		if canonicalInput(s, e) && out != s {
			t.Fatalf("canonical %q came back as %q (%+v)", s, out, e)
		}
		if Compare(ALT, e, e) != 0 || Compare(RPM, e, e) != 0 {
			t.Fatalf("Compare(%q, itself) != 0", s)
		}
	})
}

func FuzzVercmp(f *testing.F) {
	for _, c := range [][2]string{
		{"xyz.4", "8"}, {"10xyz", "10.1xyz"}, {"1.0~rc1", "1.0"}, {"1.0^git1", "1.0.1"},
		{"", "0"}, {"1.2.3.4", "1-2-3-4"}, {"0010", "9"}, {"a~", "a^"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, sem := range []Semantics{ALT, RPM} {
			ab, ba := Vercmp(sem, a, b), Vercmp(sem, b, a)
			if ab != -ba {
				t.Fatalf("%v: Vercmp(%q, %q) = %d but Vercmp(%q, %q) = %d", sem, a, b, ab, b, a, ba)
			}
			if ab < -1 || ab > 1 {
				t.Fatalf("%v: Vercmp(%q, %q) = %d", sem, a, b, ab)
			}
			if Vercmp(sem, a, a) != 0 {
				t.Fatalf("%v: Vercmp(%q, itself) != 0", sem, a)
			}
		}
		// The semantics only differ on an alphabetic-vs-numeric run.
		if Vercmp(ALT, a, b) != Vercmp(RPM, a, b) && !alphaVsNumeric(a, b) {
			t.Fatalf("ALT and RPM differ on %q vs %q without an alpha-vs-numeric run", a, b)
		}
	})
}

func FuzzDecodeSet(f *testing.F) {
	for _, s := range []string{
		"set:jhpXPckiq2", "set:jhpXPuD0", "set:jgtcU6BLBccTnteGxrE0", "jhpXPckiq2",
		"set:jhpXPZ", "set:jh0000", "set:", "set:zy1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		bpp, v, err := DecodeSet(s)
		if err != nil {
			if SetCmp(s, "set:jhpXPuD0") != SetProvidedError || SetCmp("set:jhpXPuD0", s) != SetRequiredError {
				t.Fatalf("%q: decode error %v but SetCmp disagrees", s, err)
			}
			return
		}
		if len(v) == 0 || !slices.IsSorted(v) {
			t.Fatalf("DecodeSet(%q) = %v", s, v)
		}
		for i := 1; i < len(v); i++ {
			if v[i] == v[i-1] {
				t.Fatalf("DecodeSet(%q): duplicate %d", s, v[i])
			}
		}
		if bpp < 32 && v[len(v)-1] >= 1<<uint(bpp) {
			t.Fatalf("DecodeSet(%q): %d does not fit %d bits", s, v[len(v)-1], bpp)
		}
		// A decodable set equals itself, and re-encoding it (with the
		// encoder's own Mshift) decodes to the same values.
		if c := SetCmp(s, s); c != 0 {
			t.Fatalf("SetCmp(%q, itself) = %d", s, c)
		}
		re := encodeSetValues(bpp, v)
		_, v2, err := DecodeSet(re)
		if err != nil || !slices.Equal(v, v2) {
			t.Fatalf("re-encoded %q as %q: %v, %v", s, re, v2, err)
		}
	})
}
