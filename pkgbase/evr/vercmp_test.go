package evr

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// fixturePath is the upstream rpmvercmp fixture, relative to this package.
const fixturePath = "../../testdata/fixtures/vercmp/upstream-vercmp.json"

type vercmpCase struct {
	A      string `json:"a"`
	B      string `json:"b"`
	Expect int    `json:"expect"`
}

// loadFixture reads the upstream fixture. Outside CI a missing file skips
// the test; in CI it fails.
func loadFixture(t testing.TB) []vercmpCase {
	t.Helper()
	data, err := os.ReadFile(fixturePath)
	if errors.Is(err, fs.ErrNotExist) {
		testutil.Missing(t, "fixture "+fixturePath)
	}
	if err != nil {
		t.Fatal(err)
	}
	var cases []vercmpCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("empty fixture")
	}
	return cases
}

// The fixture holds plain version strings, not labels: it contains
// {"1.2.3.4", "1-2-3-4", 0}, which only rpmvercmp gives ('-' is just a
// separator there; a label compare would split off release "4"). So it is
// checked with Vercmp.
func TestUpstreamVercmpFixture(t *testing.T) {
	cases := loadFixture(t)
	if len(cases) != 4489 {
		t.Errorf("fixture has %d cases, want 4489", len(cases))
	}
	for _, c := range cases {
		if got := Vercmp(RPM, c.A, c.B); got != c.Expect {
			t.Errorf("Vercmp(RPM, %q, %q) = %d, want %d", c.A, c.B, got, c.Expect)
		}
		// Upstream's table is antisymmetric; so must ours be.
		if got := Vercmp(RPM, c.B, c.A); got != -c.Expect {
			t.Errorf("Vercmp(RPM, %q, %q) = %d, want %d", c.B, c.A, got, -c.Expect)
		}
	}
}

// alphaVsNumeric reports whether the rpmvercmp walk over a and b ends at a
// numeric run facing an alphabetic one, the only place where ALT and RPM
// differ. It re-walks the strings independently of Vercmp.
func alphaVsNumeric(a, b string) bool {
	sepa := func(s string, i int) int {
		for i < len(s) && !isSegByte(s[i]) {
			i++
		}
		return i
	}
	run := func(s string, i int, digits bool) int {
		for i < len(s) && (digits && isDigit(s[i]) || !digits && isAlpha(s[i])) {
			i++
		}
		return i
	}
	i, j := 0, 0
	for {
		i, j = sepa(a, i), sepa(b, j)
		if i >= len(a) || j >= len(b) {
			return false
		}
		if a[i] == '~' || b[j] == '~' || a[i] == '^' || b[j] == '^' {
			if a[i] != b[j] {
				return false
			}
			i++
			j++
			continue
		}
		if isDigit(a[i]) != isDigit(b[j]) {
			return true
		}
		ei, ej := run(a, i, isDigit(a[i])), run(b, j, isDigit(b[j]))
		x, y := a[i:ei], b[j:ej]
		if isDigit(a[i]) {
			x, y = strings.TrimLeft(x, "0"), strings.TrimLeft(y, "0")
		}
		if x != y {
			return false
		}
		i, j = ei, ej
	}
}

func TestALTFlipsFixture(t *testing.T) {
	cases := loadFixture(t)
	flips := 0
	for _, c := range cases {
		alt := Vercmp(ALT, c.A, c.B)
		if alt == c.Expect {
			if alphaVsNumeric(c.A, c.B) {
				t.Errorf("%q vs %q: alpha-vs-numeric case did not flip (%d)", c.A, c.B, alt)
			}
			continue
		}
		flips++
		if alt != -c.Expect || c.Expect == 0 {
			t.Errorf("Vercmp(ALT, %q, %q) = %d, RPM says %d: not a flip", c.A, c.B, alt, c.Expect)
		}
		if !alphaVsNumeric(c.A, c.B) {
			t.Errorf("Vercmp(ALT, %q, %q) flipped without an alpha-vs-numeric run", c.A, c.B)
		}
	}
	t.Logf("%d of %d upstream cases flip under ALT", flips, len(cases))
	// The document says "about 300".
	if flips < 200 || flips > 450 {
		t.Errorf("%d cases flip under ALT, expected about 300", flips)
	}
}

func TestVercmp(t *testing.T) {
	tests := []struct {
		a, b     string
		rpm, alt int
	}{
		// From the document: ALT makes alphabetic runs newer.
		{"xyz.4", "8", -1, 1},
		{"10xyz", "10.1xyz", -1, 1},
		{"1.0a", "1.0.1", -1, 1},
		{"2.0", "2.0a", -1, -1}, // running out is the same in both
		{"", "", 0, 0},
		{"", "a", -1, -1},
		{"1.0", "1.0", 0, 0},
		{"1.0", "1.0.0", -1, -1},
		{"1.0", "1_0", 0, 0},
		{"1.0.", "1.0", 0, 0},
		{"010", "10", 0, 0},
		{"0010", "9", 1, 1},
		{"99999999999999999999999", "99999999999999999999998", 1, 1},
		{"1.0~rc1", "1.0", -1, -1},
		{"1.0~rc1", "1.0~rc2", -1, -1},
		{"1.0~~", "1.0~", -1, -1},
		{"1.0^", "1.0", 1, 1},
		{"1.0^git1", "1.0", 1, 1},
		{"1.0^git1", "1.0.1", -1, -1},
		{"1.0^git1", "1.0~rc1", 1, 1},
		{"1.0^git1~pre", "1.0^git1", -1, -1},
		{"a", "B", 1, 1}, // bytewise: 'a' > 'B'
		{"alt1", "alt10", -1, -1},
		{"alt1.M80P.1", "alt1", 1, 1},
		{"1é", "1", 0, 0}, // non-ASCII bytes are separators
		{"abc", "123", -1, 1},
	}
	for _, tt := range tests {
		for _, s := range []struct {
			sem  Semantics
			want int
		}{{RPM, tt.rpm}, {ALT, tt.alt}} {
			if got := Vercmp(s.sem, tt.a, tt.b); got != s.want {
				t.Errorf("Vercmp(%v, %q, %q) = %d, want %d", s.sem, tt.a, tt.b, got, s.want)
			}
			if got := Vercmp(s.sem, tt.b, tt.a); got != -s.want {
				t.Errorf("Vercmp(%v, %q, %q) = %d, want %d", s.sem, tt.b, tt.a, got, -s.want)
			}
		}
	}
}

func TestVercmpNoAlloc(t *testing.T) {
	a, b := "1.2.3~rc1^git20200101.abc", "1.2.3~rc1^git20200101.abd"
	n := testing.AllocsPerRun(100, func() {
		Vercmp(ALT, a, b)
		Vercmp(RPM, a, b)
	})
	if n != 0 {
		t.Errorf("Vercmp allocates %v times", n)
	}
}
