package main

import (
	"strings"
	"testing"
)

// TestUsageMessages: a wrong argument count shows the usage line, a
// mistyped flag the nearest flags, and both where the help is.
func TestUsageMessages(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"why"}, "why: accepts 1 arg(s), received 0\nusage: builder why PACKAGE (--spec FILE"},
		{[]string{"why"}, "\nrun 'builder why --help' for more"},
		{[]string{"factory", "serve", "--relase", "oci:x"}, "factory serve: unknown flag: --relase (did you mean --release?)\nrun 'builder factory serve --help' for its flags"},
		{[]string{"verify", "--tiemout", "1s", "x"}, "verify: unknown flag: --tiemout (did you mean --timeout?)"}, // inherited
		{[]string{"factory", "serve", "--max-build", "3"}, "(did you mean --max-builds?)"},
	} {
		_, err := runBuilder(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("builder %s: %v, want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	if _, err := runBuilder(t, "verify", "--zzzzzzzz", "x"); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a flag like none: %v", err)
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"key", "key", 0}, {"kye", "key", 2}, {"relase", "release", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}} {
		if d := editDistance(c.a, c.b); d != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, d, c.d)
		}
	}
}
