package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/build"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/repo"
)

func init() { register(newBuildCmd) }

// buildFlags are the flags of build and image.
type buildFlags struct {
	sf                      specFlags
	lockPath, out, cacheDir string
	jobs                    int
	sde                     int64
	quiet                   bool
	diskCompressions        []string // image: variants of the raw disk image
}

func (b *buildFlags) add(cmd *cobra.Command) {
	b.sf.add(cmd)
	cmd.Flags().StringVar(&b.lockPath, "lock", "", "lock file (default: <spec dir>/<name>.lock.json)")
	cmd.Flags().StringVarP(&b.out, "out", "o", "", "output directory (default: <spec dir>/out)")
	cmd.Flags().StringVar(&b.cacheDir, "cache", defaultCacheDir(), "package cache directory ($NODEFORGE_CACHE)")
	cmd.Flags().IntVarP(&b.jobs, "jobs", "j", 4, "concurrent downloads")
	cmd.Flags().Int64Var(&b.sde, "source-date-epoch", 0, "timestamp of every output (default: $SOURCE_DATE_EPOCH, else the lock's newest BUILDTIME)")
	cmd.Flags().BoolVarP(&b.quiet, "quiet", "q", false, "print nothing but the outputs and errors")
}

// run builds the release (with the boot media of sch when not nil) and
// returns the report and the output directory.
func (b *buildFlags) run(cmd *cobra.Command, sch *schematic.Schematic) (*report.Report, string, error) {
	s, err := b.sf.load()
	if err != nil {
		return nil, "", err
	}
	dir := s.Dir
	if dir == "" {
		dir = "."
	}
	lockPath, out, sde := b.lockPath, b.out, b.sde
	if lockPath == "" {
		lockPath = filepath.Join(dir, s.Name+".lock.json")
	}
	if out == "" {
		out = filepath.Join(dir, "out")
	}
	l, err := lock.Read(lockPath)
	if err != nil {
		return nil, "", err
	}
	lb, err := os.ReadFile(lockPath)
	if err != nil {
		return nil, "", err
	}
	if sde == 0 {
		if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
			if _, err := fmt.Sscan(v, &sde); err != nil {
				return nil, "", fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number", v)
			}
		}
	}
	stderr := cmd.ErrOrStderr()
	logf := func(format string, a ...any) {
		if !b.quiet {
			fmt.Fprintf(stderr, format+"\n", a...)
		}
	}
	c := &cache.Cache{Timeout: netTimeout, Dir: b.cacheDir, Workers: b.jobs, Progress: downloadProgress(stderr, b.quiet)}
	var shuffle int64
	if v := os.Getenv("NODEFORGE_SHUFFLE"); v != "" {
		fmt.Sscan(v, &shuffle) // set by builder repro
	}
	rep, err := build.Build(cmd.Context(), build.Options{Spec: s, Lock: l, LockBytes: lb, Out: out, Cache: c,
		SourceDateEpoch: sde, Version: version, BuilderSHA256: selfDigest(), Log: logf, Shuffle: shuffle, Schematic: sch, DiskCompressions: b.diskCompressions,
		NoStepCaches: os.Getenv("NODEFORGE_STEP_CACHES") == "off", Source: repo.SourceOptions{Timeout: netTimeout}})
	endProgress(stderr)
	return rep, out, err
}

func newBuildCmd() *cobra.Command {
	var b buildFlags
	cmd := &cobra.Command{
		Use:   "build --spec FILE [--lock FILE] [--out DIR]",
		Short: "Build the node OS from the lock: vmlinuz, initramfs.xz, rootfs.sqsh, cmdline, OCI layout, extensions",
		Long: `build assembles the node OS from the packages the lock pins, and only from
them: it never resolves. Each locked package is fetched through the verified
cache (checked against the sha256 in the lock), its payload laid into an
in-memory file tree that records the package of every path, with no root,
no chroot and nothing of the tree written to the host. Scriptlets are never
run: users and groups, module indexes (depmod), os-release and machine-id are
generated, and every scriptlet not covered is listed in the report.

Outputs, per architecture: OUT/<arch>/{vmlinuz,initramfs.xz,rootfs.sqsh,cmdline,
sbom.spdx.json,sbom.cdx.json}, an OCI image layout at OUT/oci/ annotated with version,
branch and lock digest, the installer image (an OCI layout, one image per
architecture with usr/install/<arch>/{vmlinuz,initramfs.xz,<name>.spdx.json}
and the base's installer binary) at OUT/installer/, each system extension as
an OCI image layout at OUT/extensions/<name>/,
and OUT/report.json listing every file of every artifact with its origin.
Timestamps come from SOURCE_DATE_EPOCH (default: the newest BUILDTIME in the
lock), so the same lock gives the same bytes. A second build reuses the step
caches beside the downloads and recompresses only what changed.`,
		Example: `  builder demo-base /tmp/demo && builder lock --spec /tmp/demo/spec.yaml && builder build --spec /tmp/demo/spec.yaml
  builder build --spec p11.yaml --lock p11.lock.json --out /srv/builds/p11`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, out, err := b.run(cmd, nil)
			if err != nil {
				return err
			}
			printOutputs(cmd.OutOrStdout(), out, rep)
			return nil
		},
	}
	b.add(cmd)
	return cmd
}

// printOutputs lists what a build wrote, with digests.
func printOutputs(w io.Writer, out string, rep *report.Report) {
	names := make([]string, 0, len(rep.Artifacts))
	for n := range rep.Artifacts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a := rep.Artifacts[n]
		fmt.Fprintf(w, "%s  sha256:%s  %d bytes\n", filepath.Join(out, n), a.SHA256, a.Size)
	}
	fmt.Fprintf(w, "%s  %s\n", filepath.Join(out, "oci"), rep.OCIIndex)
	fmt.Fprintf(w, "%s  %s\n", filepath.Join(out, "installer"), rep.Installer)
	ext := make([]string, 0, len(rep.Extensions))
	for n := range rep.Extensions {
		ext = append(ext, n)
	}
	sort.Strings(ext)
	for _, n := range ext {
		fmt.Fprintf(w, "%s  %s\n", filepath.Join(out, "extensions", n), rep.Extensions[n])
	}
	fmt.Fprintf(w, "%s\n", filepath.Join(out, "report.json"))
}
