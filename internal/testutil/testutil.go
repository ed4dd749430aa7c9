// Package testutil holds helpers shared by tests: locating the third-party
// fixtures and requiring outside tools (skipped on a workstation, fatal in CI).
package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// RepoRoot is the project's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Fixtures returns testdata/fixtures/<rel> under the project root: the
// third-party files the tests read, copied into the project so a fresh
// clone needs nothing beside it (testdata/fixtures/README.md names their
// origins). A missing fixture skips the test on a workstation and fails it
// in CI.
func Fixtures(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(RepoRoot(), "testdata", "fixtures", rel)
	if _, err := os.Stat(p); err != nil {
		Missing(t, "fixture "+p)
	}
	return p
}

// CI reports whether the tests run under CI (CI=true).
func CI() bool { return os.Getenv("CI") == "true" }

// Missing skips on a workstation and fails in CI.
func Missing(t testing.TB, what string) {
	t.Helper()
	if CI() {
		t.Fatalf("%s is missing (required in CI)", what)
	}
	t.Skipf("%s is missing", what)
}

// NeedRoot skips a test that needs root on a workstation and fails it in
// CI (CI runs as root).
func NeedRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "root")
	}
}

// Slow skips an expensive test (a qemu boot, a two-architecture release,
// kills and resumes, minutes of load) under -short: `make test-quick`, the
// edit-test loop, runs without them; `make test` and CI run everything.
func Slow(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("slow; skipped with -short (make test runs it)")
	}
}

// NoRace skips a long end-to-end test (real bases released and booted,
// whole pipelines) under the race detector: make test runs such tests in
// its other process, without -race (the packages that call NoRace are
// listed there by a grep for it), where they take a fifth of the time,
// and keeps the race detector for the unit and concurrency tests beside
// them. Concurrency a NoRace test drives must also be driven by a test
// that runs under -race.
func NoRace(t testing.TB) {
	t.Helper()
	if raceDetector {
		t.Skip("end to end; under -race skipped: make test runs it without the race detector")
	}
}

// NeedTool returns the path of an outside tool, or skips/fails.
func NeedTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "tool "+name)
	}
	return p
}

// NeedFile returns path when it exists (a file a Debian package installs),
// or skips/fails naming the package.
func NeedFile(t testing.TB, path, pkg string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(t, path+" (Debian's "+pkg+")")
	}
	return path
}
