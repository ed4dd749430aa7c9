package main

import (
	"strings"
	"testing"
)

func TestVercmpCommand(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"vercmp", "1.0-alt1", "1.0-alt2"}, "-1"},
		{[]string{"vercmp", "2:5.10.253-alt1:p10+415595.100.2.1", "1:6.1-alt1"}, "1"},
		{[]string{"vercmp", "xyz.4", "8"}, "1"},
		{[]string{"vercmp", "--semantics", "rpm", "xyz.4", "8"}, "-1"},
		{[]string{"vercmp", "1.0", "1.0"}, "0"},
	}
	for _, c := range cases {
		out, err := runBuilder(t, c.args...)
		if err != nil || strings.TrimSpace(out) != c.want {
			t.Errorf("%v: got %q, %v; want %s", c.args, out, err, c.want)
		}
	}
	if _, err := runBuilder(t, "vercmp", "--semantics", "deb", "1", "2"); err == nil {
		t.Error("bad semantics accepted")
	}
	if _, err := runBuilder(t, "vercmp", "1"); err == nil {
		t.Error("one argument accepted")
	}
}
