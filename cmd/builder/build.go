package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/builder"
	"github.com/nodeforge/builder/builder/media/secureboot"
	"github.com/nodeforge/builder/pipeline"
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
	quiet, asJSON           bool
	view                    *progressView // made by options
	diskCompressions        []string      // image: variants of the raw disk image
	platform                string        // image: --platform
	diskFormats             []string      // image: the disk images asked for (nil: the platform's)
	uki                     bool          // image --kind uki without --secureboot: the plain UKI
	secureBootKeys          string        // --secureboot, the Secure Boot key set's directory
	// The reproducibility experiment's knobs (builder repro sets them).
	shuffle      int64
	noStepCaches bool
}

func (b *buildFlags) add(cmd *cobra.Command) {
	b.sf.add(cmd)
	cmd.Flags().StringVar(&b.lockPath, "lock", "", "lock file (default: <spec dir>/<name>.lock.json)")
	cmd.Flags().StringVarP(&b.out, "out", "o", "", "output directory (default: <spec dir>/out)")
	cmd.Flags().StringVar(&b.cacheDir, "cache", defaultCacheDir(), "package cache directory ($NODEFORGE_CACHE)")
	cmd.Flags().IntVarP(&b.jobs, "jobs", "j", 4, "concurrent downloads")
	cmd.Flags().Int64Var(&b.sde, "source-date-epoch", 0, "timestamp of every output (default: $SOURCE_DATE_EPOCH, else the lock's newest BUILDTIME)")
	cmd.Flags().BoolVarP(&b.quiet, "quiet", "q", false, "print nothing but the outputs and errors")
	cmd.Flags().StringVar(&b.secureBootKeys, "secureboot", "", "sign for UEFI Secure Boot with the key set in this directory (builder keys generate --secureboot): a signed UKI per architecture among the boot assets (<arch>/uki.efi); image: the Secure Boot ISO and disk images")
	cmd.Flags().Int64Var(&b.shuffle, "shuffle", 0, "lay packages in an order seeded by N (builder repro: the output must not depend on it)")
	cmd.Flags().BoolVar(&b.noStepCaches, "no-step-caches", false, "build without the step caches (builder repro builds from scratch)")
	cmd.Flags().MarkHidden("shuffle")
	cmd.Flags().MarkHidden("no-step-caches")
}

// options are the build options the flags give for spec s (with the boot
// media of sch when not nil); the spec and the lock are the caller's.
func (b *buildFlags) options(cmd *cobra.Command, s *specs.Spec, sch *schematic.Schematic) (builder.Options, error) {
	out, sde := b.out, b.sde
	if out == "" {
		out = s.OutDir()
	}
	if sde == 0 {
		if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
			if _, err := fmt.Sscan(v, &sde); err != nil {
				return builder.Options{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a number", v)
			}
		}
	}
	var sb *secureboot.Signing
	if b.secureBootKeys != "" {
		var err error
		if sb, err = loadSecureBoot(b.secureBootKeys); err != nil {
			return builder.Options{}, fmt.Errorf("--secureboot: %w", err)
		}
	}
	b.view = newProgressView(cmd.ErrOrStderr(), b.quiet)
	timeout := netTimeout(cmd.Context())
	c := &cache.Cache{Timeout: timeout, Dir: b.cacheDir, Workers: b.jobs, Progress: b.view.cacheEvent}
	return builder.Options{Out: out, Cache: c, SourceDateEpoch: sde, Version: version, BuilderSHA256: selfDigest(),
		Log: b.view.logf, Progress: b.view.update, Shuffle: b.shuffle, Schematic: sch, DiskCompressions: b.diskCompressions, Platform: b.platform, DiskFormats: b.diskFormats, UKI: b.uki,
		NoStepCaches: b.noStepCaches, SecureBoot: sb, Source: repo.SourceOptions{Timeout: timeout}}, nil
}

// run builds the release (with the boot media of sch when not nil) and
// returns the report and the output directory.
func (b *buildFlags) run(cmd *cobra.Command, sch *schematic.Schematic) (*report.Report, string, error) {
	// First: a builder that cannot write a release's bytes says so
	// whatever else is missing.
	if err := builder.CheckBuilder(); err != nil {
		return nil, "", err
	}
	s, err := b.sf.load()
	if err != nil {
		return nil, "", err
	}
	in, err := pipeline.ReadLock(s, b.lockPath)
	if err != nil {
		return nil, "", err
	}
	o, err := b.options(cmd, s, sch)
	if err != nil {
		return nil, "", err
	}
	defer o.SecureBoot.Close()
	o.Spec, o.Lock, o.LockBytes, o.LockPath = s, in.Lock, in.LockBytes, in.LockPath
	collectOften()
	rep, err := builder.Build(cmd.Context(), o)
	b.view.end()
	return rep, o.Out, err
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
an OCI image layout at OUT/extensions/<name>/, each container image of the
spec's images section as an OCI image layout at OUT/images/<name>/ (checked:
its entrypoint, libraries, user and links resolve inside it),
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
			w := cmd.OutOrStdout()
			if err := writeOutputs(w, b.asJSON, out, buildOutputs(out, rep)); err != nil {
				return err
			}
			if !b.asJSON {
				fmt.Fprintf(w, "%s\n", filepath.Join(out, "report.json"))
			}
			return nil
		},
	}
	b.add(cmd)
	b.addJSON(cmd)
	return cmd
}

// addJSON adds --json (build and image; release prints what it published).
func (b *buildFlags) addJSON(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&b.asJSON, "json", false, "print the outputs as JSON (docs/schemas/outputs.schema.json)")
}

// output is one file or image layout a command wrote.
type output struct {
	Path   string `json:"path"`
	Digest string `json:"digest"`         // sha256:HEX of a file; an OCI index digest of a layout
	Size   int64  `json:"size,omitempty"` // a file's bytes
}

// outputsJSON is what build and image print with --json
// (docs/schemas/outputs.schema.json).
type outputsJSON struct {
	Out     string   `json:"out"`
	Outputs []output `json:"outputs"`
}

// writeOutputs prints what a command wrote: one line each, or JSON.
func writeOutputs(w io.Writer, asJSON bool, out string, list []output) error {
	if asJSON {
		return printJSON(w, outputsJSON{Out: out, Outputs: list})
	}
	for _, o := range list {
		if o.Size > 0 {
			fmt.Fprintf(w, "%s  %s  %d bytes\n", o.Path, o.Digest, o.Size)
		} else {
			fmt.Fprintf(w, "%s  %s\n", o.Path, o.Digest)
		}
	}
	return nil
}

// buildOutputs lists what a build wrote, with digests.
func buildOutputs(out string, rep *report.Report) []output {
	list := []output{}
	for _, n := range slices.Sorted(maps.Keys(rep.Artifacts)) {
		a := rep.Artifacts[n]
		list = append(list, output{Path: filepath.Join(out, n), Digest: "sha256:" + a.SHA256, Size: a.Size})
	}
	list = append(list, output{Path: filepath.Join(out, "oci"), Digest: rep.OCIIndex}, output{Path: filepath.Join(out, "installer"), Digest: rep.Installer})
	for _, n := range slices.Sorted(maps.Keys(rep.Extensions)) {
		list = append(list, output{Path: filepath.Join(out, "extensions", n), Digest: rep.Extensions[n]})
	}
	for _, n := range slices.Sorted(maps.Keys(rep.Images)) {
		list = append(list, output{Path: filepath.Join(out, filepath.FromSlash(builder.ImagesDir(n))), Digest: rep.Images[n]})
	}
	return list
}
