package factory

import "testing"

// TestVersionOrder: /versions' order (pre-releases before their release,
// numbers as numbers) and what counts as a pre-release.
func TestVersionOrder(t *testing.T) {
	for _, c := range []struct{ a, b string }{{"1.9.0", "1.10.0"}, {"v1.11.0-rc.1", "1.11.0"}, {"1.11.0-alpha.2", "1.11.0-beta.0"},
		{"1.11.0", "1.11.0-demo"}, {"1.11.0-rc.9", "1.11.0-rc.10"}, {"1.11.0", "v1.11.0"}} {
		if compareVersions(c.a, c.b) >= 0 || compareVersions(c.b, c.a) <= 0 {
			t.Errorf("%s < %s does not hold", c.a, c.b)
		}
	}
	for v, pre := range map[string]bool{"v1.12.0-alpha.1": true, "1.12.0-beta.0": true, "1.12.0-rc1": true, "1.12.0-rc": true,
		"1.11.0-demo": false, "1.11.0": false, "1.11.0-rcx": false, "1.11.0-p11.alpha": false} {
		if prerelease(v) != pre {
			t.Errorf("prerelease(%s) = %v", v, !pre)
		}
	}
}
