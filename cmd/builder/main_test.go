package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// TestMain lets the test binary stand in for the builder binary when a
// command (builder repro) starts itself as a child process.
//
// The long tests that share nothing with the process (each has its own
// directories, registries and child builders) call t.Parallel, so that this
// package, the last to finish, keeps both cores busy; a test that sets the
// environment or the working directory, boots qemu, renders the audit's pages
// in a browser or times a server runs alone.
func TestMain(m *testing.M) {
	if os.Getenv("NODEFORGE_TEST_AS_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	home, err := testutil.NewHome()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// What every test would otherwise set for itself, set once for the
	// process: t.Setenv cannot be used by the tests that run in parallel.
	// The keys the tests generate are sealed with this password; HOME has
	// no ~/.docker/config.json of the machine (testutil.NewHome); repro's
	// builds (children of this test binary) run main().
	os.Setenv("COSIGN_PASSWORD", "test-password")
	os.Setenv("NODEFORGE_TEST_AS_MAIN", "1")
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.RemoveAll(home)
	os.Exit(code)
}

var (
	binOnce sync.Once
	binDir  string
	binPath string
)

// builderCommand is the builder as a child process: a binary built once
// without the race detector (the tests that start dozens of builds and
// kill them would take minutes with it; the in-process tests keep the race
// detector on the same code), or this test binary standing in for it when
// the go command cannot build one.
func builderCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nodeforge-testbin-")
		if err != nil {
			return
		}
		p := filepath.Join(dir, "builder")
		var out bytes.Buffer
		build := exec.Command("go", "build", "-trimpath", "-o", p, ".")
		build.Stdout, build.Stderr = &out, &out
		if err := build.Run(); err != nil {
			t.Logf("building the builder for child processes failed, using the test binary: %v\n%s", err, out.String())
			os.RemoveAll(dir)
			return
		}
		binDir, binPath = dir, p
	})
	if binPath != "" {
		return exec.Command(binPath, args...)
	}
	return exec.Command(os.Args[0], args...) // runs main(): see TestMain
}

// warmBuilder starts the child-process builder once, so that building it
// does not count in a measured run.
func warmBuilder(t *testing.T) {
	t.Helper()
	if out, err := builderCommand(t, "--version").CombinedOutput(); err != nil {
		t.Fatalf("builder --version: %v\n%s", err, out)
	}
}

// builderStdout runs the builder as a child process and returns what it
// printed on stdout; a failure's error carries its stderr.
func builderStdout(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := builderCommand(t, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("builder %s: %v: %s", args[0], err, stderr.String())
	}
	return stdout.String(), nil
}
