package evr

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The examples from docs/alt-package-base.md section 4, which come from
// ALT's set.c self-test and a real ALT repository.
func TestSetDocExamples(t *testing.T) {
	s1, err := EncodeSet(16, []string{"mama", "myla", "ramu"})
	if err != nil || s1 != "set:jhpXPckiq2" {
		t.Fatalf("EncodeSet(mama myla ramu) = %q, %v; want set:jhpXPckiq2", s1, err)
	}
	s2, err := EncodeSet(16, []string{"myla", "mama"})
	if err != nil || s2 != "set:jhpXPuD0" {
		t.Fatalf("EncodeSet(myla mama) = %q, %v; want set:jhpXPuD0", s2, err)
	}
	if got := SetCmp(s1, s2); got != 1 {
		t.Errorf("SetCmp(%s, %s) = %d, want 1", s1, s2, got)
	}
	if got := SetCmp(s2, s1); got != -1 {
		t.Errorf("SetCmp(%s, %s) = %d, want -1", s2, s1, got)
	}

	// The rest of set.c's test_api sequence.
	s21, _ := EncodeSet(16, []string{"myla", "mama", "ramu"})
	if got := SetCmp(s1, s21); got != 0 {
		t.Errorf("SetCmp(s10, s21) = %d, want 0", got)
	}
	s22, _ := EncodeSet(16, []string{"myla", "mama", "ramu", "baba"})
	if got := SetCmp(s1, s22); got != -1 {
		t.Errorf("SetCmp(s10, s22) = %d, want -1", got)
	}
	s11, _ := EncodeSet(16, []string{"mama", "myla", "ramu", "deda"})
	if got := SetCmp(s11, s22); got != -2 {
		t.Errorf("SetCmp(s11, s22) = %d, want -2", got)
	}

	const real = "set:jgtcU6BLBccTnteGxrE0" // libpopt.so.0()(64bit) >= ...
	bpp, mshift, _, err := decodeSetHeader(real)
	if err != nil || bpp != 16 || mshift != 13 {
		t.Fatalf("decodeSetHeader(%s) = %d, %d, %v; want 16, 13", real, bpp, mshift, err)
	}
	bpp, v, err := DecodeSet(real)
	if err != nil || bpp != 16 || len(v) == 0 {
		t.Fatalf("DecodeSet(%s) = %d, %v, %v", real, bpp, v, err)
	}
	if !slices.IsSorted(v) {
		t.Errorf("DecodeSet(%s) values not sorted: %v", real, v)
	}
	// Re-encoding the decoded values must give the same string back.
	if got := encodeSetValues(bpp, v); got != real {
		t.Errorf("re-encoding %v = %s, want %s", v, got, real)
	}
	if got := SetCmp(real, real); got != 0 {
		t.Errorf("SetCmp(real, real) = %d", got)
	}
}

// set.c's test_set: 16 fixed values at bpp 16 must survive a round trip.
func TestSetFixedValues(t *testing.T) {
	v := []uint32{
		0x020a, 0x07e5, 0x3305, 0x35f5, 0x4980, 0x4c4f, 0x74ef, 0x7739,
		0x82ae, 0x8415, 0xa3e7, 0xb07e, 0xb584, 0xb89f, 0xbb40, 0xf39e,
	}
	s := encodeSetValues(16, v)
	bpp, mshift, _, err := decodeSetHeader(s)
	if err != nil || bpp != 16 || mshift != 11 {
		t.Fatalf("header of %s = %d, %d, %v; want 16, 11", s, bpp, mshift, err)
	}
	_, got, err := DecodeSet(s)
	if err != nil || !slices.Equal(got, v) {
		t.Fatalf("DecodeSet(%s) = %v, %v; want %v", s, got, err, v)
	}
}

func randomSymbols(r *rand.Rand, n int) []string {
	syms := make([]string, n)
	for i := range syms {
		var b strings.Builder
		l := 1 + r.IntN(30)
		for range l {
			b.WriteByte(byte('!' + r.IntN(94)))
		}
		syms[i] = b.String()
	}
	return syms
}

func TestSetRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, bpp := range []int{10, 12, 16, 20, 24, 31, 32} {
		for n := 1; n <= 200; n++ {
			syms := randomSymbols(r, n)
			s, err := EncodeSet(bpp, syms)
			if err != nil {
				t.Fatalf("EncodeSet(%d, %d symbols): %v", bpp, n, err)
			}
			if strings.ContainsAny(s[len(setPrefix):], "-:.") {
				t.Fatalf("set-string %q has a separator", s)
			}
			gotBpp, got, err := DecodeSet(s)
			if err != nil {
				t.Fatalf("DecodeSet(%s) (bpp %d, %d symbols): %v", s, bpp, n, err)
			}
			want := SetValues(bpp, syms)
			if gotBpp != bpp || !slices.Equal(got, want) {
				t.Fatalf("bpp %d, %d symbols: decoded %d, %v; want %v", bpp, n, gotBpp, got, want)
			}
			// Without the prefix too.
			if _, got2, err := DecodeSet(strings.TrimPrefix(s, setPrefix)); err != nil || !slices.Equal(got2, want) {
				t.Fatalf("DecodeSet without prefix: %v, %v", got2, err)
			}
			_, mshift, _, _ := decodeSetHeader(s)
			if mshift != encodeMshift(len(want), bpp) || mshift >= bpp {
				t.Fatalf("Mshift %d for %d values at bpp %d", mshift, len(want), bpp)
			}
			if c := SetCmp(s, s); c != 0 {
				t.Fatalf("SetCmp(s, s) = %d", c)
			}
			if n > 1 {
				sub, _ := EncodeSet(bpp, syms[:n/2])
				wantSub := SetValues(bpp, syms[:n/2])
				exp := 1
				if len(wantSub) == len(want) { // hash collisions at small bpp
					exp = 0
				}
				if c := SetCmp(s, sub); c != exp {
					t.Fatalf("SetCmp(all, half) = %d, want %d", c, exp)
				}
				if c := SetCmp(sub, s); c != -exp {
					t.Fatalf("SetCmp(half, all) = %d, want %d", c, -exp)
				}
			}
		}
	}
}

func TestSetDownsample(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := 1; n <= 150; n += 7 {
		syms := randomSymbols(r, n)
		wide, _ := EncodeSet(20, syms)
		narrow, _ := EncodeSet(16, syms)
		if c := SetCmp(wide, narrow); c != 0 {
			t.Fatalf("%d symbols: SetCmp(bpp20, bpp16) = %d, want 0", n, c)
		}
		if c := SetCmp(narrow, wide); c != 0 {
			t.Fatalf("%d symbols: SetCmp(bpp16, bpp20) = %d, want 0", n, c)
		}
		if n > 2 {
			// A bpp-20 provide of all symbols meets a bpp-16 require
			// of some of them, and the other way round.
			part16, _ := EncodeSet(16, syms[:n/2])
			part20, _ := EncodeSet(20, syms[:n/2])
			if c := SetCmp(wide, part16); c != 1 && c != 0 {
				t.Fatalf("SetCmp(all@20, half@16) = %d", c)
			}
			if c := SetCmp(narrow, part20); c != 1 && c != 0 {
				t.Fatalf("SetCmp(all@16, half@20) = %d", c)
			}
		}
	}
	// A symbol outside the provided set is still missing after masking
	// unless it collides, which these do not.
	p, _ := EncodeSet(24, []string{"a", "b", "c"})
	q, _ := EncodeSet(12, []string{"a", "zzz"})
	if c := SetCmp(p, q); c != -2 {
		t.Errorf("SetCmp = %d, want -2", c)
	}
}

func TestSetErrors(t *testing.T) {
	if _, err := EncodeSet(9, []string{"a"}); err == nil {
		t.Error("EncodeSet(bpp 9) succeeded")
	}
	if _, err := EncodeSet(33, []string{"a"}); err == nil {
		t.Error("EncodeSet(bpp 33) succeeded")
	}
	if _, err := EncodeSet(16, nil); err == nil {
		t.Error("EncodeSet(no symbols) succeeded")
	}
	good := "set:jhpXPckiq2"
	bad := []string{
		"", "set:", "set:j", "set:jh", // too short / empty set
		"set:ahpXP",        // bpp 7
		"set:zhpXP",        // bpp 32 is 'z': valid bpp, Mshift 'h' fine -> see below
		"set:jzpXP",        // Mshift 32
		"set:jjpXP",        // Mshift 16 == bpp
		"set:jh!XP",        // bad character
		"set:jhpXP-",       // separator
		"set:jhpXPZ",       // escape at end
		"set:jhpXPZZ",      // escape followed by 'Z' (high bits 11)
		"set:jh0000",       // only zero bits
		"set:jh1",          // a one bit and then too few bits
		"set:jhpXPckiq2Z0", // escape then padding only -> truncated
		"set:jhÿ",
		"set:jh\x00",
		strings.Repeat("0", 10000),
		"set:jh" + strings.Repeat("0", 5000) + "1",
	}
	for _, s := range bad {
		if s == "set:zhpXP" {
			continue // valid header; payload decides
		}
		if _, _, err := DecodeSet(s); err == nil {
			t.Errorf("DecodeSet(%q) succeeded", s)
		}
		if c := SetCmp(s, good); c != SetProvidedError {
			t.Errorf("SetCmp(%q, good) = %d, want -3", s, c)
		}
		if c := SetCmp(good, s); c != SetRequiredError {
			t.Errorf("SetCmp(good, %q) = %d, want -4", s, c)
		}
	}
	// Both bad: the provided side is reported.
	if c := SetCmp("x", "y"); c != SetProvidedError {
		t.Errorf("SetCmp(bad, bad) = %d", c)
	}
	// Garbage never panics.
	r := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			if r.IntN(2) == 0 {
				b[i] = base62Digits[r.IntN(62)]
			} else {
				b[i] = byte(r.IntN(256))
			}
		}
		s := "set:" + string(b)
		_, v, err := DecodeSet(s)
		if err == nil && (len(v) == 0 || !slices.IsSorted(v)) {
			t.Fatalf("DecodeSet(%q) = %v without error", s, v)
		}
		_ = SetCmp(s, good)
		_ = SetCmp(good, s)
	}
}

func ExampleEncodeSet() {
	s, _ := EncodeSet(16, []string{"mama", "myla", "ramu"})
	r, _ := EncodeSet(16, []string{"myla", "mama"})
	fmt.Println(s, r, SetCmp(s, r))
	// Output: set:jhpXPckiq2 set:jhpXPuD0 1
}

// downsample's bit-by-bit merge must equal masking, sorting and
// deduplicating in one go.
func TestDownsampleMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		from := 11 + r.IntN(22) // 11..32
		to := 10 + r.IntN(from-10)
		n := 1 + r.IntN(300)
		v := make([]uint32, n)
		for i := range v {
			v[i] = r.Uint32() & bppMask(from)
			if r.IntN(4) == 0 { // some small values to make collisions
				v[i] &= 0x3ff
			}
		}
		slices.Sort(v)
		v = slices.Compact(v)
		want := slices.Clone(v)
		for i := range want {
			want[i] &= bppMask(to)
		}
		slices.Sort(want)
		want = slices.Compact(want)
		if got := downsample(slices.Clone(v), from, to); !slices.Equal(got, want) {
			t.Fatalf("downsample(%d->%d) = %v, want %v", from, to, got, want)
		}
	}
}
