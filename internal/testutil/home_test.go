package testutil

import (
	"os"
	"testing"
)

// TestNewHomeKeepsGoCaches: after NewHome the go command still uses the
// machine's build and module caches and settings, and downloads nothing.
func TestNewHomeKeepsGoCaches(t *testing.T) {
	gobin := NeedTool(t, "go")
	env := func() map[string]string {
		t.Helper()
		e, err := goEnv(gobin, "GOCACHE", "GOMODCACHE", "GOFLAGS", "GOPROXY")
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	before := env()
	for _, n := range []string{"HOME", "GOCACHE", "GOMODCACHE", "GOPATH", "GOENV", "GOPROXY"} {
		t.Setenv(n, os.Getenv(n)) // restored after the test
	}
	home, err := NewHome()
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(home)
	if os.Getenv("HOME") != home {
		t.Fatalf("HOME is %q, want %q", os.Getenv("HOME"), home)
	}
	after := env()
	for _, n := range []string{"GOCACHE", "GOMODCACHE", "GOFLAGS"} {
		if after[n] != before[n] {
			t.Errorf("%s: %q after NewHome, %q before", n, after[n], before[n])
		}
	}
	if after["GOPROXY"] != "off" {
		t.Errorf("GOPROXY is %q, want off", after["GOPROXY"])
	}
}
