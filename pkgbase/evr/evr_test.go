package evr

import (
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want EVR
	}{
		{"", EVR{}},
		{"1.0", EVR{Version: "1.0"}},
		{"1.0-alt1", EVR{Version: "1.0", Release: "alt1"}},
		{"2:5.10.253-alt1", EVR{Epoch: 2, HasEpoch: true, Version: "5.10.253", Release: "alt1"}},
		{"2:5.10.253-alt1:p10+415595.100.2.1", EVR{Epoch: 2, HasEpoch: true, Version: "5.10.253", Release: "alt1", Disttag: "p10+415595.100.2.1"}},
		{"5.10.253-alt1:sisyphus+1.2.3.4", EVR{Version: "5.10.253", Release: "alt1", Disttag: "sisyphus+1.2.3.4"}},
		{"0:1-2", EVR{HasEpoch: true, Version: "1", Release: "2"}},
		{"1-2-3-4", EVR{Version: "1-2-3", Release: "4"}},         // release after the last '-'
		{"1.0:x-1", EVR{Version: "1.0:x", Release: "1"}},         // "1.0" is no epoch
		{"1:2:3", EVR{Epoch: 1, HasEpoch: true, Version: "2:3"}}, // only the first ':' is the epoch
		{"1:2-3:a:b", EVR{Epoch: 1, HasEpoch: true, Version: "2", Release: "3", Disttag: "a:b"}},
		{":1.0", EVR{HasEpoch: true, Version: "1.0"}}, // empty epoch is 0, as in rpm
		{"007:1", EVR{Epoch: 7, HasEpoch: true, Version: "1"}},
		{"99999999999999999999999:1", EVR{Epoch: maxEpoch, HasEpoch: true, Version: "1"}},
		{"set:jgtcU6BLBccTnteGxrE0", EVR{Version: "set:jgtcU6BLBccTnteGxrE0"}},
		{"1:set:jhpXPckiq2", EVR{Epoch: 1, HasEpoch: true, Version: "set:jhpXPckiq2"}},
		{"set:a-b", EVR{Version: "set:a-b"}}, // set-versions are not split
		{"1.0-", EVR{Version: "1.0"}},
		{"1.0-:p10", EVR{Version: "1.0", Disttag: "p10"}},
		{"-1", EVR{Release: "1"}},
	}
	for _, tt := range tests {
		if got := Parse(tt.in); got != tt.want {
			t.Errorf("Parse(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestString(t *testing.T) {
	canonical := []string{
		"", "1.0", "1.0-alt1", "0:1.0", "2:5.10.253-alt1", "2:5.10.253-alt1:p10+415595.100.2.1",
		"1.0-alt1:sisyphus+1.1.1.1", "set:jhpXPckiq2", "3:set:jhpXPckiq2", "1-2-3", "1.0-:p10", "-1",
		"--", "a-b-", "set:a-b", // a '-' inside the version keeps an empty release
	}
	for _, s := range canonical {
		if got := Parse(s).String(); got != s {
			t.Errorf("Parse(%q).String() = %q", s, got)
		}
	}
	nonCanonical := map[string]string{
		"007:1":   "7:1",
		":1":      "0:1",
		"1.0-":    "1.0",
		"1.0-r:":  "1.0-r",
		"1:2-3:":  "1:2-3",
		"00:0-0:": "0:0-0",
	}
	for in, want := range nonCanonical {
		if got := Parse(in).String(); got != want {
			t.Errorf("Parse(%q).String() = %q, want %q", in, got, want)
		}
	}
}

func TestCompareLabel(t *testing.T) {
	tests := []struct {
		a, b     string
		rpm, alt int
	}{
		{"1.0-1", "1.0-1", 0, 0},
		{"1:1.0-1", "2.0-1", 1, 1},
		{"0:1.0-1", "1.0-1", 0, 0}, // absent epoch is 0
		{"1.0-alt1", "1.0-alt2", -1, -1},
		{"1.0", "1.0-alt1", -1, -1},
		{"1.0-alt1:p10+1.1.1.1", "1.0-alt1:p11+2.2.2.2", 0, 0}, // disttags ignored
		{"2:5.10.253-alt1:p10+415595.100.2.1", "2:5.10.253-alt1", 0, 0},
		{"1.0a-1", "1.0.1-1", -1, 1},
		{"1.0-alt1", "1.0-1", -1, 1}, // "alt" vs "1"
		{"1.2.3.4", "1-2-3-4", 1, 1}, // as labels: version 1.2.3.4 > 1-2-3
	}
	for _, tt := range tests {
		if got := CompareLabel(RPM, tt.a, tt.b); got != tt.rpm {
			t.Errorf("CompareLabel(RPM, %q, %q) = %d, want %d", tt.a, tt.b, got, tt.rpm)
		}
		if got := CompareLabel(ALT, tt.a, tt.b); got != tt.alt {
			t.Errorf("CompareLabel(ALT, %q, %q) = %d, want %d", tt.a, tt.b, got, tt.alt)
		}
		if got := CompareLabel(ALT, tt.b, tt.a); got != -tt.alt {
			t.Errorf("CompareLabel(ALT, %q, %q) = %d, want %d", tt.b, tt.a, got, -tt.alt)
		}
	}
}

func TestNewer(t *testing.T) {
	tests := []struct {
		name   string
		sem    Semantics
		a, b   string
		at, bt int64
		target string
		want   int
	}{
		{"epoch first", ALT, "1:1.0-alt1", "2.0-alt1", 0, 0, "", 1},
		{"version", ALT, "1.0-alt1", "2.0-alt1", 9, 1, "", -1},
		{"release", ALT, "1.0-alt2", "1.0-alt1", 1, 9, "", 1},
		{"target branch wins", ALT, "1.0-alt1:sisyphus+1.1.1.1", "1.0-alt1:p10+2.2.2.2", 9, 1, "p10", -1},
		{"target branch wins other side", ALT, "1.0-alt1:p10+1.1.1.1", "1.0-alt1:sisyphus+2.2.2.2", 1, 9, "p10", 1},
		{"no target: vercmp of branches", ALT, "1.0-alt1:p11+1.1.1.1", "1.0-alt1:p10+2.2.2.2", 1, 9, "", 1},
		{"no target: sisyphus > p10 bytewise", ALT, "1.0-alt1:sisyphus+1.1.1.1", "1.0-alt1:p10+2.2.2.2", 1, 9, "", 1},
		{"target matches neither", ALT, "1.0-alt1:p9+1.1.1.1", "1.0-alt1:p10+2.2.2.2", 9, 1, "c10f2", -1},
		{"empty prefix is oldest", ALT, "1.0-alt1:+1.1.1.1", "1.0-alt1:p10+2.2.2.2", 9, 1, "", -1},
		{"no '+' is an empty prefix", ALT, "1.0-alt1:p11", "1.0-alt1:p10+2.2.2.2", 9, 1, "", -1},
		{"same branch: buildtime", ALT, "1.0-alt1:p10+1.1.1.1", "1.0-alt1:p10+2.2.2.2", 5, 7, "p10", -1},
		{"one disttag: buildtime", ALT, "1.0-alt1:p10+1.1.1.1", "1.0-alt1", 5, 7, "p10", -1},
		{"no disttags: buildtime", ALT, "1.0-alt1", "1.0-alt1", 8, 7, "", 1},
		{"all equal", ALT, "1.0-alt1:p10+1.1.1.1", "1.0-alt1:p10+1.1.1.1", 8, 8, "p10", 0},
		{"rpm ignores disttags", RPM, "1.0-1:p11+1.1.1.1", "1.0-1:p10+2.2.2.2", 1, 9, "p11", -1},
		{"rpm compare", RPM, "1.0a-1", "1.0.1-1", 9, 1, "", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := Parse(tt.a), Parse(tt.b)
			if got := Newer(tt.sem, a, b, tt.at, tt.bt, tt.target); got != tt.want {
				t.Errorf("Newer(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
			if got := Newer(tt.sem, b, a, tt.bt, tt.at, tt.target); got != -tt.want {
				t.Errorf("Newer(%q, %q) = %d, want %d", tt.b, tt.a, got, -tt.want)
			}
		})
	}
}

func TestSemantics(t *testing.T) {
	for _, s := range []Semantics{ALT, RPM} {
		got, err := ParseSemantics(s.String())
		if err != nil || got != s {
			t.Errorf("ParseSemantics(%q) = %v, %v", s.String(), got, err)
		}
	}
	if _, err := ParseSemantics("deb"); err == nil {
		t.Error("ParseSemantics(deb) succeeded")
	}
}
