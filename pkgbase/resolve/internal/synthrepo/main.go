// Command synthrepo writes the synthetic node OS repository
// (synth.RPMMD) as an rpm-md repository, for
// scripts/bench-resolve.sh:
//
//	go run ./pkgbase/resolve/internal/synthrepo -n 20000 -seed 1 -out DIR
//
// DIR gets repodata/ (primary and filelists, gz unless -compression says
// otherwise), requests (the node OS's package names, one a line) and
// installonly (the names that install side by side, one a line).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/pkgbase/resolve/internal/synth"
)

func main() {
	n := flag.Int("n", 20000, "packages")
	seed := flag.Int64("seed", 1, "generator seed")
	out := flag.String("out", "", "repository directory to write")
	comp := flag.String("compression", "gz", "gz, zst or xz")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "synthrepo: -out is required")
		os.Exit(2)
	}
	if err := run(*n, *seed, *out, *comp); err != nil {
		fmt.Fprintln(os.Stderr, "synthrepo:", err)
		os.Exit(1)
	}
}

func run(n int, seed int64, out, comp string) error {
	pkgs, reqs := synth.RPMMD(n, seed)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := repo.WriteRPMMD(out, pkgs, repo.RPMMDWriteOptions{Compression: comp}); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "requests"), []byte(strings.Join(reqs, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "installonly"), []byte(strings.Join(synth.RPMMDInstallOnly, "\n")+"\n"), 0o644)
}
