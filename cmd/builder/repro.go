package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/builder"
)

func init() { register(newReproCmd) }

func newReproCmd() *cobra.Command {
	var sf specFlags
	var lockPath, cacheDir, keep, schematicPath, secureBootKeys, otherPath string
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
variants). With --builder PATH the second build is made by another builder
binary (another build configuration, or another CPU architecture: run through
binfmt_misc or qemu-<arch>-static, a cgo one with Debian's cross libc). It then
compares every output byte for byte and names the variations it tried. On a
difference it names the artifact and, from the build reports, the files inside
it that differ (the first first) and the compressor each build's report says
wrote it, and exits 1.`,
		Example: `  builder repro --spec /tmp/demo/spec.yaml
  builder repro --spec /tmp/demo/spec.yaml --builder /tmp/builder-arm64`,
		Args: cobra.NoArgs,
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
			variants := []builder.ReproVariant{
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
			if otherPath != "" {
				other, err := builder.OtherBuilder(otherPath)
				if err != nil {
					return err
				}
				variants[1].Builder = other
			}
			stderr := cmd.ErrOrStderr()
			res, err := builder.Reproduce(cmd.Context(), builder.ReproOptions{Env: os.Environ(), Root: root, Variants: variants,
				Run: reproRunner(self, buildArgs, stderr), Log: func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) }})
			if err != nil {
				return err
			}
			kept := ""
			if keep != "" {
				kept = root
			}
			return printRepro(cmd.OutOrStdout(), res, asJSON, kept)
		},
	}
	sf.add(cmd)
	cmd.Flags().StringVar(&lockPath, "lock", "", "lock file (default: <spec dir>/<name>.lock.json)")
	cmd.Flags().StringVar(&cacheDir, "cache", defaultCacheDir(), "package cache directory")
	cmd.Flags().StringVar(&keep, "keep", "", "keep the two builds (any value) for inspection")
	cmd.Flags().StringVar(&schematicPath, "schematic", "", "also build and compare this schematic's boot media")
	cmd.Flags().StringVar(&secureBootKeys, "secureboot", "", "with --schematic: make the Secure Boot media, signed with this key set (builder image --secureboot)")
	cmd.Flags().StringSliceVar(&compress, "compress", []string{"zst", "xz"}, "with --schematic: the compressed variants of the ISO, raw and VHD images to build and compare (none: --compress '')")
	cmd.Flags().StringVar(&otherPath, "builder", "", "make the second build with this builder binary (another build configuration, or another CPU architecture run through qemu-user) and compare it with this builder's")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the comparison as JSON (docs/schemas/repro.schema.json)")
	return cmd
}

// reproJSON is repro --json.
type reproJSON struct {
	Reproducible  bool                 `json:"reproducible"`
	FilesCompared int                  `json:"filesCompared"`
	Variations    []string             `json:"variations"` // what the builds varied, with each one's value
	Differences   []builder.Difference `json:"differences"`
	Kept          string               `json:"kept,omitempty"` // where the two builds are, with --keep
}

// reproRunner runs one build of the experiment: this builder (exe) or
// the variant's, under the variant's umask (set by the shell that starts
// it), with the build's arguments and its output directory. A build that
// fails says why in its last line (a builder that refuses releases, its
// refusal).
func reproRunner(exe string, args []string, stderr io.Writer) builder.ReproRunner {
	return func(ctx context.Context, b builder.ReproBuild) error {
		argv, env := []string{exe}, []string(nil)
		if b.Variant.Builder != nil {
			argv, env = b.Variant.Builder.Command()
		}
		argv = append(append(argv, args...), "--out", b.Out, "--no-step-caches", fmt.Sprintf("--shuffle=%d", b.Variant.Shuffle))
		c := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", fmt.Sprintf("umask %s && exec \"$0\" \"$@\"", b.Variant.Umask)}, argv...)...)
		c.Dir, c.Env = b.Dir, append(b.Env, env...)
		var tail bytes.Buffer
		c.Stdout, c.Stderr = io.Discard, io.MultiWriter(stderr, &tail)
		if err := c.Run(); err != nil {
			if last := lastLine(tail.String()); last != "" {
				return fmt.Errorf("%s", last)
			}
			return err
		}
		return nil
	}
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// printVariations says what the experiment varied.
func printVariations(w io.Writer, vs []string) {
	fmt.Fprintln(w, "variations tried:")
	for _, v := range vs {
		fmt.Fprintf(w, "  %s\n", v)
	}
}

// printRepro prints the comparison (as JSON with asJSON), the variations
// tried and, on a difference, where the builds were kept; it is exit 1
// when they differ.
func printRepro(w io.Writer, res *builder.ReproResult, asJSON bool, kept string) error {
	outs, diffs := res.Outputs, res.Diffs
	n := 0
	filepath.WalkDir(outs[0], func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	if asJSON {
		doc := reproJSON{Reproducible: len(diffs) == 0, FilesCompared: n, Variations: res.Variations, Differences: append([]builder.Difference{}, diffs...)}
		for i := range doc.Differences {
			if doc.Differences[i].Inside == nil {
				doc.Differences[i].Inside = []string{} // a list, never null
			}
		}
		if kept != "" && len(diffs) > 0 {
			doc.Kept = kept
		}
		if err := printJSON(w, doc); err != nil {
			return err
		}
	}
	if len(diffs) == 0 {
		if !asJSON {
			fmt.Fprintf(w, "reproducible: both builds identical (%d files compared)\n", n)
			printVariations(w, res.Variations)
		}
		return nil
	}
	for _, d := range diffs {
		if asJSON {
			break
		}
		fmt.Fprintf(w, "DIFFERS %s: %s\n", d.Artifact, d.Detail)
		if len(d.Inside) > 0 {
			fmt.Fprintf(w, "  first differing file inside: %s\n", d.Inside[0])
		}
		for k, by := range d.WrittenBy {
			fmt.Fprintf(w, "  build %d's report: written by %s\n", k+1, by)
		}
		for _, f := range d.Inside {
			fmt.Fprintf(w, "    %s\n", f)
		}
	}
	if !asJSON {
		printVariations(w, res.Variations)
	}
	if kept != "" && !asJSON {
		fmt.Fprintf(w, "builds kept in %s\n", kept)
	}
	return &exitError{code: 1, err: fmt.Errorf("%d output(s) differ between the two builds", len(diffs))}
}
