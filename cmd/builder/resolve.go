package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/api/target"
	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/keyring"
	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/pkgbase/resolve"
)

func init() { register(newResolveCmd) }

// hostArch is this host's architecture by rpm's name (api/target).
func hostArch() string {
	if a, err := target.Lookup(runtime.GOARCH); err == nil {
		return a.RPM
	}
	if runtime.GOARCH == "386" {
		return "i586"
	}
	return runtime.GOARCH
}

func newResolveCmd() *cobra.Command {
	var repos, keyrings, components, excludes []string
	var arch, branch, format, verify, cacheDir string
	var insecure, asJSON bool
	cmd := &cobra.Command{
		Use:   "resolve --repo URL [--repo URL]... [--arch ARCH] [--keyring FILE | --insecure-skip-verify] [--json] PACKAGE...",
		Short: "Resolve packages and their dependencies from repositories",
		Long: `resolve reads one or more repositories and prints the set of packages that
installing PACKAGE... needs, one name-[epoch:]version-release.arch a line, sorted.

A PACKAGE is a name ("bash"), a name with a version ("kernel-image-std-def = 2:6.12.40-alt1",
operators < <= = >= >), or a file path ("/bin/sh").

The repository format is detected. An ALT repository is given as the directory
or URL that holds base/ (one dist, e.g. .../p11/branch/x86_64; repeat --repo for
noarch): every component its base/release lists is read unless --component
narrows them, and ALT version rules apply. An rpm-md repository is the
directory or URL that holds repodata/, with upstream rpm rules.

Release files must verify with --keyring, or verification must be skipped
explicitly with --insecure-skip-verify (index hashes are checked regardless).
What the indexes parse to is kept under the --cache directory, keyed by the
digest of the (verified) release file, and reused while it is unchanged;
--cache "" keeps nothing.
When the packages cannot be installed, resolve exits 1 and explains why: the
chain from the requested package to the requirement nothing provides, or the
conflicting pair.`,
		Example: `  builder resolve --repo /tmp/demo/alt/x86_64 --repo /tmp/demo/alt/noarch \
      --keyring /tmp/demo/keys/demo.asc containerd zfs-utils
  builder resolve --repo https://mirror.example/centos/7/os/x86_64 --keyring RPM-GPG-KEY-CentOS-7 --arch x86_64 bash`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(repos) == 0 {
				return errors.New("at least one --repo is required")
			}
			if insecure && len(keyrings) > 0 {
				return errors.New("give --keyring or --insecure-skip-verify, not both")
			}
			var kr *keyring.Keyring
			if len(keyrings) > 0 {
				var err error
				if kr, err = keyring.Load(keyrings...); err != nil {
					return err
				}
			} else if !insecure {
				return errors.New("no --keyring given: repositories cannot be verified (use --insecure-skip-verify to accept them unverified)")
			}
			if verify != "all" && verify != "packages" {
				return fmt.Errorf("--verify %q: want all or packages", verify)
			}
			ctx := cmd.Context()
			// resolve keeps nearly all it reads until it exits: a
			// collection finds little to free. Collect less often
			// (unless GOGC says otherwise).
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(400)
			}
			indexCache := ""
			if cacheDir != "" {
				indexCache = filepath.Join(cacheDir, "repo-index")
			}
			// New cache entries are written while resolving.
			defer repo.WaitIndexCache()
			var all []*repo.Package
			sem := evr.ALT
			partial := map[string]string{}
			for i, u := range repos {
				ld, err := repo.Load(ctx, u, repo.AnyOptions{Format: format, Keyring: kr, InsecureSkipVerify: insecure, UnsignedIndex: verify == "packages",
					Components: components, Source: repo.SourceOptions{Timeout: netTimeout(ctx)}, IndexCache: indexCache, IndexCacheAsync: true})
				if err != nil {
					return err
				}
				if i == 0 && ld.Format == repo.FormatRPMMD {
					sem = evr.RPM
				}
				if !ld.FullFiles {
					partial[ld.URL] = u
				}
				all = append(all, ld.Packages...)
			}
			res, err := resolve.Resolve(all, args, resolve.Options{Arch: arch, Semantics: sem, TargetBranch: branch, Excludes: excludes, PartialFiles: partial})
			if err != nil {
				var re *resolve.Error
				if errors.As(err, &re) {
					return &exitError{code: 1, err: err}
				}
				return err
			}
			return printResolution(cmd.OutOrStdout(), res, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&repos, "repo", nil, "repository directory or URL (repeatable)")
	f.StringArrayVar(&keyrings, "keyring", nil, "OpenPGP public keys that sign the repositories (repeatable)")
	f.BoolVar(&insecure, "insecure-skip-verify", false, "accept repositories whose release signature is missing or unverifiable")
	f.StringVar(&verify, "verify", "all", "all: the repository index must be signed; packages: an rpm-md index may be unsigned (Fedora's and Rocky's default; builder lock then verifies every package's signature)")
	f.StringArrayVar(&components, "component", nil, "ALT components to read (default: all that base/release lists)")
	f.StringVar(&arch, "arch", hostArch(), "architecture to install for (plus noarch)")
	f.StringVar(&branch, "branch", "", "ALT branch whose disttags win ties (e.g. p11)")
	f.StringVar(&format, "format", "", "repository format: alt or rpm-md (default: detect)")
	f.StringArrayVar(&excludes, "exclude", nil, "package name glob never to choose (repeatable)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.StringVar(&cacheDir, "cache", defaultCacheDir(), "cache directory ($NODEFORGE_CACHE): parsed repository indexes are kept in its repo-index/ (\"\": none)")
	return cmd
}

// resolvedPackage is the JSON form of one resolved package. Epoch is a
// pointer so that "no epoch" (null) and "epoch 0" stay distinct: they
// compare differently under ALT's rules.
type resolvedPackage struct {
	Name     string `json:"name"`
	Epoch    *int   `json:"epoch"`
	Version  string `json:"version"`
	Release  string `json:"release"`
	Disttag  string `json:"disttag"`
	Arch     string `json:"arch"`
	Repo     string `json:"repo"`
	Location string `json:"location"`
}

// printResolution writes res one name-[epoch:]version-release.arch a line,
// in the result's order (name, then version, then arch), or as a JSON list.
func printResolution(w io.Writer, res *resolve.Result, asJSON bool) error {
	if asJSON {
		list := make([]resolvedPackage, 0, len(res.Packages))
		for _, p := range res.Packages {
			rp := resolvedPackage{
				Name: p.Name, Version: p.EVR.Version, Release: p.EVR.Release, Disttag: p.EVR.Disttag,
				Arch: p.Arch, Repo: p.Repo, Location: p.Location,
			}
			if p.EVR.HasEpoch {
				e := p.EVR.Epoch
				rp.Epoch = &e
			}
			list = append(list, rp)
		}
		return printJSON(w, list)
	}
	bw := bufio.NewWriter(w)
	for _, p := range res.Packages {
		bw.WriteString(p.NEVRA())
		bw.WriteByte('\n')
	}
	return bw.Flush()
}
