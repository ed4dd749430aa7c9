package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/build"
)

func init() { register(newReproCmd) }

func newReproCmd() *cobra.Command {
	var sf specFlags
	var lockPath, cacheDir, keep, schematicPath, secureBootKeys string
	var asJSON bool
	var compress []string
	cmd := &cobra.Command{
		Use:   "repro --spec FILE [--lock FILE]",
		Short: "Build twice under different conditions and compare every output",
		Long: `repro runs two complete builds of the same lock in separate directories,
as separate processes, varying what must not reach an artifact: the time of
the build, TZ, LANG/LC_ALL, umask, GOMAXPROCS (1 and all cores), the working
directory, HOME, and the order in which packages and files are laid down.
Both share the download cache but not the step caches: each builds from
scratch. With --schematic, each build also writes that schematic's boot media
(initramfs with extensions, ISO, raw disk image and its .zst and .xz
variants). It then compares every output byte for byte. On a difference it names the
artifact and, from the build reports, the files inside it that differ, and
exits 1.`,
		Example: `  builder repro --spec /tmp/demo/spec.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := sf.load()
			if err != nil {
				return err
			}
			if sf.spec == "" {
				return fmt.Errorf("repro needs --spec FILE (the builds run as separate processes)")
			}
			specPath, _ := filepath.Abs(sf.spec)
			if lockPath == "" {
				lockPath = s.LockPath()
			}
			lockPath, _ = filepath.Abs(lockPath)
			self, err := os.Executable()
			if err != nil {
				return err
			}
			root, err := os.MkdirTemp("", "nodeforge-repro-")
			if err != nil {
				return err
			}
			if keep == "" {
				defer os.RemoveAll(root)
			}
			// Everything a build must not depend on, set differently in each.
			variants := []build.ReproVariant{
				{TZ: "UTC", Lang: "C", Umask: "022", Procs: 1, Shuffle: 0},
				{TZ: "Asia/Kathmandu", Lang: "ru_RU.UTF-8", Umask: "077", Procs: runtime.NumCPU() + 3, Shuffle: 7},
			}
			buildArgs := []string{"build"}
			if schematicPath != "" {
				abs, _ := filepath.Abs(schematicPath)
				buildArgs = []string{"image", "--schematic", abs, "--kind", "all", "--compress", strings.Join(compress, ",")}
				if keys, _ := filepath.Abs(secureBootKeys); secureBootKeys != "" {
					buildArgs = append(buildArgs, "--secureboot", keys)
				}
			} else if secureBootKeys != "" {
				return errors.New("--secureboot signs a schematic's media: give --schematic too")
			}
			buildArgs = append(buildArgs, "-q", "--spec", specPath, "--lock", lockPath, "--cache", cacheDir)
			stderr := cmd.ErrOrStderr()
			res, err := build.Reproduce(cmd.Context(), build.ReproOptions{Exe: self, Args: buildArgs, Env: os.Environ(), Root: root,
				Variants: variants, Stderr: stderr, Log: func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }})
			if err != nil {
				return err
			}
			outs, diffs := res.Outputs, res.Diffs
			w := cmd.OutOrStdout()
			n := 0
			filepath.WalkDir(outs[0], func(_ string, d fs.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					n++
				}
				return nil
			})
			if asJSON {
				doc := reproJSON{Reproducible: len(diffs) == 0, FilesCompared: n, Differences: append([]build.Difference{}, diffs...)}
				for i := range doc.Differences {
					if doc.Differences[i].Inside == nil {
						doc.Differences[i].Inside = []string{} // a list, never null
					}
				}
				if keep != "" && len(diffs) > 0 {
					doc.Kept = root
				}
				if err := printJSON(w, doc); err != nil {
					return err
				}
			}
			if len(diffs) == 0 {
				if !asJSON {
					fmt.Fprintf(w, "reproducible: both builds identical (%d files compared)\n", n)
				}
				return nil
			}
			for _, d := range diffs {
				if asJSON {
					break
				}
				fmt.Fprintf(w, "DIFFERS %s: %s\n", d.Artifact, d.Detail)
				for _, f := range d.Inside {
					fmt.Fprintf(w, "    %s\n", f)
				}
			}
			if keep != "" && !asJSON {
				fmt.Fprintf(w, "builds kept in %s\n", root)
			}
			return &exitError{code: 1, err: fmt.Errorf("%d output(s) differ between the two builds", len(diffs))}
		},
	}
	sf.add(cmd)
	cmd.Flags().StringVar(&lockPath, "lock", "", "lock file (default: <spec dir>/<name>.lock.json)")
	cmd.Flags().StringVar(&cacheDir, "cache", defaultCacheDir(), "package cache directory")
	cmd.Flags().StringVar(&keep, "keep", "", "keep the two builds (any value) for inspection")
	cmd.Flags().StringVar(&schematicPath, "schematic", "", "also build and compare this schematic's boot media")
	cmd.Flags().StringVar(&secureBootKeys, "secureboot", "", "with --schematic: make the Secure Boot media, signed with this key set (builder image --secureboot)")
	cmd.Flags().StringSliceVar(&compress, "compress", []string{"zst", "xz"}, "with --schematic: the compressed variants of the ISO, raw and VHD images to build and compare (none: --compress '')")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the comparison as JSON (docs/schemas/repro.schema.json)")
	return cmd
}

// reproJSON is repro --json.
type reproJSON struct {
	Reproducible  bool               `json:"reproducible"`
	FilesCompared int                `json:"filesCompared"`
	Differences   []build.Difference `json:"differences"`
	Kept          string             `json:"kept,omitempty"` // where the two builds are, with --keep
}
