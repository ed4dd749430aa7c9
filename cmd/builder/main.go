// Command builder turns one certified RPM package base into a reproducible,
// signed node OS release. Each subcommand lives in its own file and only
// parses flags and calls the packages below pkgbase/, specs/ and friends.
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
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
	for _, add := range commands {
		root.AddCommand(add())
	}
	return root
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
	err := newRootCmd().Execute()
	if err == nil {
		return 0
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

// buildVersion is the builder's version (set at link time), for functions
// whose own parameters are named version.
func buildVersion() string { return version }
