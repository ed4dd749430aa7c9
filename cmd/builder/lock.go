package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/locker"
	"github.com/nodeforge/builder/pkgbase/repo"
)

func init() { register(newLockCmd) }

// specFlags are the flags every spec-driven command shares.
type specFlags struct {
	spec     string
	branch   string
	repoURLs []string
	repoKeys []string
	repoPins []string
}

func (f *specFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.spec, "spec", "", "release spec file (YAML)")
	cmd.Flags().StringVar(&f.branch, "branch", "", "the branch: alone, use its shipped spec ("+strings.Join(specs.Shipped(), ", ")+"); with --spec, check the spec is of it")
	cmd.Flags().StringArrayVar(&f.repoURLs, "repo-url", nil, "override a repository URL: NAME=URL (repeatable)")
	cmd.Flags().StringArrayVar(&f.repoKeys, "repo-keyring", nil, "override a repository's keyring: NAME=FILE (repeatable; the files given for one NAME together replace the spec's)")
	cmd.Flags().StringArrayVar(&f.repoPins, "repo-fingerprint", nil, "pin one more key for a repository that pins keys: NAME=FINGERPRINT (repeatable; a perimeter's key signing a subset's indexes)")
}

func (f *specFlags) load() (*specs.Spec, error) {
	var s *specs.Spec
	var err error
	switch {
	case f.spec != "":
		// With --branch too, the spec must be of that branch.
		if s, err = specs.Load(f.spec); err == nil && f.branch != "" && s.Branch != f.branch {
			return nil, fmt.Errorf("%s is a spec of branch %s, not %s", f.spec, s.Branch, f.branch)
		}
	case f.branch != "":
		s, err = specs.LoadShipped(f.branch)
	default:
		return nil, fmt.Errorf("no spec: give --spec FILE or --branch NAME (shipped: %s)", strings.Join(specs.Shipped(), ", "))
	}
	if err != nil {
		return nil, err
	}
	urls, err := keyValues("--repo-url", f.repoURLs)
	if err != nil {
		return nil, err
	}
	keys, err := keyLists("--repo-keyring", f.repoKeys)
	if err != nil {
		return nil, err
	}
	pins, err := keyLists("--repo-fingerprint", f.repoPins)
	if err != nil {
		return nil, err
	}
	if err := s.Override(urls, keys); err != nil {
		return nil, err
	}
	return s, s.Pin(pins)
}

// keyLists reads repeatable NAME=VALUE flags, the values of each NAME in
// the order given.
func keyLists(flag string, vals []string) (map[string][]string, error) {
	m := map[string][]string{}
	for _, v := range vals {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" || val == "" {
			return nil, fmt.Errorf("%s %q: want NAME=VALUE", flag, v)
		}
		m[k] = append(m[k], val)
	}
	return m, nil
}

// keyValues reads repeatable NAME=VALUE flags where a NAME given again
// takes the later value.
func keyValues(flag string, vals []string) (map[string]string, error) {
	lists, err := keyLists(flag, vals)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for k, l := range lists {
		m[k] = l[len(l)-1]
	}
	return m, nil
}

func newLockCmd() *cobra.Command {
	var sf specFlags
	var out, cacheDir string
	var jobs int
	var quiet, asJSON bool
	cmd := &cobra.Command{
		Use:   "lock --spec FILE [-o FILE]",
		Short: "Resolve a release spec against its package base and pin every package",
		Long: `lock reads the spec's repositories (verifying each release signature, and
each index's size and hash against it), resolves the package set of every
component for every architecture, downloads each chosen package into the
verified cache (a file enters it only when its size and hash match the
signed index), checks each package's digests and OpenPGP signature, and
writes the lock file: per architecture and component, every package's NEVRA,
disttag, source RPM, repository, location, size, sha256, the index's own
digest, signing key and license, plus the index digests and keyring
fingerprints. The same inputs give the same bytes.

The lock is written beside the spec as <name>.lock.json unless -o is given.`,
		Example: `  builder demo-base /tmp/demo && builder lock --spec /tmp/demo/spec.yaml
  builder lock --branch p11 --repo-url p11=http://mirror.local/p11/branch -o p11.lock.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := sf.load()
			if err != nil {
				return err
			}
			if out == "" {
				out = s.LockPath()
			}
			stderr := cmd.ErrOrStderr()
			view := newProgressView(stderr, quiet)
			timeout := netTimeout(cmd.Context())
			c := &cache.Cache{Timeout: timeout, Dir: cacheDir, Workers: jobs, Progress: view.cacheEvent}
			l, err := locker.Create(cmd.Context(), s, locker.Options{Cache: c, Log: view.logf, Source: repo.SourceOptions{Timeout: timeout}})
			view.end()
			if err != nil {
				return err
			}
			if _, err := locker.Write(out, l, s.Path(".")); err != nil {
				return err
			}
			n := 0
			for _, a := range l.Architectures {
				n += len(a.Packages)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), lockSummary(out, l))
			}
			if !quiet {
				fmt.Fprintf(stderr, "locked %d packages for %d architecture(s) into %s\n", n, len(l.Architectures), out)
			}
			return nil
		},
	}
	sf.add(cmd)
	cmd.Flags().StringVarP(&out, "output", "o", "", "lock file to write (default: <spec dir>/<name>.lock.json)")
	cmd.Flags().StringVar(&cacheDir, "cache", defaultCacheDir(), "package cache directory ($NODEFORGE_CACHE)")
	cmd.Flags().IntVarP(&jobs, "jobs", "j", 4, "concurrent downloads")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print nothing but errors")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print what was locked as JSON (docs/schemas/lock-summary.schema.json)")
	return cmd
}

// lockJSON is lock --json: where the lock went and what it holds.
type lockJSON struct {
	Lock          string                  `json:"lock"`
	Packages      int                     `json:"packages"`
	Architectures map[string]lockArchJSON `json:"architectures"`
}

type lockArchJSON struct {
	Packages   int            `json:"packages"`
	Components map[string]int `json:"components"` // packages each installs
}

func lockSummary(path string, l *lock.Lock) lockJSON {
	out := lockJSON{Lock: path, Architectures: map[string]lockArchJSON{}}
	for arch, a := range l.Architectures {
		la := lockArchJSON{Packages: len(a.Packages), Components: map[string]int{}}
		for c, list := range a.Components {
			la.Components[c] = len(list)
		}
		out.Packages += la.Packages
		out.Architectures[arch] = la
	}
	return out
}
