// Command mkbase writes the Debian-derived test package base (a real
// Debian kernel and its modules wrapped into RPMs, a Go init, an rpm-md
// repository and a release spec) for benchmarks and manual boots. It
// prints the spec's path.
//
//	go run ./pkgbase/testbase/mkbase -dir /tmp/base [-all-modules] [-arch x86_64,aarch64]
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/nodeforge/builder/pkgbase/testbase"
)

func main() {
	dir := flag.String("dir", "", "directory to write the base into")
	all := flag.Bool("all-modules", false, "package every kernel module (about 390 MB), not just the boot-relevant trees")
	arches := flag.String("arch", "x86_64", "the base's architectures, comma-separated (x86_64, aarch64)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "mkbase: -dir is required")
		os.Exit(2)
	}
	opts := testbase.Options{Arches: strings.Split(*arches, ","), Log: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }}
	if *all {
		opts.ModuleTrees = append([]string{"kernel"}, testbase.DefaultModuleTrees[6:]...)
	}
	spec, err := testbase.Build(*dir, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkbase:", err)
		os.Exit(1)
	}
	fmt.Println(spec)
}
