// Package factory is the Image Factory: node images on demand for any
// schematic, composed from signed releases (builder/compose) without a
// package base.
package factory

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/CalebQ42/squashfs"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/release"
)

// VerifiedRelease is one verified version of a release in a store: every image
// was checked against the keys before anything is read from it, and is
// read by the digest that verified.
type VerifiedRelease struct {
	Store   oci.Store
	Version string
	Branch  string
	Params  compose.Params
	// Platforms is the release's platform table (Talos's with its spec's
	// changes; the zero Table is Talos's).
	Platforms  platform.Table
	SourceDate int64
	// Extensions are the names of the release's extensions (bare: zfs).
	Extensions []string
	// Namespace is how clients name them (siderolabs/zfs, or the spec's).
	Namespace schematic.Namespace
	Digests   map[string]string // repository -> verified digest

	mu   sync.Mutex
	meta map[string]extensions.Metadata // extension -> its manifest's
	// descs: extension -> language -> its description in that language
	// (the image index's annotations; read with meta).
	descs map[string]map[string]string
	boots map[string]installerBoot // arch -> the installer's EFI files
	// read: an extension image's digest -> what its layer said when
	// first read.
	read map[string]extensionRead
	// talosctl: arch -> whether its installer carries talosctl.
	talosctl map[string]bool
}

// maxAsset bounds one boot asset or layer read into memory.
const maxAsset = 8 << 30

// Open verifies version in st with keys and reads its media parameters;
// the version may be spelt either way (v1.11.0 or 1.11.0). A release that
// does not verify is refused with every problem named.
func Open(ctx context.Context, st oci.Store, version string, keys []signature.Verifier) (*VerifiedRelease, error) {
	rel, err := open(ctx, st, version, keys)
	if err == nil {
		return rel, nil
	}
	if alt := storeVersion(ctx, st, nil, version); alt != version {
		return open(ctx, st, alt, keys)
	}
	return nil, err
}

// open is Open of the version's exact tag (the catalog has the store's
// tags listed already).
func open(ctx context.Context, st oci.Store, version string, keys []signature.Verifier) (*VerifiedRelease, error) {
	repos, err := release.Repositories(ctx, st, version)
	if err != nil {
		return nil, err
	}
	r := &VerifiedRelease{Store: st, Version: version, Digests: map[string]string{}}
	var vs []*release.Verification
	var problems []string
	for _, repo := range repos {
		v := release.VerifyOrExplain(ctx, st, repo, version, keys, nil)
		vs = append(vs, v)
		if !v.OK() {
			problems = append(problems, v.Problems...)
			continue
		}
		r.Digests[repo] = v.Digest
		if name, ok := strings.CutPrefix(repo, release.RepoExtension); ok {
			r.Extensions = append(r.Extensions, name)
		}
	}
	if len(problems) > 0 {
		head := ""
		if cause := release.RootCause(vs, keys); cause != "" {
			head = " " + cause
		}
		return nil, fmt.Errorf("release %s in %s does not verify:%s\n  %s", version, st, head, strings.Join(problems, "\n  "))
	}
	slices.Sort(r.Extensions)
	idx, err := r.index(ctx, release.RepoBoot)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if r.Params, err = compose.ParseParams(m.Annotations[compose.AnnotationParams]); err != nil {
		return nil, fmt.Errorf("release %s: %w", version, err)
	}
	if r.Platforms, err = r.Params.PlatformTable(); err != nil {
		return nil, fmt.Errorf("release %s: %w", version, err)
	}
	r.Branch = m.Annotations["dev.nodeforge.branch"]
	r.Namespace = schematic.NamespaceOf(m.Annotations)
	if r.SourceDate, err = strconv.ParseInt(m.Annotations["dev.nodeforge.source-date-epoch"], 10, 64); err != nil {
		return nil, fmt.Errorf("release %s: the boot image has no source date: %w", version, err)
	}
	return r, nil
}

// PlatformTable is the release's platform table (Talos's when not set).
func (r *VerifiedRelease) PlatformTable() platform.Table {
	if r.Platforms.Prefix == "" {
		return platform.Talos
	}
	return r.Platforms
}

// index reads a repository's verified index.
func (r *VerifiedRelease) index(ctx context.Context, repo string) (v1.ImageIndex, error) {
	d, ok := r.Digests[repo]
	if !ok {
		return nil, fmt.Errorf("release %s has no %s", r.Version, repo)
	}
	return r.Store.Index(ctx, repo, d)
}

// Image is the manifest of arch in repo's index.
func (r *VerifiedRelease) Image(ctx context.Context, repo, arch string) (v1.Image, error) {
	idx, err := r.index(ctx, repo)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == specs.GoArch(arch) {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("release %s: %s has no %s image: %w", r.Version, repo, arch, errNoArch)
}

// errNoArch: an index has no image of the architecture asked for.
var errNoArch = errors.New("not built for this architecture")

// Inputs reads what compose.Media needs for arch: the boot assets, the
// installer's EFI boot manager and the layers of the extensions named
// (those a schematic asks for, as it names them: in the release's
// namespace or bare; one the release lacks is an error listing what it
// has), and the options that make the same bytes as the build
// did (the caller adds the schematic, the platform, the formats and a
// scratch directory).
func (r *VerifiedRelease) Inputs(ctx context.Context, arch string, names []string) (compose.Boot, []*compose.Extension, compose.Options, error) {
	fail := func(err error) (compose.Boot, []*compose.Extension, compose.Options, error) {
		return compose.Boot{}, nil, compose.Options{}, fmt.Errorf("release %s, %s: %w", r.Version, arch, err)
	}
	if !slices.Contains(r.Params.Architectures, arch) {
		return fail(fmt.Errorf("not an architecture of the release (it has %s)", strings.Join(r.Params.Architectures, ", ")))
	}
	// The extensions first: the squashfs blocks of the trees read for the
	// first time are compressed on the cores the reading leaves (gunzip
	// and tar take one) while the rest is read, and held for the
	// composition's images.
	held := rootfs.NewHeldBlocks()
	defer held.Seal() // after the Precompressor's Stop: what it finished is kept
	var feed func(*rootfs.Node)
	if len(names) > 0 {
		// An error is the image writer's to meet: nothing is fed then.
		if pre, err := rootfs.NewPrecompressor(r.Params.SquashfsOptions(), held, max(runtime.GOMAXPROCS(0)-1, 1)); err == nil {
			feed = pre.Add
			defer pre.Stop()
		}
	}
	var exts []*compose.Extension
	owners := rootfs.NumericOwners()
	if missing, ok := r.Missing(names); ok {
		return fail(fmt.Errorf("extension %q is not in the release (it has %s)", missing, strings.Join(r.Extensions, ", ")))
	}
	var bare []string
	for _, name := range names {
		n, _ := r.Namespace.Resolve(name)
		bare = append(bare, n)
	}
	slices.Sort(bare)
	for _, name := range slices.Compact(bare) {
		e, own, err := r.extension(ctx, name, arch, feed)
		if err != nil {
			return fail(err)
		}
		if e != nil {
			exts = append(exts, e)
			maps.Copy(owners.Users, own.Users)
			maps.Copy(owners.Groups, own.Groups)
		}
	}
	img, err := r.Image(ctx, release.RepoBoot, arch)
	if err != nil {
		return fail(err)
	}
	// The root filesystem is read only when an extension ships modules,
	// the initramfs once the segment that follows it is made.
	assets, err := layersByType(img, compose.MediaTypeVmlinuz)
	if err != nil {
		return fail(err)
	}
	initramfs, err := layerOfType(img, compose.MediaTypeInitramfs)
	if err != nil {
		return fail(err)
	}
	k := r.Params.Kernel[arch]
	b := compose.Boot{Arch: arch, Vmlinuz: assets[compose.MediaTypeVmlinuz],
		WriteInitramfs: func(w io.Writer) error { return writeLayer(initramfs, w) },
		Cmdline:        r.Params.Cmdline, KernelVersion: k.Version, Key: imageKey(img),
		Modules: func() (map[string][]byte, error) {
			sq, err := layersByType(img, compose.MediaTypeRootfs)
			if err != nil {
				return nil, err
			}
			return moduleFiles(sq[compose.MediaTypeRootfs], k.ModulesDir)
		}}
	if b.Vmlinuz == nil || initramfs == nil {
		return fail(fmt.Errorf("the boot image lacks the kernel or the initramfs"))
	}
	ib, err := r.bootFiles(ctx, arch)
	if err != nil {
		return fail(err)
	}
	b.Bootloader, b.Stub = ib.bootloader, ib.stub
	o := compose.Options{Squashfs: r.Params.SquashfsOptions(), Cache: held, InitramfsCompression: r.Params.InitramfsCompression,
		Owners: owners, PrettyName: r.Params.PrettyName, SourceDate: r.SourceDate, Platforms: r.Platforms, Version: r.Version}
	return b, exts, o, nil
}

// Missing is the first of the extensions named (as a schematic names
// them) that the release does not have, in its namespace or bare.
func (r *VerifiedRelease) Missing(names []string) (string, bool) {
	for _, name := range names {
		if b, ok := r.Namespace.Resolve(name); !ok || !slices.Contains(r.Extensions, b) {
			return name, true
		}
	}
	return "", false
}

// installerBoot are the EFI files of a release's installer image.
type installerBoot struct {
	bootloader, stub []byte // nil when the release has none
}

// prefetch reads what every composition of the release needs and keeps
// (the installer's EFI files, per architecture), so that the first
// request does not wait for it; a failure is the request's to report.
func (r *VerifiedRelease) prefetch(ctx context.Context) {
	for _, arch := range r.Params.Architectures {
		_, _ = r.bootFiles(ctx, arch) // on failure read again, and reported, by the request
	}
}

// bootFiles reads the EFI boot manager and systemd-stub from the
// installer image (once per architecture: the layer also holds a kernel
// and an initramfs); nil when the release has none (no disk images, no
// Secure Boot media then).
func (r *VerifiedRelease) bootFiles(ctx context.Context, arch string) (installerBoot, error) {
	r.mu.Lock()
	b, ok := r.boots[arch]
	r.mu.Unlock()
	if ok {
		return b, nil
	}
	img, err := r.Image(ctx, release.RepoInstaller, arch)
	if err != nil {
		return b, err
	}
	_, assets, err := installerAssetsLayer(img)
	if err != nil {
		return b, err
	}
	rc, err := assets.Uncompressed()
	if err != nil {
		return b, fmt.Errorf("installer image: %w", err)
	}
	defer rc.Close()
	// Talos's layout, or the one of releases made before (rpm names).
	dir, legacy := compose.InstallDir(arch), compose.LegacyInstallDir(arch)
	want := map[string]*[]byte{dir + compose.BootloaderName: &b.bootloader, dir + compose.StubName: &b.stub,
		legacy + compose.LegacyBootloaderName: &b.bootloader, legacy + compose.StubName: &b.stub}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return b, fmt.Errorf("installer image: %w", err)
		}
		dst := want[path.Clean(h.Name)]
		if h.Typeflag != tar.TypeReg || dst == nil {
			continue
		}
		if h.Size > maxAsset {
			return b, fmt.Errorf("installer image: %s: %d bytes", h.Name, h.Size)
		}
		*dst = make([]byte, h.Size)
		if _, err := io.ReadFull(tr, *dst); err != nil {
			return b, fmt.Errorf("installer image: %s: %w", h.Name, err)
		}
	}
	r.mu.Lock()
	if r.boots == nil {
		r.boots = map[string]installerBoot{}
	}
	r.boots[arch] = b
	r.mu.Unlock()
	return b, nil
}

// extension is an extension's layer for arch; nil when the extension is
// not built for it. The layer is read the first time; later its tree is
// read only when composing needs it (compose.Extension.Load), what the
// first read said (manifest, modules, owners) kept by the image's digest
// (a release's images do not change).
func (r *VerifiedRelease) extension(ctx context.Context, name, arch string, onFile func(*rootfs.Node)) (*compose.Extension, rootfs.Owners, error) {
	img, err := r.Image(ctx, release.RepoExtension+name, arch)
	if errors.Is(err, errNoArch) {
		return nil, rootfs.Owners{}, nil
	}
	if err != nil {
		return nil, rootfs.Owners{}, err
	}
	key := imageKey(img)
	load := func() (*rootfs.Tree, error) {
		e, err := readExtension(img, name, nil)
		if err != nil {
			return nil, err
		}
		return e.Tree, nil
	}
	r.mu.Lock()
	was, ok := r.read[key]
	r.mu.Unlock()
	if ok {
		return &compose.Extension{Name: name, Metadata: was.meta, Modules: was.modules, Key: key, Load: load}, was.owners, nil
	}
	e, err := readExtension(img, name, onFile)
	if err != nil {
		return nil, rootfs.Owners{}, err
	}
	e.Key, e.Load = key, load // Load: read again if dropped
	owners := rootfs.NumericOwners(e.Tree)
	if key != "" {
		r.mu.Lock()
		if r.read == nil {
			r.read = map[string]extensionRead{}
		}
		r.read[key] = extensionRead{meta: e.Metadata, modules: e.Modules, owners: owners}
		r.mu.Unlock()
	}
	return e, owners, nil
}

// extensionRead is what an extension's layer said when first read.
type extensionRead struct {
	meta    extensions.Metadata
	modules bool
	owners  rootfs.Owners // its numeric owners
}

// readExtension reads an extension's layer, handing its files to onFile
// (nil: none) as they are read.
func readExtension(img v1.Image, name string, onFile func(*rootfs.Node)) (*compose.Extension, error) {
	rc, err := extensionLayerReader(img)
	if err != nil {
		return nil, fmt.Errorf("extension %s: %w", name, err)
	}
	defer rc.Close()
	e, err := compose.ExtensionFromLayerFeeding(rc, onFile)
	if err == nil {
		// Through the end: the gzip trailer's and the store's digest
		// checks come there, past the tar's last block.
		_, err = io.Copy(io.Discard, rc)
	}
	if err != nil {
		return nil, fmt.Errorf("extension %s: %w", name, err)
	}
	if e.Name != name {
		return nil, fmt.Errorf("extension %s: its manifest names %s", name, e.Name)
	}
	return e, nil
}

// extensionLayerReader is the tar of an extension image's one layer
// (layerReader): a gzip layer (compose.ImageLayer's), or a plain tar
// (releases made before) as it is.
func extensionLayerReader(img v1.Image) (io.ReadCloser, error) {
	l, err := theLayer(img)
	if err != nil {
		return nil, err
	}
	return layerReader(l)
}

// layerReader is a layer's tar: a gzip layer read as stored (its digest
// checked by the store at the blob's end) through compose.GunzipLayer,
// another as go-containerregistry reads it.
func layerReader(l v1.Layer) (io.ReadCloser, error) {
	mt, err := l.MediaType()
	if err != nil {
		return nil, err
	}
	if mt != types.OCILayer && mt != types.DockerLayer {
		return l.Uncompressed()
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	return compose.GunzipLayer(rc)
}

// readBlob reads a blob of the size its descriptor says (at most limit)
// into one allocation, then on to its end, where the store checks its
// digest: growing a buffer as io.ReadAll does zeroed and copied a 164 MB
// initramfs several times over.
func readBlob(r io.Reader, size, limit int64) ([]byte, error) {
	if size < 0 || size > limit {
		return nil, fmt.Errorf("%d bytes, more than the %d read into memory", size, limit)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	var one [1]byte
	for {
		n, err := r.Read(one[:])
		if n > 0 {
			return nil, fmt.Errorf("longer than the %d bytes its descriptor says", size)
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// imageKey names an image's content (its manifest's digest, which the
// release's signed index names) for compose.LayerCache; "" when unknown.
func imageKey(img v1.Image) string {
	d, err := img.Digest()
	if err != nil {
		return ""
	}
	return d.String()
}

// layersByType reads the layers of a boot artifact of the media types
// wanted, by media type.
func layersByType(img v1.Image, wanted ...string) (map[string][]byte, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, l := range layers {
		mt, err := l.MediaType()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(wanted, string(mt)) {
			continue
		}
		b, err := readLayer(l)
		if err != nil {
			return nil, err
		}
		out[string(mt)] = b
	}
	return out, nil
}

// layerOfType is img's first layer of media type mt (nil: none).
func layerOfType(img v1.Image, mt string) (v1.Layer, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	for _, l := range layers {
		t, err := l.MediaType()
		if err != nil {
			return nil, err
		}
		if string(t) == mt {
			return l, nil
		}
	}
	return nil, nil
}

// readLayer reads a boot asset's blob as stored (a boot asset is a file:
// an initramfs is zstd or xz, and must stay so), into one allocation.
func readLayer(l v1.Layer) ([]byte, error) {
	mt, size, rc, err := openLayer(l)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := readBlob(rc, size, maxAsset)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", mt, err)
	}
	return b, nil
}

// openLayer is a layer's blob as stored, its media type and its size.
func openLayer(l v1.Layer) (types.MediaType, int64, io.ReadCloser, error) {
	mt, err := l.MediaType()
	if err != nil {
		return "", 0, nil, err
	}
	size, err := l.Size()
	if err != nil {
		return "", 0, nil, err
	}
	rc, err := l.Compressed()
	return mt, size, rc, err
}

// writeLayer writes a layer's blob as stored to w: all of it, to its
// end, where the store checks its digest (an error then, and the caller
// drops what was written), and of the size its descriptor says.
func writeLayer(l v1.Layer, w io.Writer) error {
	mt, size, rc, err := openLayer(l)
	if err != nil {
		return err
	}
	defer rc.Close()
	n, err := io.Copy(w, io.LimitReader(rc, size+1))
	if err == nil && n != size {
		err = fmt.Errorf("%d bytes where its descriptor says %d", n, size)
	}
	if err == nil { // on to the end, where the digest is checked
		_, err = io.Copy(io.Discard, rc)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", mt, err)
	}
	return nil
}

// moduleFiles reads the regular files below dir of a squashfs image, by
// path below dir.
func moduleFiles(sqsh []byte, dir string) (map[string][]byte, error) {
	if sqsh == nil || dir == "" {
		return nil, fmt.Errorf("the boot image has no root filesystem or kernel module directory")
	}
	sq, err := squashfs.NewReader(bytes.NewReader(sqsh))
	if err != nil {
		return nil, fmt.Errorf("rootfs.sqsh: %w", err)
	}
	root := strings.TrimPrefix(dir, "/")
	out := map[string][]byte{}
	err = fs.WalkDir(sq, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := fs.ReadFile(sq, p)
		if err != nil {
			return err
		}
		rel, _ := strings.CutPrefix(p, root+"/")
		out[path.Clean(rel)] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("rootfs.sqsh %s: %w", dir, err)
	}
	return out, nil
}

// ExtensionMetadata is what an extension's manifest says of it (read once,
// from its first architecture's layer).
func (r *VerifiedRelease) ExtensionMetadata(ctx context.Context, name string) (extensions.Metadata, error) {
	r.mu.Lock()
	m, ok := r.meta[name]
	r.mu.Unlock()
	if ok {
		return m, nil
	}
	for _, arch := range r.Params.Architectures {
		e, _, err := r.extension(ctx, name, arch, nil)
		if err != nil {
			return m, err
		}
		if e == nil {
			continue
		}
		descs, err := r.extensionDescriptions(ctx, name)
		if err != nil {
			return m, err
		}
		r.mu.Lock()
		if r.meta == nil {
			r.meta, r.descs = map[string]extensions.Metadata{}, map[string]map[string]string{}
		}
		r.meta[name], r.descs[name] = e.Metadata, descs
		r.mu.Unlock()
		return e.Metadata, nil
	}
	return m, fmt.Errorf("extension %s has no image of the release's architectures", name)
}

// extensionDescriptions are the extension's descriptions in other
// languages, from its image index's annotations.
func (r *VerifiedRelease) extensionDescriptions(ctx context.Context, name string) (map[string]string, error) {
	idx, err := r.index(ctx, release.RepoExtension+name)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("extension %s: %w", name, err)
	}
	var out map[string]string
	for k, v := range m.Annotations {
		if lang, ok := strings.CutPrefix(k, extensions.DescriptionAnnotation); ok {
			if out == nil {
				out = map[string]string{}
			}
			out[lang] = v
		}
	}
	return out, nil
}

// ExtensionDescription is the extension's description in lang, or its
// manifest's (English) when it has none in lang; read after
// extensionMetadata.
func (r *VerifiedRelease) ExtensionDescription(meta extensions.Metadata, lang string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d := r.descs[meta.Name][lang]; d != "" {
		return d
	}
	return meta.Description
}
