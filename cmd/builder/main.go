// Command builder turns one certified RPM package base into a reproducible,
// signed node OS release. Each subcommand lives in its own file and only
// parses flags and calls the packages below pkgbase/, specs/ and friends.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/internal/httptimeout"
)

// version is set at link time (-ldflags "-X main.version=...").
var version = "dev"

// exitError carries a process exit code through cobra without printing twice.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "builder",
		Short: "Build reproducible, signed node OS releases from one certified RPM package base",
		Long: `builder resolves packages from one certified RPM package base (an ALT Linux
branch such as p10, p11, Sisyphus or c10f2, or any rpm-md repository), pins them
in a lock file, and assembles, signs and publishes a node OS release from them.

Every input is verified on the way in: repository signature, index hash and size,
package hash, package signature.`,
		Example: `  # write the embedded demo package base and lock its release spec
  builder demo-base /tmp/demo && builder lock --spec /tmp/demo/spec.yaml

  # inspect a package and verify its signature
  builder inspect --keyring RPM-GPG-KEY-CentOS-7 centos-release-7-2.1511.el7.centos.2.10.x86_64.rpm

  # compare two versions under ALT rules
  builder vercmp 2:5.10.253-alt1:p10+415595.100.2.1 2:5.10.253-alt1`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	timeout := root.PersistentFlags().Duration("timeout", httptimeout.Default, "give up on a registry or repository server that sends nothing for this long (connecting, answering, or in the middle of a transfer)")
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		cmd.SetContext(context.WithValue(cmd.Context(), timeoutKey{}, *timeout))
	}
	for _, add := range commands {
		root.AddCommand(add())
	}
	withUsage(root)
	return root
}

// timeoutKey holds --timeout in the context of the command being run: a
// value of each command line, not of the process, so that commands run
// side by side in one process (the tests) keep their own.
type timeoutKey struct{}

// netTimeout is --timeout: how long a server may stay silent.
func netTimeout(ctx context.Context) time.Duration {
	if d, ok := ctx.Value(timeoutKey{}).(time.Duration); ok {
		return d
	}
	return httptimeout.Default
}

// commands is filled by the init functions of the command files.
var commands []func() *cobra.Command

func register(f func() *cobra.Command) { commands = append(commands, f) }

func main() { os.Exit(run()) }

// run executes the command line and returns the process exit code.
func run() int {
	// NODEFORGE_CPUPROFILE=FILE writes a CPU profile of the run, for
	// `go tool pprof` (benchmarks; not part of the interface).
	if p := os.Getenv("NODEFORGE_CPUPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	ctx, stop := interruptible()
	defer stop()
	err := newRootCmd().ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "builder:", err)
		fmt.Fprintln(os.Stderr, "builder: interrupted; what was complete is kept, nothing half-written is left: run the command again to finish")
		return 130
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(os.Stderr, "builder:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(os.Stderr, "builder:", err)
	return 1
}

// collectOften is for the commands that build: most of their heap is file
// contents, which hold no pointers, so a collection costs little, and
// collecting at a tenth of growth rather than at double keeps the peak near
// the live data (851 MB instead of 1.18 GB on the 60-package benchmark
// base). Commands whose heap is all pointers (resolve) keep Go's default.
// GOGC overrides.
func collectOften() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(10)
	}
}

// interruptible returns a context that SIGINT or SIGTERM cancels: every
// long operation stops at its next check, removes its temporary files and
// returns. A second signal exits at once (the next run sweeps what is left).
func interruptible() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintf(os.Stderr, "\nbuilder: %v: stopping (again to exit at once)\n", s)
			cancel(fmt.Errorf("interrupted by %v", s))
		case <-done:
			return
		}
		select {
		case <-sigs:
			fmt.Fprintln(os.Stderr, "builder: exiting at once")
			os.Exit(130)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// buildVersion is the builder's version (set at link time), for functions
// whose own parameters are named version.
func buildVersion() string { return version }

// printJSON writes v as indented JSON (what --json prints: <, > and &
// as they are).
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
