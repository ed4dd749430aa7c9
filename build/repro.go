package build

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ReproVariant is one build of the reproducibility experiment: what a
// build must not depend on, set differently in each.
type ReproVariant struct {
	TZ, Lang, Umask string
	Procs           int
	Shuffle         int64
}

// ReproOptions describe the experiment: the builder to run, the arguments
// of its build (without --out), the environment the builds start from,
// where they run, and the variants.
type ReproOptions struct {
	Exe      string
	Args     []string
	Env      []string
	Root     string
	Variants []ReproVariant
	// Stderr receives the builds' messages.
	Stderr io.Writer
	Log    func(format string, args ...any)
}

// ReproResult are the two outputs and how they differ.
type ReproResult struct {
	Outputs []string
	Diffs   []Difference
}

// reproEnv are the variables each variant sets; the ones inherited are
// dropped first.
var reproEnv = []string{"TZ", "LANG", "LC_ALL", "HOME", "GOMAXPROCS", "SOURCE_DATE_EPOCH"}

// Reproduce runs the builds as separate processes, one per variant, each
// in its own working directory and HOME and with its own umask, laying
// packages in its own order and without step caches, then compares the
// outputs byte for byte. The builds are this builder's: one that cannot
// write a release's bytes refuses (CheckBuilder).
func Reproduce(ctx context.Context, o ReproOptions) (*ReproResult, error) {
	if err := CheckBuilder(); err != nil {
		return nil, err
	}
	if len(o.Variants) < 2 {
		return nil, fmt.Errorf("the experiment needs two variants or more, not %d", len(o.Variants))
	}
	res := &ReproResult{}
	for i, v := range o.Variants {
		work := filepath.Join(o.Root, fmt.Sprintf("build-%d", i+1))
		home := filepath.Join(o.Root, fmt.Sprintf("home-%d", i+1))
		out := filepath.Join(work, "out")
		for _, d := range []string{work, home} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, err
			}
		}
		if o.Log != nil {
			o.Log("build %d: TZ=%s LANG=%s umask %s GOMAXPROCS=%d shuffle=%d", i+1, v.TZ, v.Lang, v.Umask, v.Procs, v.Shuffle)
		}
		args := append(append([]string(nil), o.Args...), "--out", out, "--no-step-caches", fmt.Sprintf("--shuffle=%d", v.Shuffle))
		// The umask is set by the shell that starts the build.
		c := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", fmt.Sprintf("umask %s && exec \"$0\" \"$@\"", v.Umask), o.Exe}, args...)...)
		c.Dir = work
		c.Env = append(withoutVars(o.Env, reproEnv), "TZ="+v.TZ, "LANG="+v.Lang, "LC_ALL="+v.Lang, "HOME="+home, fmt.Sprintf("GOMAXPROCS=%d", v.Procs))
		c.Stdout, c.Stderr = io.Discard, o.Stderr
		if err := c.Run(); err != nil {
			return nil, fmt.Errorf("build %d failed: %w", i+1, err)
		}
		res.Outputs = append(res.Outputs, out)
	}
	// Every build is held to the first.
	for _, out := range res.Outputs[1:] {
		diffs, err := Compare(res.Outputs[0], out)
		if err != nil {
			return nil, err
		}
		res.Diffs = append(res.Diffs, diffs...)
	}
	return res, nil
}

// withoutVars is env less the named variables.
func withoutVars(env, names []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || k == n
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}
