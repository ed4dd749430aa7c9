package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/certification"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/locker"
	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/pkgbase/resolve"
	"github.com/nodeforge/builder/pkgbase/rpmfile"
)

func init() { register(newDiffCmd) }

func newDiffCmd() *cobra.Command {
	var format, oldVersion, newVersion, cacheDir string
	var keys []string
	var exitCode bool
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "diff OLD NEW [--format text|md|json] [--exit-code]",
		Short: "What changed between two releases: packages with their changelogs and fixes, artifacts, kernel, extensions",
		Long: `diff compares two releases. OLD and NEW are each a lock file, a build
directory (builder build's OUT, with its report.json) or a published release:
docker://HOST[:PORT]/PREFIX or oci:DIR (a layout written by builder release),
verified with --key like builder audit; --old-version and --new-version pick
the release when a store holds several.

It states the release's identity that changed (name, version, branch) and
lists the packages added, removed and updated (version old -> new, source
RPM), and for each update the changelog entries of the new package after the
old version, read from the package's header (from the package cache, or
fetched from the repository the lock names); CVE identifiers those entries
name are gathered under "fixes in this update". Per component and
architecture it lists the packages that joined or left it, also those the
release keeps through another component, each with the shortest requirement
chain that put it there (builder why, from the lock that holds it: the
indexes it pinned are read again) and what the other lock changed on that
chain. Two locks or two releases compare their locks' components; two build
directories their reports' (the root filesystem and each extension). When both sides were built
(a build directory or a release), it compares every artifact (digest, size,
files added, removed and changed), the kernel (version, command line, module
set) and the extensions, and gives each update's size change per artifact.

--format md writes Markdown that reads as release notes; json follows
docs/schemas/diff.schema.json. With --exit-code, diff exits 1 when anything
changed (the identity and component membership included), like git diff.`,
		Example: `  builder diff old/demo.lock.json demo.lock.json
  builder diff --format md out-1.10/ out-1.11/ > RELEASE-NOTES.md
  builder diff --key cosign.pub --old-version 1.10.2 --new-version 1.11.0 \
      docker://registry.internal:5000/nodeforge/p11 docker://registry.internal:5000/nodeforge/p11`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "md" && format != "json" {
				return fmt.Errorf("--format %q: want text, md or json", format)
			}
			ctx := cmd.Context()
			o := sideOptions{keys: keys, sf: &sf}
			old, oldDir, err := openSide(ctx, args[0], oldVersion, o)
			if err != nil {
				return fmt.Errorf("OLD: %w", err)
			}
			new, newDir, err := openSide(ctx, args[1], newVersion, o)
			if err != nil {
				return fmt.Errorf("NEW: %w", err)
			}
			timeout := netTimeout(ctx)
			c := &cache.Cache{Timeout: timeout, Dir: cacheDir}
			dirs := map[*certification.Side]string{old: oldDir, new: newDir}
			changelog := func(ctx context.Context, s *certification.Side, p *lock.Package) ([]rpmfile.Change, error) {
				return locker.Changelog(ctx, c, p, dirs[s], repo.SourceOptions{Timeout: timeout})
			}
			// Each side's lock explains its own components (its base read once).
			explainers := map[*certification.Side]*locker.LockExplainer{}
			why := func(ctx context.Context, s *certification.Side, arch, comp string, nevras []string) (map[string]resolve.Path, error) {
				if explainers[s] == nil {
					explainers[s] = locker.NewLockExplainer(s.Lock, dirs[s], locker.Options{Cache: c, Source: repo.SourceOptions{Timeout: timeout}})
				}
				return explainers[s].Shortest(ctx, arch, comp, nevras)
			}
			d := certification.Compare(ctx, old, new, changelog, why)
			w := cmd.OutOrStdout()
			if format == "json" {
				err = d.JSON(w)
			} else {
				err = d.Text(w, format == "md")
			}
			if err != nil {
				return err
			}
			if exitCode && !d.Empty() {
				return &exitError{code: 1, err: errors.New("the releases differ")}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", "text", "text, md (release notes) or json")
	f.BoolVar(&exitCode, "exit-code", false, "exit 1 when anything changed")
	f.StringArrayVar(&keys, "key", nil, "public key (cosign.pub) published releases are signed with (repeatable)")
	f.StringVar(&oldVersion, "old-version", "", "the version of OLD when it is a store holding several releases")
	f.StringVar(&newVersion, "new-version", "", "the version of NEW when it is a store holding several releases")
	f.StringVar(&cacheDir, "cache", defaultCacheDir(), "package cache ($NODEFORGE_CACHE): changelogs are read from the packages in it, or fetched into it")
	sf.addRemote(f)
	return cmd
}

type sideOptions struct {
	keys []string
	sf   *storeFlags
}

// openSide reads one side: a lock file, a build directory, or a published
// release. The directory returned is where the side's relative repository
// URLs are resolved from ("" when unknown).
func openSide(ctx context.Context, arg, version string, o sideOptions) (*certification.Side, string, error) {
	fi, statErr := os.Stat(arg)
	switch {
	case statErr == nil && fi.Mode().IsRegular():
		l, err := lock.Read(arg)
		if err != nil {
			return nil, "", err
		}
		return &certification.Side{Ref: arg, Lock: l}, l.Base(arg, ""), nil
	case statErr == nil && fi.IsDir() && fileExists(filepath.Join(arg, "report.json")):
		rep, err := readReport(filepath.Join(arg, "report.json"))
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", arg, err)
		}
		return &certification.Side{Ref: arg, Report: rep}, "", nil
	case statErr != nil && !strings.Contains(arg, ":"):
		return nil, "", statErr
	}
	if len(o.keys) == 0 {
		return nil, "", fmt.Errorf("%s is a published release: give --key PUB to verify it", arg)
	}
	vs, err := loadVerifiers(o.keys)
	if err != nil {
		return nil, "", err
	}
	st, ver, err := openRelease(ctx, arg, version, o.sf.remote(ctx))
	if err != nil {
		return nil, "", err
	}
	s, err := certification.ReleaseSide(ctx, st, ver, vs)
	return s, "", err
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
