package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/build"
)

func init() { register(newReproCmd) }

// reproVariant is one of the two builds: everything a build must not
// depend on is set differently in each.
type reproVariant struct {
	tz, lang, umask string
	procs           int
	shuffle         int64
}

func newReproCmd() *cobra.Command {
	var sf specFlags
	var lockPath, cacheDir, keep, schematicPath string
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
				lockPath = filepath.Join(s.Dir, s.Name+".lock.json")
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
			variants := []reproVariant{
				{tz: "UTC", lang: "C", umask: "022", procs: 1, shuffle: 0},
				{tz: "Asia/Kathmandu", lang: "ru_RU.UTF-8", umask: "077", procs: runtime.NumCPU() + 3, shuffle: 7},
			}
			stderr := cmd.ErrOrStderr()
			var outs []string
			for i, v := range variants {
				work := filepath.Join(root, fmt.Sprintf("build-%d", i+1))
				home := filepath.Join(root, fmt.Sprintf("home-%d", i+1))
				out := filepath.Join(work, "out")
				for _, d := range []string{work, home} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						return err
					}
				}
				fmt.Fprintf(stderr, "build %d: TZ=%s LANG=%s umask %s GOMAXPROCS=%d shuffle=%d\n", i+1, v.tz, v.lang, v.umask, v.procs, v.shuffle)
				// umask is set by the shell that starts the build.
				args := []string{"build"}
				if schematicPath != "" {
					abs, _ := filepath.Abs(schematicPath)
					args = []string{"image", "--schematic", abs, "--kind", "pxe", "--compress", "zst,xz"}
				}
				args = append(args, "-q", "--spec", specPath, "--lock", lockPath, "--out", out, "--cache", cacheDir)
				c := exec.Command("/bin/sh", append([]string{"-c", fmt.Sprintf("umask %s && exec \"$0\" \"$@\"", v.umask), self}, args...)...)
				c.Dir = work
				c.Env = append(filteredEnv(), "TZ="+v.tz, "LANG="+v.lang, "LC_ALL="+v.lang, "HOME="+home,
					fmt.Sprintf("GOMAXPROCS=%d", v.procs), fmt.Sprintf("NODEFORGE_SHUFFLE=%d", v.shuffle), "NODEFORGE_STEP_CACHES=off")
				c.Stdout = io.Discard
				c.Stderr = stderr
				if err := c.Run(); err != nil {
					return fmt.Errorf("build %d failed: %w", i+1, err)
				}
				outs = append(outs, out)
			}
			diffs, err := build.Compare(outs[0], outs[1])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if len(diffs) == 0 {
				n := 0
				filepath.WalkDir(outs[0], func(_ string, d fs.DirEntry, err error) error {
					if err == nil && d.Type().IsRegular() {
						n++
					}
					return nil
				})
				fmt.Fprintf(w, "reproducible: both builds identical (%d files compared)\n", n)
				return nil
			}
			for _, d := range diffs {
				fmt.Fprintf(w, "DIFFERS %s: %s\n", d.Artifact, d.Detail)
				for _, f := range d.Inside {
					fmt.Fprintf(w, "    %s\n", f)
				}
			}
			if keep != "" {
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
	return cmd
}

// filteredEnv is the environment without what the variants set.
func filteredEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "TZ", "LANG", "LC_ALL", "HOME", "GOMAXPROCS", "NODEFORGE_SHUFFLE", "SOURCE_DATE_EPOCH", "NODEFORGE_STEP_CACHES":
			continue
		}
		out = append(out, kv)
	}
	return out
}
