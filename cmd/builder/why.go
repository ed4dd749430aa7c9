package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/locker"
	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/pkgbase/resolve"
)

func init() { register(newWhyCmd) }

func newWhyCmd() *cobra.Command {
	var sf specFlags
	var lockPath, arch, component, image, cacheDir string
	var asJSON, quiet bool
	cmd := &cobra.Command{
		Use:   "why PACKAGE (--spec FILE | --branch NAME | --lock FILE) [--arch A] [--component C | --image NAME] [--json]",
		Short: "Explain why a package is in a release: every chain from a request to it",
		Long: `why explains why PACKAGE (a name or a NEVRA) is in a component of a release.
For each request of the component that leads to it, it prints the shortest chain
of requirements from the request to the package, each step naming the
requirement, the package that met it, what of that package met it (a provide,
its name and version, or a file), and every other package of the base that
could have met it, with why it did not: older, a build of another branch,
conflicting with or obsoleted by a package of the set, of another
architecture, excluded by the spec, or simply not needed because the chosen
one meets the requirement. Then it lists every package of the component that
requires it directly.

With --spec or --branch the spec's repositories are read (and verified) and
the spec resolved as builder lock does, without downloading a package. With
--lock the lock alone is enough: the repositories it records are read again
(relative URLs from the lock's directory; --repo-url NAME=URL moves one) and
must be the very indexes it pinned, the sets are its components and the
requests those it recorded. Both give the same answer for the same base.

With --image NAME it explains the package in that container image of the
spec's images section (resolved on its own; the lock records its requests).

A package that is in no component asked about is an error (exit 1).`,
		Example: `  builder why --spec /tmp/demo/spec.yaml libseccomp
  builder why --lock /tmp/demo/demo-p11.lock.json libseccomp --component rootfs
  builder why --branch p11 --arch aarch64 --json glibc-core
  builder why --lock /tmp/demo/demo-p11.lock.json --image etcd glibc-core`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stderr := cmd.ErrOrStderr()
			if image != "" && component != "" {
				return errors.New("give --component or --image, not both")
			}
			o := locker.WhyOptions{Arch: arch, Component: component, Image: image}
			timeout := netTimeout(cmd.Context())
			o.Cache = &cache.Cache{Timeout: timeout, Dir: cacheDir}
			o.Source = repo.SourceOptions{Timeout: timeout}
			if !quiet {
				o.Log = func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
			}
			ans, err := explainPackage(cmd, &sf, lockPath, args[0], o)
			if nl := (*locker.NotLockedError)(nil); errors.As(err, &nl) {
				return &exitError{code: 1, err: err}
			}
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), whyJSON{Query: args[0], Answers: ans})
			}
			printWhy(cmd.OutOrStdout(), ans)
			return nil
		},
	}
	sf.add(cmd)
	f := cmd.Flags()
	f.StringVar(&lockPath, "lock", "", "explain from this lock file alone (instead of resolving the spec)")
	f.StringVar(&arch, "arch", "", "only this architecture (default: every one)")
	f.StringVar(&component, "component", "", "only this component (default: every one that holds the package)")
	f.StringVar(&image, "image", "", "explain in this container image of the spec (instead of the components)")
	f.StringVar(&cacheDir, "cache", defaultCacheDir(), "cache directory ($NODEFORGE_CACHE): parsed repository indexes are kept in its repo-index/")
	f.BoolVar(&asJSON, "json", false, "print JSON (docs/schemas/why.schema.json)")
	f.BoolVarP(&quiet, "quiet", "q", false, "print nothing on stderr but errors")
	return cmd
}

// whyJSON is why's --json document (docs/schemas/why.schema.json).
type whyJSON struct {
	Query   string          `json:"query"`
	Answers []locker.Answer `json:"answers"`
}

// explainPackage asks the lock or the spec.
func explainPackage(cmd *cobra.Command, sf *specFlags, lockPath, target string, o locker.WhyOptions) ([]locker.Answer, error) {
	if lockPath == "" {
		s, err := sf.load()
		if err != nil {
			return nil, fmt.Errorf("%w (or --lock FILE)", err)
		}
		return locker.WhySpec(cmd.Context(), s, target, o)
	}
	if sf.spec != "" || sf.branch != "" {
		return nil, errors.New("give --lock or a spec (--spec, --branch), not both")
	}
	l, err := lock.Read(lockPath)
	if err != nil {
		return nil, err
	}
	urls, err := keyValues("--repo-url", sf.repoURLs)
	if err != nil {
		return nil, err
	}
	return locker.WhyLock(cmd.Context(), l, lockPath, urls, target, o)
}

// printWhy renders the answers for a reader.
func printWhy(w io.Writer, ans []locker.Answer) {
	for i, a := range ans {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if a.Image != "" {
			fmt.Fprintf(w, "%s is in image %s (%s)", a.Package, a.Image, a.Arch)
		} else {
			fmt.Fprintf(w, "%s is in component %s (%s)", a.Package, a.Component, a.Arch)
		}
		if a.Requested {
			fmt.Fprint(w, ": requested")
		}
		fmt.Fprintln(w)
		for _, p := range a.Paths {
			fmt.Fprintf(w, "\nfrom the request %q:\n", p.Request)
			for _, e := range p.Edges {
				from := "requested"
				if e.From != "" {
					from = e.From + " requires"
				}
				fmt.Fprintf(w, "  %s %s -> %s", from, e.Requirement, e.Provider)
				if name, _, _ := strings.Cut(e.Provide, " "); !strings.HasPrefix(e.Requirement+" ", name+" ") {
					fmt.Fprintf(w, " (provides %s)", e.Provide)
				}
				fmt.Fprintln(w)
				for _, c := range e.Others {
					fmt.Fprintf(w, "      not %s: %s\n", c.Package, c.Reason)
				}
			}
		}
		if len(a.RequiredBy) > 0 {
			fmt.Fprintf(w, "\nrequired by %d package(s) of the component:\n", countFrom(a.RequiredBy))
			for _, e := range a.RequiredBy {
				fmt.Fprintf(w, "  %s requires %s\n", e.From, e.Requirement)
			}
		} else if !a.Requested {
			fmt.Fprintln(w, "\nrequired by nothing in the component")
		}
	}
}

// countFrom counts the distinct requiring packages.
func countFrom(es []resolve.Edge) int {
	seen := map[string]bool{}
	for _, e := range es {
		seen[e.From] = true
	}
	return len(seen)
}
