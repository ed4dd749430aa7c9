package debpkg

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRPMVersion(t *testing.T) {
	for _, c := range []struct{ in, v, r string }{
		{"6.1.192-3", "6.1.192", "3"},
		{"6.1.76-1~bpo11+1", "6.1.76", "1~bpo11+1"},
		{"1:2.3-4-5", "2.3.4", "5"},
		{"7", "7", "1"},
	} {
		if v, r := RPMVersion(c.in); v != c.v || r != c.r {
			t.Errorf("RPMVersion(%q) = %q, %q; want %q, %q", c.in, v, r, c.v, c.r)
		}
	}
}

func TestNewestCachedDeb(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{
		"linux-image-6.1.0-9-amd64_6.1.27-1_amd64.deb",
		"linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb",
		"linux-image-6.1.0-60-cloud-amd64_6.1.200-1_amd64.deb",
		"linux-image-6.1.0-61-rt-amd64_6.1.201-1_amd64.deb",
		"linux-image-6.1.0-62-amd64-dbg_6.1.202-1_amd64.deb",
	} {
		os.WriteFile(filepath.Join(dir, n), nil, 0o644)
	}
	// 57 beats 9 (numerically), the cloud, rt and dbg packages never count.
	if got, want := filepath.Base(NewestKernel(dir, "amd64")), "linux-image-6.1.0-57-amd64_6.1.192-3_amd64.deb"; got != want {
		t.Errorf("newest = %s, want %s", got, want)
	}
	if got := NewestKernel(t.TempDir(), "amd64"); got != "" {
		t.Errorf("empty directory gave %s", got)
	}
}
