package builder

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/api/target"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/builder/compressors"
	"github.com/nodeforge/builder/builder/media/secureboot"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/builder/rootfs/sqfs"
	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/internal/blobcache"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/internal/flock"
	"github.com/nodeforge/builder/internal/hugepage"
	"github.com/nodeforge/builder/internal/progress"
	"github.com/nodeforge/builder/internal/workdir"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/cpio"
	"github.com/nodeforge/builder/pkgbase/repo"
)

// Options of a build.
type Options struct {
	Spec      *specs.Spec
	Lock      *lock.Lock
	LockBytes []byte // the lock file as read, for its digest
	Out       string
	Cache     *cache.Cache
	Source    repo.SourceOptions
	// LockPath is the file Lock was read from ("" for none): its relative
	// repository URLs are from there (lock.Lock.Base).
	LockPath string
	// SourceDateEpoch overrides the lock's (the newest BUILDTIME).
	SourceDateEpoch int64
	Squashfs        rootfs.SquashfsOptions
	Version         string // the builder's own version, for the report
	// BuilderSHA256 is the digest of the builder's executable. With it and
	// a cache directory, a build whose inputs and output did not change
	// since the last build into Out returns that build's report at once
	// (see uptodate.go).
	BuilderSHA256 string
	// Schematic, when set, adds the boot media of that customisation:
	// OUT/media/<schematic id>/{kernel,initramfs,cmdline,ipxe}-<arch>, the
	// initramfs with the schematic's extensions appended.
	Schematic *schematic.Schematic
	// NoStepCaches builds without the step caches (laid packages,
	// squashfs blocks): builder repro proves two builds agree from scratch.
	NoStepCaches bool
	// Platform is where the schematic's media are for (api/platform; ""
	// is metal): its kernel arguments and its name in the file names.
	Platform string
	// DiskFormats are the disk images of the schematic's media (iso, raw,
	// qcow2, vhd, raw.tar.gz); nil is the platform's own list, empty none
	// (builder image builds only the kinds asked for).
	DiskFormats []string
	// DiskCompressions are the compressed variants of the ISO, raw and VHD
	// images to write besides them: "zst", "xz".
	DiskCompressions []string
	// UKI adds the schematic's plain (unsigned) UKI,
	// <platform>-<arch>-uki.efi (see compose.Options.UKI).
	UKI bool
	// SecureBoot, when set, signs the schematic's ISO and disk images for
	// UEFI Secure Boot with this key set (see compose.SecureBoot): they
	// boot a signed UKI made with the base's systemd-stub (image.stub).
	SecureBoot *secureboot.Signing
	// Shuffle, when not 0, lays packages in a pseudo-random order (seeded)
	// to prove the output does not depend on it (builder repro).
	Shuffle int64
	Log     func(format string, args ...any)
	// Progress hears how far the long steps are (laying packages, writing
	// rootfs.sqsh).
	Progress progress.Func
}

// thisCompressors are the compressors of this builder (tests inject
// others).
var thisCompressors = compressors.This

// CheckBuilder is nil when this builder writes a release's bytes, and
// otherwise the one-line refusal that says what it lacks (a builder
// built without cgo compresses squashfs blocks with another zstd) and how
// to build one that can. Build, Reproduce and the release pipeline call
// it before anything else.
func CheckBuilder() error {
	return compressors.Refusal(thisCompressors())
}

// Build builds every architecture of the lock into opts.Out:
// <arch>/{vmlinuz,initramfs.xz,rootfs.sqsh,cmdline}, oci/ and report.json.
// It works in a temporary directory beside Out and moves the result into
// place at the end, so a failure leaves Out as it was. A builder that
// cannot write a release's bytes refuses (CheckBuilder).
func Build(ctx context.Context, opts Options) (*report.Report, error) {
	if err := CheckBuilder(); err != nil {
		return nil, err
	}
	r, err := newRun(opts)
	if err != nil {
		return nil, err
	}
	out, err := ResolveOutput(opts.Out)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return nil, err
	}
	var key, stampFile string
	if opts.Cache != nil && opts.Cache.Dir != "" {
		if key, err = buildKey(r.opts, r.sde); err != nil {
			return nil, err
		}
		stampFile = stampPath(opts.Cache.Dir, out)
	}
	// The build works beside its output and swaps the result in at the
	// end; a work directory a killed build left is swept here, also when
	// the output is up to date (a build killed after its swap, before it
	// removed the output it replaced, leaves one beside a current output).
	workPrefix := "." + filepath.Base(out) + ".build-"
	if key != "" {
		if err := workdir.Sweep(filepath.Dir(out), workPrefix); err != nil {
			r.logf("what a killed build left beside %s was not removed: %v", out, err)
		}
		if rep, err := unchanged(ctx, r.opts, stampFile, out, key, r.logf); rep != nil || err != nil {
			return rep, err
		}
	}
	wd, err := workdir.New(filepath.Dir(out), workPrefix)
	if err != nil {
		return nil, err
	}
	defer wd.Close()
	r.work = wd.Path
	// Step caches beside the downloads: laid packages and compressed
	// squashfs blocks, both keyed by content digests.
	if opts.Cache != nil && opts.Cache.Dir != "" && !opts.NoStepCaches {
		if r.layCache, err = rootfs.OpenLayCache(filepath.Join(opts.Cache.Dir, "laid")); err != nil {
			return nil, err
		}
		defer r.layCache.Wait()
		if r.spec.Image.SquashfsWriter == "go" {
			if r.blocks, err = blobcache.OpenPacks(filepath.Join(opts.Cache.Dir, "squashfs-packs")); err != nil {
				return nil, err
			}
			defer r.blocks.Close()
		}
	}
	arches := slices.Sorted(maps.Keys(r.lock.Architectures))
	for _, arch := range arches {
		if err := r.buildArch(ctx, arch); err != nil {
			return nil, err
		}
	}
	done := step(r.logf, "writing the OCI layouts and report.json")
	if err := r.writeImages(ctx, arches); err != nil {
		return nil, err
	}
	rb, err := json.MarshalIndent(r.rep, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(filepath.Join(r.work, "report.json"), append(rb, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	done()
	// The stamp describes the work directory, which becomes the output; it
	// is written with the swap, under the same lock, so it can only ever
	// name the output that is in place.
	var st *stamp
	if key != "" {
		if st, err = newStamp(ctx, r.work, key, r.rep.Artifacts); err != nil {
			r.logf("no build stamp (the next build runs in full): %v", err)
		}
	}
	if err := swapOutput(ctx, r.work, out, func() {
		if st != nil {
			if err := st.write(stampFile); err != nil {
				r.logf("no build stamp (the next build runs in full): %v", err)
			}
		}
	}); err != nil {
		return nil, err
	}
	return r.rep, nil
}

// buildRun is one build in progress: what it builds from, where it works,
// its step caches, the report it fills in and the parts of the OCI images
// each architecture adds.
type buildRun struct {
	opts     Options
	spec     *specs.Spec
	lock     *lock.Lock
	sde      int64 // the source date of every timestamp
	work     string
	logf     func(string, ...any)
	layCache *rootfs.LayCache // nil without step caches
	blocks   *blobcache.Packs // nil without step caches or with tar2sqfs
	rep      *report.Report

	assets         map[string][]ociAsset                     // arch -> boot assets
	extLayers      map[string]map[string]*compose.ImageLayer // extension -> arch -> layer
	extVersions    map[string]string
	extDescs       map[string]map[string]string    // extension -> language -> description
	installer      map[string][]v1.Layer           // arch -> installer layers
	kernels        map[string]compose.KernelParams // arch -> its kernel, for the media
	mediaInstaller map[string][]v1.Layer           // arch -> the schematic's installer layers
	sbInstaller    map[string][]v1.Layer           // arch -> the schematic's Secure Boot installer layers
	containers     map[string]map[string]v1.Layer  // container image -> arch -> its layer
}

// newRun checks that the spec and the lock belong together and settles
// the build's defaults.
func newRun(opts Options) (*buildRun, error) {
	s, l := opts.Spec, opts.Lock
	if err := CheckLock(s, l); err != nil {
		return nil, err
	}
	if opts.Schematic != nil {
		if err := checkSchematic(s, opts); err != nil {
			return nil, err
		}
	}
	r := &buildRun{opts: opts, spec: s, lock: l, sde: opts.SourceDateEpoch, logf: opts.Log,
		assets: map[string][]ociAsset{}, extLayers: map[string]map[string]*compose.ImageLayer{}, extVersions: map[string]string{}, extDescs: map[string]map[string]string{},
		installer: map[string][]v1.Layer{}, mediaInstaller: map[string][]v1.Layer{}, sbInstaller: map[string][]v1.Layer{}, kernels: map[string]compose.KernelParams{},
		containers: map[string]map[string]v1.Layer{}}
	if r.logf == nil {
		r.logf = func(string, ...any) {}
	}
	if r.sde == 0 {
		r.sde = l.SourceDateEpoch
	}
	sqTool := "nodeforge rootfs/sqfs " + opts.Version
	if s.Image.SquashfsWriter != "go" {
		var err error
		if sqTool, err = rootfs.SquashfsTool(opts.Squashfs); err != nil {
			return nil, err
		}
	}
	r.opts.Squashfs.Compressor, r.opts.Squashfs.Level = s.Image.Compression, s.Image.CompressionLevel
	if r.opts.Squashfs.Jobs == 0 {
		// Compressor threads do not change the bytes (tested), only the time.
		r.opts.Squashfs.Jobs = runtime.NumCPU()
	}
	r.rep = &report.Report{
		Spec:            report.SpecInfo{Name: s.Name, Branch: s.Branch, Version: s.Version, SHA256: l.Spec.SHA256},
		LockSHA256:      digest.SHA256Hex(opts.LockBytes),
		SourceDateEpoch: r.sde,
		Builder:         opts.Version,
		Tools:           map[string]string{"squashfs": fmt.Sprintf("%s (%s level %d)", sqTool, s.Image.Compression, s.Image.CompressionLevel)},
		Compressors:     compressors.Map(thisCompressors()),
		Architectures:   map[string]*report.ArchReport{},
		Generators:      generatorDocs,
		Artifacts:       map[string]report.ArtifactInfo{},
	}
	if len(s.Images) > 0 || opts.Schematic != nil {
		r.rep.Generators = maps.Clone(generatorDocs)
	}
	if len(s.Images) > 0 {
		maps.Copy(r.rep.Generators, containerGenerators)
	}
	if opts.Schematic != nil {
		// The media's initramfs segment (the architectures' media lists).
		maps.Copy(r.rep.Generators, compose.SegmentGenerators)
	}
	return r, nil
}

// checkSchematic refuses, before any work, the schematic media a build
// would make only to fail on them once per architecture: a platform the
// spec's table lacks, an extension outside the spec's namespace, an
// embedded configuration the spec's version does not read (as the
// factory), and what the command line, PXE script and installer every
// media build makes cannot honour (compose.Media checks the disk images,
// which depend on the base).
func checkSchematic(s *specs.Spec, opts Options) error {
	table, err := s.Image.PlatformTable()
	if err != nil {
		return err
	}
	if _, err := table.Lookup(opts.Platform); err != nil {
		return err
	}
	// The schematic names extensions as the release's clients do: in the
	// spec's namespace, an alias of it, or bare.
	ns := schematic.Namespace{Name: s.ExtensionsNamespace, Aliases: s.ExtensionAliases}
	for _, e := range opts.Schematic.Customization.SystemExtensions.OfficialExtensions {
		if _, ok := ns.Resolve(e); !ok {
			return fmt.Errorf("schematic: extension %q is not in the namespace of the spec's extensions (%s)", e, ns.Qualified("NAME"))
		}
	}
	if err := compose.EmbeddedConfigRefusal(opts.Schematic, compose.Output{Kind: "installer"}, s.Version); err != nil {
		return err
	}
	for _, kind := range []string{"cmdline", "installer"} {
		if err := compose.Refusal(opts.Schematic, compose.Output{Kind: kind, SecureBoot: opts.SecureBoot != nil}); err != nil {
			return err
		}
	}
	return nil
}

// blockCache is the squashfs block cache as the writers take it (a nil
// *Packs must stay a nil interface).
func (r *buildRun) blockCache() sqfs.BlockCache {
	if r.blocks == nil {
		return nil
	}
	return r.blocks
}

// archBuild is the build of one architecture: the lock's packages of it,
// fetched, and what the build has made of them so far.
type archBuild struct {
	*buildRun
	arch   string
	target target.Arch // what the builder knows of arch
	locked *lock.Arch
	paths  map[string]string // NEVRA -> the fetched, verified package
	as     *assembly
	owners rootfs.Owners
	exts   []*extensionBuild
	// The EFI boot manager of the base (image.bootloader), or why there is
	// none: no ISO or disk image then.
	bootloaderData []byte
	bootloaderPkg  string
	noBootloader   error
	// The base's systemd-stub (image.stub), when it has one: the
	// installer carries it for Secure Boot media.
	stubData []byte
	stubPkg  string
	uki      *report.UKIReport // the release's signed UKI, with Secure Boot
}

// newArchBuild starts the build of one architecture of the run.
func (r *buildRun) newArchBuild(arch string) (*archBuild, error) {
	ta, err := target.Lookup(arch)
	if err != nil {
		return nil, err
	}
	return &archBuild{buildRun: r, arch: arch, target: ta, locked: r.lock.Architectures[arch]}, nil
}

// buildArch builds one architecture: its root filesystem, extensions,
// initramfs, boot media and installer, into the work directory and the
// report.
func (r *buildRun) buildArch(ctx context.Context, arch string) error {
	b, err := r.newArchBuild(arch)
	if err != nil {
		return err
	}
	if err := b.layRoot(ctx); err != nil {
		return err
	}
	initData, initPkg, err := initFile(b.spec, b.locked, b.paths, b.layCache)
	if err != nil {
		return fmt.Errorf("%s: %w", arch, err)
	}
	dir := filepath.Join(r.work, arch)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b.owners = b.as.accounts.Owners()
	r.kernels[arch] = compose.KernelParams{Version: b.as.kernel.Version, ModulesDir: b.as.kernel.modDir}
	// An EFI binary is data to Linux: Debian ships systemd-bootaa64.efi
	// mode 0644.
	if b.bootloaderData, b.bootloaderPkg, b.noBootloader = lockedData(b.spec.Image.Bootloader.ForEFIArch(b.target.EFI), "image.bootloader", false, b.locked, b.paths, b.layCache); b.noBootloader != nil {
		b.bootloaderData = nil
	}
	if err := b.readStub(); err != nil {
		return err
	}
	if b.exts, err = b.buildExtensions(); err != nil {
		return fmt.Errorf("%s: %w", arch, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	sqsh, rootfsEntries, err := b.writeRootfs(ctx, dir)
	if err != nil {
		return err
	}
	done := step(r.logf, "%s: writing initramfs.xz, the installer and the reports", arch)
	entries := initramfsEntries(initData, initPkg, b.as.kernel, sqsh)
	// The squashfs is hashed once, on the other core while the one-threaded
	// compressor runs; every record of it takes that digest.
	sqshSum := make(chan [32]byte, 1)
	go func() { sqshSum <- sha256.Sum256(sqsh) }()
	initramfs, err := compose.CompressInitramfs(b.spec.Image.InitramfsCompression, len(sqsh), func(w io.Writer) error {
		return rootfs.WriteCpio(w, entries, r.sde)
	})
	a := assetData{sqshSize: int64(len(sqsh)), sqshSum: <-sqshSum, initramfs: initramfs}
	if err != nil {
		return err
	}
	// The report's list of the initramfs: past it nothing holds the
	// squashfs's bytes (the file is written, its digest known), which go
	// before the installer's are made.
	initramfsList := initramfsReport(entries, a.sqshSum)
	var media *mediaResult
	if r.opts.Schematic != nil {
		if media, err = b.schematicMedia(ctx, initramfs); err != nil {
			return err
		}
	}
	b.releaseTree()
	if a.spdx, a.cdx, err = nodeSBOM(b.spec, b.lock, b.arch, b.as.packages, b.rep.LockSHA256, b.sde, "nodeforge-builder-"+b.opts.Version); err != nil {
		return err
	}
	// The installer's layer (a tar and its gzip stream, one core) is made
	// while the boot assets are hashed and written and the report is
	// made: they share no state but the inputs both only read.
	var g errgroup.Group
	g.Go(func() error { return b.installers(a.spdx, initramfs, media) })
	var ar *report.ArchReport
	if err = b.bootAssets(dir, a); err == nil {
		ar, err = b.archReport(initPkg, rootfsEntries, initramfsList, media)
	}
	if gerr := g.Wait(); err == nil {
		err = gerr
	}
	if err != nil {
		return err
	}
	if err := b.buildContainers(ctx, ar); err != nil {
		return err
	}
	r.rep.Architectures[arch] = ar
	done()
	return nil
}

// layRoot fetches the architecture's packages and lays the root
// filesystem.
func (b *archBuild) layRoot(ctx context.Context) error {
	var err error
	done := step(b.logf, "%s: fetching %d locked packages", b.arch, len(b.locked.Packages))
	if b.paths, err = fetchArch(ctx, b.opts, b.locked); err != nil {
		return err
	}
	done()
	done = step(b.logf, "%s: assembling the root filesystem", b.arch)
	// While packages are read (decompressed, checked) on every core, the
	// squashfs blocks of the files already read are compressed on every
	// core too: the operating system shares the cores among them, and
	// none waits for the other.
	var layOpts rootfs.LayOptions
	stage := b.arch + ": laying packages"
	var laid, total, bytes int64
	layOpts.OnPackage = func(n, of int, r *rootfs.PackageResult) {
		laid, total = int64(n), int64(of)
		bytes += r.Bytes
		b.opts.Progress.Send(progress.Update{Stage: stage, Unit: "packages", Done: laid, Total: total, Bytes: bytes})
	}
	defer func() {
		b.opts.Progress.Send(progress.Update{Stage: stage, Unit: "packages", Done: laid, Total: total, Bytes: bytes, Finished: true})
	}()
	var pre *rootfs.Precompressor
	if b.blocks != nil {
		if pre, err = rootfs.NewPrecompressor(b.opts.Squashfs, b.blocks, b.opts.Squashfs.Jobs); err != nil {
			return err
		}
		layOpts.OnFile = pre.Add
	}
	b.as, err = assemble(ctx, b.spec, b.arch, b.locked, b.paths, layInputs{b.opts.Shuffle, b.layCache, layOpts})
	if pre != nil {
		pre.Stop()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", b.arch, err)
	}
	done()
	return nil
}

// writeRootfs writes rootfs.sqsh and returns its bytes and its file list.
func (b *archBuild) writeRootfs(ctx context.Context, dir string) ([]byte, []report.FileEntry, error) {
	done := step(b.logf, "%s: writing rootfs.sqsh (%d paths)", b.arch, b.as.tree.Len())
	sqPath := filepath.Join(dir, "rootfs.sqsh")
	stage, paths := b.arch+": writing rootfs.sqsh", int64(b.as.tree.Len())
	b.opts.Progress.Send(progress.Update{Stage: stage, Unit: "paths", Total: paths})
	defer func() {
		var size int64
		if fi, err := os.Stat(sqPath); err == nil {
			size = fi.Size()
		}
		b.opts.Progress.Send(progress.Update{Stage: stage, Unit: "paths", Done: paths, Total: paths, Bytes: size, Finished: true})
	}()
	var err error
	if b.spec.Image.SquashfsWriter == "go" {
		err = b.as.tree.WriteSquashfsGo(sqPath, b.owners, b.sde, b.opts.Squashfs, b.blockCache())
		if b.blocks != nil {
			if ferr := b.blocks.Flush(); ferr != nil {
				b.logf("%s: the squashfs block cache was not written: %v", b.arch, ferr)
			}
		}
	} else {
		err = b.as.tree.WriteSquashfs(ctx, sqPath, b.owners, b.sde, b.opts.Squashfs)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", b.arch, err)
	}
	done()
	entries, err := treeEntries(b.as.tree, b.owners)
	if err != nil {
		return nil, nil, err
	}
	if b.opts.Schematic == nil {
		b.releaseTree() // the boot media would still need it
	}
	// Into huge pages: the tree's memory went back to the system just above.
	sqsh, err := hugepage.ReadFile(sqPath)
	if err != nil {
		return nil, nil, err
	}
	return sqsh, entries, nil
}

// releaseTree lets the contents of the whole root go before the next
// large buffers. The collection is cheap (file contents hold no pointers)
// and keeps the peak near the live data rather than twice that.
func (b *archBuild) releaseTree() {
	if b.as.tree != nil {
		b.as.tree = nil
		debug.FreeOSMemory()
	}
}

// schematicMedia writes the boot media of the build's schematic and
// records them in the report (newRun checked the schematic).
func (b *archBuild) schematicMedia(ctx context.Context, initramfs []byte) (*mediaResult, error) {
	// The EFI boot manager comes from the base like everything else;
	// without it in the lock, no ISO or disk image.
	berr := b.noBootloader
	if berr != nil {
		b.logf("%s: no ISO or disk image: %v", b.arch, berr)
	}
	mr, err := b.writeMedia(ctx, filepath.Join(b.work, "media"), initramfs, b.bootloaderData)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.arch, err)
	}
	rep := b.rep
	if rep.Media == nil {
		rep.Media = &report.MediaReport{Schematic: mr.Schematic, Platform: mr.Platform, Extensions: b.opts.Schematic.Extensions(), Files: map[string]report.ArtifactInfo{}}
	}
	if mr.ISOTool != "" {
		rep.Tools["iso"] = mr.ISOTool
	} else if berr != nil {
		rep.Media.NoDiskImages = berr.Error()
	}
	for k, v := range mr.Files {
		rep.Media.Files[k] = v
	}
	if b.opts.SecureBoot != nil {
		if err := b.recordSecureBoot(rep.Media, mr.PCR11); err != nil {
			return nil, err
		}
	}
	return mr, nil
}

// assetData is what the boot assets are made of: the root filesystem and
// its digest, the initramfs and the SBOMs.
type assetData struct {
	initramfs, spdx, cdx []byte
	sqshSum              [32]byte
	sqshSize             int64
}

// bootAssets writes the architecture's boot assets and SBOMs into dir
// (rootfs.sqsh is there already) and records them for the OCI layout and
// the report.
func (b *archBuild) bootAssets(dir string, a assetData) error {
	files := []ociAsset{
		{name: "sbom.spdx.json", mediaType: compose.MediaTypeSPDX, data: a.spdx},
		{name: "sbom.cdx.json", mediaType: compose.MediaTypeCycloneDX, data: a.cdx},
		{name: "vmlinuz", mediaType: compose.MediaTypeVmlinuz, data: b.as.kernel.vmlinuz},
		{name: "initramfs.xz", mediaType: compose.MediaTypeInitramfs, data: a.initramfs},
		{name: "rootfs.sqsh", mediaType: compose.MediaTypeRootfs, digest: a.sqshSum, size: a.sqshSize},
		{name: "cmdline", mediaType: compose.MediaTypeCmdline, data: []byte(b.cmdline())},
	}
	if b.opts.SecureBoot != nil {
		u, err := b.releaseUKI(a.initramfs)
		if err != nil {
			return err
		}
		files = append(files, ociAsset{name: compose.ReleaseUKIName, mediaType: compose.MediaTypeUKI, data: u})
	}
	for i := range files {
		f := &files[i]
		if f.digest == ([32]byte{}) {
			f.digest = sha256.Sum256(f.data)
		}
		f.file = filepath.Join(dir, f.name)
		if f.name != "rootfs.sqsh" {
			f.size = int64(len(f.data))
			// The layout links it, synced: to disk now, beside the rest.
			if err := atomicfile.WriteFileAhead(f.file, f.data, 0o644); err != nil {
				return err
			}
		}
		// The layout links the file: the bytes may go.
		f.data = nil
		b.rep.Artifacts[b.arch+"/"+f.name] = report.ArtifactInfo{SHA256: hex.EncodeToString(f.digest[:]), Size: f.size}
	}
	b.assets[b.arch] = files
	return nil
}

// cmdline is the kernel command line of the image, as the cmdline file
// holds it.
func (b *archBuild) cmdline() string { return strings.Join(b.spec.Image.Cmdline, " ") + "\n" }

// installers makes the installer image's layers of the architecture, and
// the schematic's when there are boot media.
func (b *archBuild) installers(spdx, initramfs []byte, media *mediaResult) error {
	instBin, instPkg, err := lockedFile(b.spec.Image.Installer, "image.installer", b.locked, b.paths, b.layCache)
	if err != nil {
		return fmt.Errorf("%s: %w", b.arch, err)
	}
	// The plain installer is metal's (as Talos's): its UKI has metal's
	// command line.
	boot, _, o := b.composeInputs(initramfs, b.bootloaderData, "")
	o.Schematic, o.Platform = nil, ""
	u, err := compose.InstallerUKI(boot, bytes.NewReader(initramfs), o)
	if err != nil {
		return fmt.Errorf("%s: %w", b.arch, err)
	}
	var uki rootfs.Body // a nil *uki.Image is no body
	if u != nil {
		uki = u
	}
	base := installerFiles{bin: instBin, binPkg: instPkg, bootloader: b.bootloaderData, bootloaderPkg: b.bootloaderPkg, stub: b.stubData, stubPkg: b.stubPkg}
	if ref := b.spec.Image.Talosctl; ref != nil {
		if base.talosctl, base.talosctlPkg, err = lockedFile(*ref, "image.talosctl", b.locked, b.paths, b.layCache); err != nil {
			return fmt.Errorf("%s: %w", b.arch, err)
		}
	}
	bin, writeAssets, err := installerLayers(b.arch, b.spec.Name, b.as.kernel.vmlinuz, initramfs, spdx, uki, base, b.sde)
	if err != nil {
		return err
	}
	binLayer, err := compose.NewImageLayer(bin)
	if err != nil {
		return err
	}
	// The boot assets' layer streams into a file of the work directory
	// that the installer's layout links as its blob (writeImages removes
	// the name).
	al, err := compose.NewFileLayer(installerLayerFile(b.work, b.arch), writeAssets)
	if err != nil {
		return fmt.Errorf("%s: installer layer: %w", b.arch, err)
	}
	b.installer[b.arch] = []v1.Layer{binLayer, al}
	if media == nil || media.Initramfs == nil {
		return nil
	}
	// The schematic's layers are made from the plain layer's tar.
	var ab bytes.Buffer
	if err := writeAssets(&ab); err != nil {
		return err
	}
	assets := ab.Bytes()
	// The schematic's installer: the same, with its initramfs, made as the
	// Image Factory makes it from the release's.
	o.Schematic = b.opts.Schematic
	in := compose.InstallerAssets{Initramfs: bytes.NewReader(media.Initramfs)}
	if uki != nil {
		su, err := compose.InstallerUKI(boot, bytes.NewReader(media.Initramfs), o)
		if err != nil {
			return err
		}
		in.UKI = su // not nil: the plain one was made
	}
	ml, err := schematicLayer(assets, b.arch, in, b.sde)
	if err != nil {
		return err
	}
	b.mediaInstaller[b.arch] = []v1.Layer{binLayer, ml}
	if media.ESP != nil {
		// The Secure Boot installer: the signed ESP for the unsigned boot code.
		sl, err := schematicLayer(assets, b.arch, compose.InstallerAssets{Initramfs: bytes.NewReader(media.Initramfs), ESP: media.ESP}, b.sde)
		if err != nil {
			return err
		}
		b.sbInstaller[b.arch] = []v1.Layer{binLayer, sl}
	}
	return nil
}

// installerLayerFile is where the installer's layer of arch is made, in
// the work directory, until its layout holds it.
func installerLayerFile(work, arch string) string {
	return filepath.Join(work, ".installer-"+arch+".layer")
}

// schematicLayer is a schematic's installer layer (compose.SchematicInstaller).
func schematicLayer(assets []byte, arch string, in compose.InstallerAssets, sde int64) (*compose.ImageLayer, error) {
	l, err := compose.SchematicInstaller(assets, arch, in, sde)
	if err != nil {
		return nil, err
	}
	return compose.NewImageLayer(l)
}

// archReport is the report of the architecture; it also collects the
// extension layers for their images.
func (b *archBuild) archReport(initPkg string, rootfsEntries, initramfs []report.FileEntry, media *mediaResult) (*report.ArchReport, error) {
	as := b.as
	ar := &report.ArchReport{Packages: as.packages, Kernel: &as.kernel.KernelInfo, Cmdline: strings.TrimSpace(b.cmdline()), Init: initPkg,
		Scriptlets: as.scriptlets, Triggers: as.triggers, Ghosts: as.ghosts, Dropped: as.drops, Policy: as.policy, Libraries: as.libraries}
	if media != nil {
		ar.Media = media.Layers
	}
	ar.UKI = b.uki
	for _, sc := range as.scriptlets {
		if !sc.Handled {
			ar.Unhandled++
		}
	}
	ar.Unhandled += len(as.triggers)
	ar.Rootfs = rootfsEntries
	for _, eb := range b.exts {
		if ar.Extensions == nil {
			ar.Extensions = map[string]*report.ExtensionReport{}
		}
		ar.Extensions[eb.name] = eb.report
		if b.extLayers[eb.name] == nil {
			b.extLayers[eb.name] = map[string]*compose.ImageLayer{}
		}
		l, err := compose.NewImageLayer(eb.layer)
		if err != nil {
			return nil, err
		}
		b.extLayers[eb.name][b.arch] = l
		d, _ := l.Digest()
		eb.report.Layer = d.String()
		if v, ok := b.extVersions[eb.name]; ok && v != eb.version {
			return nil, fmt.Errorf("extension %s: version %s on %s, %s on another architecture", eb.name, eb.version, b.arch, v)
		}
		b.extVersions[eb.name] = eb.version
		b.extDescs[eb.name] = eb.descriptions
	}
	ar.Initramfs = initramfs
	return ar, nil
}

// initramfsReport lists the initramfs's entries for the report;
// rootfs.sqsh has the digest sqshSum.
func initramfsReport(entries []rootfs.CpioEntry, sqshSum [32]byte) []report.FileEntry {
	var out []report.FileEntry
	for _, e := range entries {
		var sum string
		if e.Name == "rootfs.sqsh" {
			sum = hex.EncodeToString(sqshSum[:])
		} else {
			sum = fileDigest(e)
		}
		out = append(out, report.FileEntry{Path: "/" + e.Name, Type: cpioType(e.Mode), Mode: fmt.Sprintf("%04o", e.Mode&0o7777), Size: int64(len(e.Data)), SHA256: sum, Origin: e.Origin})
	}
	return out
}

// writeImages writes the OCI layouts of every architecture's boot assets,
// the installer (and the schematic's), and each extension.
func (r *buildRun) writeImages(ctx context.Context, arches []string) error {
	s, rep, sde := r.spec, r.rep, r.sde
	ann := map[string]string{
		"org.opencontainers.image.version":  s.Version,
		"org.opencontainers.image.title":    s.Name,
		"dev.nodeforge.branch":              s.Branch,
		"dev.nodeforge.lock.digest":         "sha256:" + rep.LockSHA256,
		"dev.nodeforge.source-date-epoch":   fmt.Sprint(sde),
		"org.opencontainers.image.revision": "sha256:" + rep.LockSHA256,
	}
	// What the Image Factory needs to make media from the release.
	sq := r.opts.Squashfs
	params, err := compose.Params{Architectures: arches, PrettyName: s.Image.OS.PrettyName, Cmdline: s.Image.Cmdline,
		InitramfsCompression: s.Image.InitramfsCompression, Kernel: r.kernels,
		KernelParamPrefix: s.Image.KernelParamPrefix, Platforms: s.Image.Platforms,
		Squashfs: compose.SquashfsParams{Compressor: sq.Compressor, Level: sq.Level, BlockSize: sq.BlockSize}}.Annotation()
	if err != nil {
		return err
	}
	ann[compose.AnnotationParams] = params
	// How Image Factory clients name the extensions; absent: the default.
	if s.ExtensionsNamespace != "" {
		ann[schematic.AnnotationNamespace] = s.ExtensionsNamespace
	}
	if len(s.ExtensionAliases) > 0 {
		ann[schematic.AnnotationAliases] = strings.Join(s.ExtensionAliases, ",")
	}
	idx, err := writeOCILayout(ctx, filepath.Join(r.work, "oci"), sde, ann, arches, r.assets)
	if err != nil {
		return err
	}
	rep.OCIIndex = idx.String()
	ia := map[string]string{
		"org.opencontainers.image.title":    s.Name + "-installer",
		"org.opencontainers.image.version":  s.Version,
		"org.opencontainers.image.created":  time.Unix(sde, 0).UTC().Format(time.RFC3339),
		"org.opencontainers.image.revision": "sha256:" + rep.LockSHA256,
		"dev.nodeforge.branch":              s.Branch,
	}
	inst, err := writeImageLayout(ctx, filepath.Join(r.work, "installer"), sde, ia, arches, r.installer, compose.InstallerEntrypoint)
	if err != nil {
		return fmt.Errorf("installer: %w", err)
	}
	for _, arch := range arches {
		// Linked as a blob of the layout, or copied: no second name.
		if err := os.Remove(installerLayerFile(r.work, arch)); err != nil {
			return fmt.Errorf("installer: %w", err)
		}
	}
	rep.Installer = inst.String()
	if rep.Media != nil {
		ma := maps.Clone(ia)
		ma["dev.nodeforge.schematic"] = rep.Media.Schematic
		mi, err := writeImageLayout(ctx, filepath.Join(r.work, filepath.FromSlash(MediaInstallerDir(rep.Media.Schematic, false))), sde, ma, arches, r.mediaInstaller, compose.InstallerEntrypoint)
		if err != nil {
			return fmt.Errorf("installer for the schematic: %w", err)
		}
		rep.Media.Installer = mi.String()
		if sb := rep.Media.SecureBoot; sb != nil && len(r.sbInstaller) > 0 {
			ma[compose.AnnotationSecureBoot] = sb.SigningCertSHA256
			si, err := writeImageLayout(ctx, filepath.Join(r.work, filepath.FromSlash(MediaInstallerDir(rep.Media.Schematic, true))), sde, ma, arches, r.sbInstaller, compose.InstallerEntrypoint)
			if err != nil {
				return fmt.Errorf("Secure Boot installer for the schematic: %w", err)
			}
			sb.Installer = si.String()
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.extLayers)) {
		ea := map[string]string{
			"org.opencontainers.image.title":    name,
			"org.opencontainers.image.version":  r.extVersions[name],
			"org.opencontainers.image.created":  time.Unix(sde, 0).UTC().Format(time.RFC3339),
			"org.opencontainers.image.revision": "sha256:" + rep.LockSHA256,
			"dev.nodeforge.branch":              s.Branch,
			"dev.nodeforge.release":             s.Version,
		}
		for lang, text := range r.extDescs[name] {
			ea[extensions.DescriptionAnnotation+lang] = text
		}
		layers := map[string][]v1.Layer{}
		for arch, l := range r.extLayers[name] {
			layers[arch] = []v1.Layer{l}
		}
		d, err := writeImageLayout(ctx, filepath.Join(r.work, "extensions", name), sde, ea, arches, layers, nil)
		if err != nil {
			return fmt.Errorf("extension %s: %w", name, err)
		}
		if rep.Extensions == nil {
			rep.Extensions = map[string]string{}
		}
		rep.Extensions[name] = d.String()
	}
	return r.writeContainers(ctx)
}

// step logs the start of a step and returns the func that logs its end
// with the time it took: a slow build shows where its time goes.
func step(logf func(string, ...any), format string, args ...any) (done func()) {
	what := fmt.Sprintf(format, args...)
	logf("%s", what)
	start := time.Now()
	return func() { logf("%s: %.1f s", what, time.Since(start).Seconds()) }
}

// swapOutput puts the finished build in place of out. Builds into one
// output take turns (a lock on its parent directory), and out is checked
// again under the lock: it may have changed while this build ran.
func swapOutput(ctx context.Context, work, out string, swapped func()) error {
	l, err := flock.Acquire(ctx, filepath.Dir(out), true, nil)
	if err != nil {
		return err
	}
	defer l.Release()
	if _, err := ResolveOutput(out); err != nil {
		return err
	}
	if err := workdir.Swap(work, out); err != nil {
		return err
	}
	swapped()
	return nil
}

func cpioType(mode uint32) string {
	switch mode & cpio.TypeMask {
	case cpio.TypeDir:
		return "dir"
	case cpio.TypeLink:
		return "symlink"
	case cpio.TypeChr:
		return "chardev"
	}
	return "file"
}

func fileDigest(e rootfs.CpioEntry) string {
	if e.Mode&cpio.TypeMask != cpio.TypeReg {
		return ""
	}
	return digest.SHA256Hex(e.Data)
}

// treeEntries lists the root filesystem as the squashfs holds it.
func treeEntries(t *rootfs.Tree, owners rootfs.Owners) ([]report.FileEntry, error) {
	var out []report.FileEntry
	for _, n := range t.Nodes() {
		uid, gid, err := owners.IDs(n)
		if err != nil {
			return nil, err
		}
		e := report.FileEntry{Path: n.Path, Type: n.Kind.String(), Mode: fmt.Sprintf("%04o", n.Mode), UID: uid, GID: gid, Origin: n.Origin, Target: n.Target}
		if n.Kind == rootfs.KindFile {
			e.Size, e.SHA256, e.RPMDigest = n.Size(), n.Digest, n.FileDigest
			if n.LinkGroup != "" && n.LinkGroup != n.Path {
				e.Link = n.LinkGroup
			}
		}
		for k := range n.Xattrs {
			e.Xattrs = append(e.Xattrs, k)
		}
		sort.Strings(e.Xattrs)
		out = append(out, e)
	}
	return out, nil
}
