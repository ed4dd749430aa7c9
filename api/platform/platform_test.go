package platform

import (
	"slices"
	"strings"
	"testing"
)

func TestPlatforms(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range All {
		if seen[p.Name] {
			t.Errorf("%s listed twice", p.Name)
		}
		seen[p.Name] = true
		if len(p.Formats) == 0 || p.Description == "" || !slices.Contains(p.Args, "nodeforge.platform="+p.Name) {
			t.Errorf("%s: formats %v, args %v, description %q", p.Name, p.Formats, p.Args, p.Description)
		}
		for _, f := range p.Formats {
			if err := CheckFormat(f); err != nil {
				t.Errorf("%s: %v", p.Name, err)
			}
		}
	}
	if p, err := Lookup(""); err != nil || p.Name != "metal" {
		t.Errorf("default: %v %v", p, err)
	}
	if _, err := Lookup("vmware"); err == nil || !strings.Contains(err.Error(), "known: metal, nocloud, aws, azure, gcp, yandex") {
		t.Errorf("unknown platform: %v", err)
	}
	if err := CheckFormat("vmdk"); err == nil || !strings.Contains(err.Error(), "raw.tar.gz") {
		t.Errorf("unknown format: %v", err)
	}
}
