package oci

import "testing"

func TestValidTag(t *testing.T) {
	for in, want := range map[string]string{"1.11.0": "1.11.0", "1.0+git5": "1.0_git5", "1.0~rc1": "1.0_rc1", ".x": "_x"} {
		if got, err := ValidTag(in); err != nil || got != want {
			t.Errorf("ValidTag(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ValidTag(""); err == nil {
		t.Error("an empty version became a tag")
	}
}

func TestParseTarget(t *testing.T) {
	for in, want := range map[string][2]string{
		"registry.local:5000/nodeforge/p11": {"registry.local:5000", "nodeforge/p11"},
		"docker://127.0.0.1:5000":           {"127.0.0.1:5000", ""},
	} {
		h, p, err := ParseTarget(in)
		if err != nil || h != want[0] || p != want[1] {
			t.Errorf("ParseTarget(%q) = %q %q %v", in, h, p, err)
		}
	}
	for _, bad := range []string{"", "/x", "host/UPPER"} {
		if _, _, err := ParseTarget(bad); err == nil {
			t.Errorf("ParseTarget(%q) accepted", bad)
		}
	}
	if !IsLoopback("127.0.0.1:5000") || !IsLoopback("localhost") || !IsLoopback("[::1]:80") || IsLoopback("registry.local:5000") {
		t.Error("IsLoopback")
	}
}

// TestRepoName: a signature names a layout's repository without the
// layout's directory, a registry's with its host and prefix.
func TestRepoName(t *testing.T) {
	l, err := CreateLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRemote("registry.example:5000/nodeforge", RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		st   Store
		want string
	}{
		{l, "extensions/zfs"},
		{Prefixed{Store: l, Prefix: "factory-cache/"}, "factory-cache/extensions/zfs"},
		{r, "registry.example:5000/nodeforge/extensions/zfs"},
	} {
		if got := RepoName(c.st, "extensions/zfs"); got != c.want {
			t.Errorf("%s: %s, want %s", c.st, got, c.want)
		}
	}
}
