package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary stand in for the builder binary when a
// command (builder repro) starts itself as a child process.
func TestMain(m *testing.M) {
	if os.Getenv("NODEFORGE_TEST_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}
