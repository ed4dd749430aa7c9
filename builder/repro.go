package builder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ReproVariant is one build of the reproducibility experiment: what a
// build must not depend on, set differently in each.
type ReproVariant struct {
	TZ, Lang, Umask string
	Procs           int
	Shuffle         int64
	// Builder is the binary that builds (nil: this builder).
	Builder *Builder
}

// ReproBuild is one build as the experiment asks its runner for it: the
// variant, its working directory, HOME and output directory, and its
// environment (the experiment's, less what a variant sets, plus the
// variant's).
type ReproBuild struct {
	Index          int // from 1
	Variant        ReproVariant
	Dir, Home, Out string
	Env            []string
}

// ReproRunner runs one build to its end: the caller knows the command
// line of a build (builder repro builds it).
type ReproRunner func(ctx context.Context, b ReproBuild) error

// ReproOptions describe the experiment: the environment the builds start
// from, where they run, the variants and how a build runs.
type ReproOptions struct {
	Env      []string
	Root     string
	Variants []ReproVariant
	Run      ReproRunner
	Log      func(format string, args ...any)
}

// ReproResult are the outputs, how they differ, and the variations the
// experiment tried.
type ReproResult struct {
	Outputs    []string
	Diffs      []Difference
	Variations []string
}

// reproEnv are the variables each variant sets; the ones inherited are
// dropped first.
var reproEnv = []string{"TZ", "LANG", "LC_ALL", "HOME", "GOMAXPROCS", "SOURCE_DATE_EPOCH"}

// Reproduce runs the builds, one per variant, each in its own working
// directory and HOME and with its own umask, laying packages in its own
// order and without step caches (what the runner is asked for), then
// compares the outputs byte for byte. This builder must be able to write
// a release's bytes (CheckBuilder); another builder of a variant that
// cannot refuses in its build.
func Reproduce(ctx context.Context, o ReproOptions) (*ReproResult, error) {
	if err := CheckBuilder(); err != nil {
		return nil, err
	}
	if len(o.Variants) < 2 {
		return nil, fmt.Errorf("the experiment needs two variants or more, not %d", len(o.Variants))
	}
	if o.Run == nil {
		return nil, fmt.Errorf("the experiment needs a runner of its builds")
	}
	res := &ReproResult{Variations: Variations(o.Variants)}
	for i, v := range o.Variants {
		b := ReproBuild{Index: i + 1, Variant: v,
			Dir: filepath.Join(o.Root, fmt.Sprintf("build-%d", i+1)), Home: filepath.Join(o.Root, fmt.Sprintf("home-%d", i+1))}
		b.Out = filepath.Join(b.Dir, "out")
		for _, d := range []string{b.Dir, b.Home} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, err
			}
		}
		b.Env = append(withoutVars(o.Env, reproEnv), "TZ="+v.TZ, "LANG="+v.Lang, "LC_ALL="+v.Lang, "HOME="+b.Home, fmt.Sprintf("GOMAXPROCS=%d", v.Procs))
		if o.Log != nil {
			o.Log("build %d: %s, TZ=%s LANG=%s umask %s GOMAXPROCS=%d shuffle=%d", i+1, builderName(v.Builder), v.TZ, v.Lang, v.Umask, v.Procs, v.Shuffle)
		}
		if err := o.Run(ctx, b); err != nil {
			return nil, fmt.Errorf("build %d (%s) failed: %w", i+1, builderName(v.Builder), err)
		}
		res.Outputs = append(res.Outputs, b.Out)
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

// Variations names what the variants vary, one line each, with each
// variant's value: "TZ: UTC, Asia/Kathmandu".
func Variations(vs []ReproVariant) []string {
	field := func(name string, f func(int, ReproVariant) string) string {
		var vals []string
		for i, v := range vs {
			vals = append(vals, f(i, v))
		}
		return name + ": " + strings.Join(vals, ", ")
	}
	out := []string{
		field("TZ", func(_ int, v ReproVariant) string { return v.TZ }),
		field("LANG/LC_ALL", func(_ int, v ReproVariant) string { return v.Lang }),
		field("umask", func(_ int, v ReproVariant) string { return v.Umask }),
		field("GOMAXPROCS", func(_ int, v ReproVariant) string { return fmt.Sprint(v.Procs) }),
		field("working directory", func(i int, _ ReproVariant) string { return fmt.Sprintf("build-%d", i+1) }),
		field("HOME", func(i int, _ ReproVariant) string { return fmt.Sprintf("home-%d", i+1) }),
		field("package order", func(_ int, v ReproVariant) string {
			if v.Shuffle == 0 {
				return "as locked"
			}
			return fmt.Sprintf("shuffled (seed %d)", v.Shuffle)
		}),
		"time of the build: one after the other",
		"step caches: none (each builds from scratch)",
	}
	return append(out, field("builder", func(_ int, v ReproVariant) string {
		if v.Builder == nil {
			return ThisBuilder().String()
		}
		return v.Builder.String()
	}))
}

// builderName is how the log names a variant's builder.
func builderName(b *Builder) string {
	if b == nil {
		return "this builder"
	}
	return b.Path
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
