package builder

import (
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
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/internal/blobcache"
	"github.com/nodeforge/builder/internal/flock"
	"github.com/nodeforge/builder/internal/workdir"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/lock"
	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/rootfs"
	"github.com/nodeforge/builder/rootfs/sqfs"
	"github.com/nodeforge/builder/schematic"
	"github.com/nodeforge/builder/specs"
)

// Options of a build.
type Options struct {
	Spec      *specs.Spec
	Lock      *lock.Lock
	LockBytes []byte // the lock file as read, for its digest
	Out       string
	Cache     *cache.Cache
	Source    repo.SourceOptions
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
	// DiskCompressions are the compressed variants of the raw disk image
	// to write besides it: "zst", "xz".
	DiskCompressions []string
	// Shuffle, when not 0, lays packages in a pseudo-random order (seeded)
	// to prove the output does not depend on it (builder repro).
	Shuffle int64
	Log     func(format string, args ...any)
}

// Build builds every architecture of the lock into opts.Out:
// <arch>/{vmlinuz,initramfs.xz,rootfs.sqsh,cmdline}, oci/ and report.json.
// It works in a temporary directory beside Out and moves the result into
// place at the end, so a failure leaves Out as it was.
func Build(ctx context.Context, opts Options) (*Report, error) {
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s, l := opts.Spec, opts.Lock
	if l.Spec.Name != s.Name || l.Spec.Version != s.Version {
		return nil, fmt.Errorf("the lock is for %s %s, the spec is %s %s: run builder lock again", l.Spec.Name, l.Spec.Version, s.Name, s.Version)
	}
	if want := digest(s.Raw); l.Spec.SHA256 != want {
		return nil, fmt.Errorf("the spec changed since the lock was made (lock pins spec sha256 %s, spec is %s): run builder lock again", l.Spec.SHA256, want)
	}
	sde := opts.SourceDateEpoch
	if sde == 0 {
		sde = l.SourceDateEpoch
	}
	sqTool := "nodeforge rootfs/sqfs " + opts.Version
	if s.Image.SquashfsWriter != "go" {
		var err error
		if sqTool, err = rootfs.SquashfsTool(opts.Squashfs); err != nil {
			return nil, err
		}
	}
	opts.Squashfs.Compressor, opts.Squashfs.Level = s.Image.Compression, s.Image.CompressionLevel
	if opts.Squashfs.Jobs == 0 {
		// Compressor threads do not change the bytes (tested), only the time.
		opts.Squashfs.Jobs = runtime.NumCPU()
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
		if key, err = buildKey(opts, sde); err != nil {
			return nil, err
		}
		stampFile = stampPath(opts.Cache.Dir, out)
	}
	if key != "" {
		if rep, err := unchanged(ctx, opts, stampFile, out, key, logf); rep != nil || err != nil {
			return rep, err
		}
	}
	// The build works beside its output and swaps the result in at the
	// end; a work directory a killed build left is swept here.
	wd, err := workdir.New(filepath.Dir(out), "."+filepath.Base(out)+".build-")
	if err != nil {
		return nil, err
	}
	defer wd.Close()
	work := wd.Path

	rep := &Report{
		Spec:            SpecInfo{Name: s.Name, Branch: s.Branch, Version: s.Version, SHA256: l.Spec.SHA256},
		LockSHA256:      digest(opts.LockBytes),
		SourceDateEpoch: sde,
		Builder:         opts.Version,
		Tools:           map[string]string{"squashfs": fmt.Sprintf("%s (%s level %d)", sqTool, s.Image.Compression, s.Image.CompressionLevel)},
		Architectures:   map[string]*ArchReport{},
		Generators:      generatorDocs,
		Artifacts:       map[string]ArtifactInfo{},
	}
	arches := make([]string, 0, len(l.Architectures))
	for a := range l.Architectures {
		arches = append(arches, a)
	}
	sort.Strings(arches)
	// Step caches beside the downloads: laid packages and compressed
	// squashfs blocks, both keyed by content digests.
	var layCache *rootfs.LayCache
	var blocks *blobcache.Packs
	if opts.Cache != nil && opts.Cache.Dir != "" && !opts.NoStepCaches {
		if layCache, err = rootfs.OpenLayCache(filepath.Join(opts.Cache.Dir, "laid")); err != nil {
			return nil, err
		}
		defer layCache.Wait()
		if s.Image.SquashfsWriter == "go" {
			if blocks, err = blobcache.OpenPacks(filepath.Join(opts.Cache.Dir, "squashfs-packs")); err != nil {
				return nil, err
			}
			defer blocks.Close()
		}
	}
	assets := map[string][]ociAsset{}
	extLayers := map[string]map[string]*ociAsset{} // extension -> arch -> layer
	extVersions := map[string]string{}
	installerLayers := map[string]*ociAsset{}
	mediaInstallerLayers := map[string]*ociAsset{}
	for _, arch := range arches {
		a := l.Architectures[arch]
		done := step(logf, "%s: fetching %d locked packages", arch, len(a.Packages))
		paths, err := fetchArch(ctx, s, a, opts.Cache, opts.Source)
		if err != nil {
			return nil, err
		}
		done()
		done = step(logf, "%s: assembling the root filesystem", arch)
		// While packages are read (decompressed, checked) on every core,
		// the squashfs blocks of the files already read are compressed on
		// every core too: the operating system shares the cores among
		// them, and none waits for the other.
		var layOpts rootfs.LayOptions
		var pre *rootfs.Precompressor
		if blocks != nil {
			if pre, err = rootfs.NewPrecompressor(opts.Squashfs, blocks, opts.Squashfs.Jobs); err != nil {
				return nil, err
			}
			layOpts.OnFile = pre.Add
		}
		as, err := assemble(ctx, s, arch, a, paths, opts.Shuffle, layCache, layOpts)
		if pre != nil {
			pre.Stop()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", arch, err)
		}
		done()
		initData, initPkg, err := initFile(s, a, paths, layCache)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", arch, err)
		}
		dir := filepath.Join(work, arch)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		owners := as.accounts.Owners()
		exts, err := buildExtensions(s, a, paths, layCache, as, owners, sde)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", arch, err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		done = step(logf, "%s: writing rootfs.sqsh (%d paths)", arch, as.tree.Len())
		sqPath := filepath.Join(dir, "rootfs.sqsh")
		if s.Image.SquashfsWriter == "go" {
			var cache sqfs.BlockCache // a nil *Packs must stay a nil interface
			if blocks != nil {
				cache = blocks
			}
			err = as.tree.WriteSquashfsGo(sqPath, owners, sde, opts.Squashfs, cache)
			if blocks != nil {
				if ferr := blocks.Flush(); ferr != nil {
					logf("%s: the squashfs block cache was not written: %v", arch, ferr)
				}
			}
		} else {
			err = as.tree.WriteSquashfs(ctx, sqPath, owners, sde, opts.Squashfs)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", arch, err)
		}
		done()
		rootfsEntries, err := treeEntries(as.tree, owners)
		if err != nil {
			return nil, err
		}
		// The tree holds the contents of the whole root: let them go
		// before the next large buffers (the boot media still need them).
		// The collection is cheap (file contents hold no pointers) and
		// keeps the peak near the live data rather than twice that.
		releaseTree := func() {
			if as.tree != nil {
				as.tree = nil
				runtime.GC()
			}
		}
		if opts.Schematic == nil {
			releaseTree()
		}
		sqsh, err := os.ReadFile(sqPath)
		if err != nil {
			return nil, err
		}
		done = step(logf, "%s: writing initramfs.xz, the installer and the reports", arch)
		entries := initramfsEntries(initData, initPkg, as.kernel, sqsh)
		initramfs, err := compressInitramfs(s.Image.InitramfsCompression, len(sqsh), func(w io.Writer) error {
			return rootfs.WriteCpio(w, entries, sde)
		})
		if err != nil {
			return nil, err
		}
		cmdline := strings.Join(s.Image.Cmdline, " ") + "\n"
		var mediaLayers []FileEntry
		var mediaInitramfs []byte
		if opts.Schematic != nil {
			var cache sqfs.BlockCache
			if blocks != nil {
				cache = blocks
			}
			// The EFI boot manager comes from the base like everything
			// else; without it in the lock, no ISO or disk image.
			bootloader, _, berr := lockedFile(s.Image.Bootloader, "image.bootloader", a, paths, layCache)
			if berr != nil {
				logf("%s: no ISO or disk image: %v", arch, berr)
				bootloader = nil
			}
			mr, err := writeMedia(ctx, filepath.Join(work, "media"), opts.Schematic, arch, exts, as, owners, sde, opts.Squashfs, cache,
				s.Image.InitramfsCompression, initramfs, s.Image.Cmdline, s.Image.OS.PrettyName, bootloader, opts.DiskCompressions)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", arch, err)
			}
			if rep.Media == nil {
				rep.Media = &MediaReport{Schematic: mr.Schematic, Extensions: opts.Schematic.Extensions(), Files: map[string]ArtifactInfo{}}
			}
			if mr.ISOTool != "" {
				rep.Tools["iso"] = mr.ISOTool
			} else if berr != nil {
				rep.Media.NoDiskImages = berr.Error()
			}
			for k, v := range mr.Files {
				rep.Media.Files[k] = v
			}
			mediaLayers = mr.Layers
			mediaInitramfs = mr.Initramfs
		}
		releaseTree()
		spdx, cdx, err := nodeSBOM(s, l, arch, as.packages, rep.LockSHA256, sde, "nodeforge-builder-"+opts.Version)
		if err != nil {
			return nil, err
		}
		instBin, instPkg, err := lockedFile(s.Image.Installer, "image.installer", a, paths, layCache)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", arch, err)
		}
		il, err := installerLayer(arch, s.Name, as.kernel.vmlinuz, initramfs, spdx, instBin, instPkg, sde)
		if err != nil {
			return nil, err
		}
		installerLayers[arch] = &ociAsset{name: "installer", mediaType: types.OCIUncompressedLayer, data: il, digest: sha256.Sum256(il)}
		if mediaInitramfs != nil {
			// The schematic's installer: the same, with its initramfs.
			ml, err := installerLayer(arch, s.Name, as.kernel.vmlinuz, mediaInitramfs, spdx, instBin, instPkg, sde)
			if err != nil {
				return nil, err
			}
			mediaInstallerLayers[arch] = &ociAsset{name: "installer", mediaType: types.OCIUncompressedLayer, data: ml, digest: sha256.Sum256(ml)}
		}
		files := []ociAsset{
			{name: "sbom.spdx.json", mediaType: MediaTypeSPDX, data: spdx},
			{name: "sbom.cdx.json", mediaType: MediaTypeCycloneDX, data: cdx},
			{name: "vmlinuz", mediaType: MediaTypeVmlinuz, data: as.kernel.vmlinuz},
			{name: "initramfs.xz", mediaType: MediaTypeInitramfs, data: initramfs},
			{name: "rootfs.sqsh", mediaType: MediaTypeRootfs, data: sqsh},
			{name: "cmdline", mediaType: MediaTypeCmdline, data: []byte(cmdline)},
		}
		for i := range files {
			f := &files[i]
			f.digest = sha256.Sum256(f.data)
			if f.name != "rootfs.sqsh" {
				if err := os.WriteFile(filepath.Join(dir, f.name), f.data, 0o644); err != nil {
					return nil, err
				}
			}
			rep.Artifacts[arch+"/"+f.name] = ArtifactInfo{SHA256: hex.EncodeToString(f.digest[:]), Size: int64(len(f.data))}
		}
		assets[arch] = files
		ar := &ArchReport{Packages: as.packages, Kernel: as.kernel, Cmdline: strings.TrimSpace(cmdline), Init: initPkg, Media: mediaLayers,
			Scriptlets: as.scriptlets, Triggers: as.triggers, Ghosts: as.ghosts, Dropped: as.drops, Policy: as.policy, Libraries: as.libraries}
		for _, sc := range as.scriptlets {
			if !sc.Handled {
				ar.Unhandled++
			}
		}
		ar.Unhandled += len(as.triggers)
		ar.Rootfs = rootfsEntries
		for _, eb := range exts {
			if ar.Extensions == nil {
				ar.Extensions = map[string]*ExtensionReport{}
			}
			ar.Extensions[eb.name] = eb.report
			if extLayers[eb.name] == nil {
				extLayers[eb.name] = map[string]*ociAsset{}
			}
			l := &ociAsset{name: eb.name, mediaType: types.OCIUncompressedLayer, data: eb.layer, digest: sha256.Sum256(eb.layer)}
			extLayers[eb.name][arch] = l
			eb.report.Layer = "sha256:" + hex.EncodeToString(l.digest[:])
			if v, ok := extVersions[eb.name]; ok && v != eb.version {
				return nil, fmt.Errorf("extension %s: version %s on %s, %s on another architecture", eb.name, eb.version, arch, v)
			}
			extVersions[eb.name] = eb.version
		}
		for _, e := range entries {
			ar.Initramfs = append(ar.Initramfs, FileEntry{Path: "/" + e.Name, Type: cpioType(e.Mode), Mode: fmt.Sprintf("%04o", e.Mode&0o7777), Size: int64(len(e.Data)), SHA256: fileDigest(e), Origin: e.Origin})
		}
		rep.Architectures[arch] = ar
		done()
	}
	ann := map[string]string{
		"org.opencontainers.image.version":  s.Version,
		"org.opencontainers.image.title":    s.Name,
		"dev.nodeforge.branch":              s.Branch,
		"dev.nodeforge.lock.digest":         "sha256:" + rep.LockSHA256,
		"dev.nodeforge.source-date-epoch":   fmt.Sprint(sde),
		"org.opencontainers.image.revision": "sha256:" + rep.LockSHA256,
	}
	done := step(logf, "writing the OCI layouts and report.json")
	idx, err := writeOCILayout(ctx, filepath.Join(work, "oci"), sde, ann, arches, assets)
	if err != nil {
		return nil, err
	}
	rep.OCIIndex = idx.String()
	ia := map[string]string{
		"org.opencontainers.image.title":    s.Name + "-installer",
		"org.opencontainers.image.version":  s.Version,
		"org.opencontainers.image.created":  time.Unix(sde, 0).UTC().Format(time.RFC3339),
		"org.opencontainers.image.revision": "sha256:" + rep.LockSHA256,
		"dev.nodeforge.branch":              s.Branch,
	}
	inst, err := writeImageLayout(ctx, filepath.Join(work, "installer"), sde, ia, arches, installerLayers, []string{"/usr/bin/installer"})
	if err != nil {
		return nil, fmt.Errorf("installer: %w", err)
	}
	rep.Installer = inst.String()
	if rep.Media != nil {
		ma := maps.Clone(ia)
		ma["dev.nodeforge.schematic"] = rep.Media.Schematic
		mi, err := writeImageLayout(ctx, filepath.Join(work, "media", rep.Media.Schematic, "installer"), sde, ma, arches, mediaInstallerLayers, []string{"/usr/bin/installer"})
		if err != nil {
			return nil, fmt.Errorf("installer for the schematic: %w", err)
		}
		rep.Media.Installer = mi.String()
	}
	for _, name := range sortedKeys(extLayers) {
		ea := map[string]string{
			"org.opencontainers.image.title":    name,
			"org.opencontainers.image.version":  extVersions[name],
			"org.opencontainers.image.created":  time.Unix(sde, 0).UTC().Format(time.RFC3339),
			"org.opencontainers.image.revision": "sha256:" + rep.LockSHA256,
			"dev.nodeforge.branch":              s.Branch,
			"dev.nodeforge.release":             s.Version,
		}
		d, err := writeImageLayout(ctx, filepath.Join(work, "extensions", name), sde, ea, arches, extLayers[name], nil)
		if err != nil {
			return nil, fmt.Errorf("extension %s: %w", name, err)
		}
		if rep.Extensions == nil {
			rep.Extensions = map[string]string{}
		}
		rep.Extensions[name] = d.String()
	}
	rb, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(filepath.Join(work, "report.json"), append(rb, '\n'), 0o644); err != nil {
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
		if st, err = newStamp(ctx, work, key); err != nil {
			logf("no build stamp (the next build runs in full): %v", err)
		}
	}
	if err := swapOutput(ctx, work, out, func() {
		if st != nil {
			if err := st.write(stampFile); err != nil {
				logf("no build stamp (the next build runs in full): %v", err)
			}
		}
	}); err != nil {
		return nil, err
	}
	return rep, nil
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
	switch mode & 0o170000 {
	case 0o040000:
		return "dir"
	case 0o120000:
		return "symlink"
	case 0o020000:
		return "chardev"
	}
	return "file"
}

func fileDigest(e rootfs.CpioEntry) string {
	if e.Mode&0o170000 != 0o100000 {
		return ""
	}
	return digest(e.Data)
}

// treeEntries lists the root filesystem as the squashfs holds it.
func treeEntries(t *rootfs.Tree, owners rootfs.Owners) ([]FileEntry, error) {
	var out []FileEntry
	for _, n := range t.Nodes() {
		uid, gid, err := owners.IDs(n)
		if err != nil {
			return nil, err
		}
		e := FileEntry{Path: n.Path, Type: n.Kind.String(), Mode: fmt.Sprintf("%04o", n.Mode), UID: uid, GID: gid, Origin: n.Origin, Target: n.Target}
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
