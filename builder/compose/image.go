package compose

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/api/target"
	"github.com/nodeforge/builder/builder/media/fat"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/internal/digest"
)

// ImageLayer is a container image's layer: a tar and its gzip stream, as
// registries and crane validate expect layers (the tar's digest is the
// diff ID the image's config lists).
type ImageLayer struct {
	tar, gz        []byte // gz: the compressed stream (gzip, or zstd)
	diffID, digest v1.Hash
	zstd           bool
}

// NewImageLayer gzips tar. The stream has no name and no time in its
// header and one compressor at a pinned version writes it, so the same
// tar always gives the same bytes.
func NewImageLayer(tarData []byte) (*ImageLayer, error) {
	// The tar is hashed on another core while it is compressed.
	diffID := make(chan v1.Hash, 1)
	go func() { diffID <- digest.OCI(tarData) }()
	var b bytes.Buffer
	// Room for a stream of stored blocks: an installer's tar is mostly
	// compressed data (the initramfs), and growing a 150 MB buffer by
	// copying costs more than compressing it. Pages never written are
	// never touched.
	b.Grow(len(tarData) + len(tarData)/256 + 4096)
	zw, err := gzip.NewWriterLevel(&b, gzip.DefaultCompression)
	if err == nil {
		if _, err = zw.Write(tarData); err == nil {
			err = zw.Close()
		}
	}
	l := &ImageLayer{tar: tarData, gz: b.Bytes(), diffID: <-diffID}
	if err != nil {
		return nil, err
	}
	l.digest = digest.OCI(l.gz)
	return l, nil
}

// NewZstdImageLayer compresses tar with zstd (a container image's
// layers, on request): the initramfs's encoder (klauspost's, pinned),
// one goroutine, so the bytes do not depend on the cores.
func NewZstdImageLayer(tarData []byte) (*ImageLayer, error) {
	var b bytes.Buffer
	zw, err := zstd.NewWriter(&b, zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	if _, err = zw.Write(tarData); err == nil {
		err = zw.Close()
	}
	if err != nil {
		return nil, err
	}
	return &ImageLayer{tar: tarData, gz: b.Bytes(), diffID: digest.OCI(tarData), digest: digest.OCI(b.Bytes()), zstd: true}, nil
}

// Tar is the layer's uncompressed tar.
func (l *ImageLayer) Tar() []byte { return l.tar }

// Digest is the digest of the gzip stream, the blob's.
func (l *ImageLayer) Digest() (v1.Hash, error) { return l.digest, nil }

// DiffID is the digest of the tar.
func (l *ImageLayer) DiffID() (v1.Hash, error) { return l.diffID, nil }

// Size is the size of the blob.
func (l *ImageLayer) Size() (int64, error) { return int64(len(l.gz)), nil }

// MediaType is the OCI gzip layer's (or zstd layer's).
func (l *ImageLayer) MediaType() (types.MediaType, error) {
	if l.zstd {
		return types.OCILayerZStd, nil
	}
	return types.OCILayer, nil
}

// Compressed reads the blob.
func (l *ImageLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.gz)), nil
}

// HashedBlob is the gzip stream, which the digest was taken of (the OCI
// layout stores it without hashing it again).
func (l *ImageLayer) HashedBlob() []byte { return l.gz }

// Uncompressed reads the tar.
func (l *ImageLayer) Uncompressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.tar)), nil
}

// GunzipLayer reads the tar of a gzip layer's blob rc through klauspost's
// gzip, about twice as fast as the standard library's (which
// go-containerregistry's Uncompressed uses); closing it closes rc. On an
// error rc is closed.
func GunzipLayer(rc io.ReadCloser) (io.ReadCloser, error) {
	zr, err := gzip.NewReader(rc)
	if err != nil {
		rc.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{zr, rc}, nil
}

// ImageIndex is a release's image (an extension, the installer, a
// schematic's installer): an OCI index over one image per architecture in
// arches that has layers (Image), annotated as each image is.
func ImageIndex(sde int64, annotations map[string]string, arches []string, layers map[string][]v1.Layer, entrypoint []string) (v1.ImageIndex, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range arches {
		if len(layers[arch]) == 0 {
			continue
		}
		img, err := Image(sde, annotations, arch, layers[arch], entrypoint)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: specs.GoArch(arch)},
		}})
	}
	return withoutArtifactTypes(mutate.Annotations(idx, annotations).(v1.ImageIndex))
}

// Image is one architecture's image of a release's: the layers in order,
// created at the source date, the entrypoint when not nil, annotated.
func Image(sde int64, annotations map[string]string, arch string, layers []v1.Layer, entrypoint []string) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	for _, l := range layers {
		var err error
		if img, err = mutate.Append(img, mutate.Addendum{Layer: l}); err != nil {
			return nil, err
		}
	}
	img, err := WithPlatform(img, arch, v1.Time{Time: time.Unix(sde, 0).UTC()}, entrypoint)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, annotations).(v1.Image), nil
}

// plainIndex is an index whose descriptors carry no artifactType:
// go-containerregistry sets the config's media type there, which an
// image (not an artifact) need not say and skopeo drops when it copies,
// changing the index's digest. Without it, copies keep the digest.
type plainIndex struct {
	idx v1.ImageIndex
	raw []byte
	m   *v1.IndexManifest
}

// PlainIndex is idx with no artifactType in its descriptors (see
// plainIndex): an index of images, not artifacts.
func PlainIndex(idx v1.ImageIndex) (v1.ImageIndex, error) { return withoutArtifactTypes(idx) }

func withoutArtifactTypes(idx v1.ImageIndex) (v1.ImageIndex, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	m = m.DeepCopy()
	for i := range m.Manifests {
		m.Manifests[i].ArtifactType = ""
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &plainIndex{idx: idx, raw: raw, m: m}, nil
}

func (x *plainIndex) RawManifest() ([]byte, error)              { return x.raw, nil }
func (x *plainIndex) IndexManifest() (*v1.IndexManifest, error) { return x.m.DeepCopy(), nil }
func (x *plainIndex) Digest() (v1.Hash, error)                  { return digest.OCI(x.raw), nil }
func (x *plainIndex) Size() (int64, error)                      { return int64(len(x.raw)), nil }
func (x *plainIndex) MediaType() (types.MediaType, error)       { return x.m.MediaType, nil }
func (x *plainIndex) Image(h v1.Hash) (v1.Image, error)         { return x.idx.Image(h) }
func (x *plainIndex) ImageIndex(h v1.Hash) (v1.ImageIndex, error) {
	return x.idx.ImageIndex(h)
}

// WithPlatform sets the image config's platform, creation time (the
// source date) and entrypoint (when not nil), and drops its history, whose
// times would be the clock's.
func WithPlatform(img v1.Image, arch string, created v1.Time, entrypoint []string) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS, cf.Created = specs.GoArch(arch), "linux", created
	cf.History = nil
	if entrypoint != nil {
		cf.Config.Entrypoint = entrypoint
	}
	return mutate.ConfigFile(img, cf)
}

// InstallerEntrypoint is the installer image's entrypoint.
var InstallerEntrypoint = []string{"/usr/bin/installer"}

// maxInstallerFile bounds one file of an installer layer read back.
const maxInstallerFile = 4 << 30

// InstallerAssets are what a schematic's installer takes from its media.
type InstallerAssets struct {
	Initramfs Blob // the schematic's (with its extensions)
	// Cmdline, when not nil (a platform's installer), is the platform's
	// command line, at usr/install/<arch>/cmdline.
	Cmdline []byte
	// UKI is the plain UKI for vmlinuz.efi (InstallerUKI), when the
	// release's layer has one: laid out on Initramfs, not copied
	// (*uki.Image; never a nil one).
	UKI rootfs.Body
	// ESP, for the Secure Boot installer, are the Secure Boot media's ESP
	// files.
	ESP []fat.File
}

// SchematicInstaller is the boot assets' layer of a schematic's installer
// for arch: the release's (base, a tar: the installer image's last layer,
// see InstallDir) with the schematic's initramfs and UKI in place of the
// release's and, for a platform's installer, the platform's command line
// at usr/install/<arch>/cmdline. Everything else, headers included, is the
// release's. A release made before the installer was laid out as Talos's
// (one layer, usr/install/<rpm arch>/) gets its layer back so changed.
//
// With ESP it is the Secure Boot installer: the unsigned boot code
// (vmlinuz, initramfs.xz, the boot manager, systemd-stub.efi) gives way to
// the signed ESP an installer copies to a node's disk, under
// usr/install/<arch>/esp/, and where Talos's installer looks for them the
// signed systemd-boot (systemd-boot.efi) and UKI (vmlinuz.efi), hard links
// to the ESP's.
func SchematicInstaller(base []byte, arch string, in InstallerAssets, sde int64) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(len(base) + 4096)
	if in.Initramfs != nil {
		b.Grow(int(in.Initramfs.Size()))
	}
	if in.UKI != nil {
		b.Grow(int(in.UKI.Size()))
	}
	if err := WriteSchematicInstaller(&b, bytes.NewReader(base), arch, in, sde); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteSchematicInstaller writes SchematicInstaller's layer to w, reading
// the release's tar from base as it goes: an Image Factory streams it
// from the release's blob into a file (NewFileLayer), and neither tar is
// ever whole in memory.
func WriteSchematicInstaller(w io.Writer, base io.Reader, arch string, in InstallerAssets, sde int64) error {
	t, bodies, err := schematicInstallerTree(base, arch, in)
	if err != nil {
		return err
	}
	return t.WriteTarBodies(w, rootfs.NumericOwners(t), sde, bodies)
}

// replacedAssets are the files of a release's installer layer that a
// schematic's always replaces or removes (the ones the ESP's files
// replace besides, with one): their data is not read.
func replacedAssets(arch string, esp bool) map[string]bool {
	names := []string{"initramfs.xz", UKIName}
	if esp {
		names = append(names, "vmlinuz", BootloaderName, LegacyBootloaderName, StubName)
	}
	m := map[string]bool{}
	for _, dir := range []string{InstallDir(arch), LegacyInstallDir(arch)} {
		for _, n := range names {
			m["/"+dir+n] = true
		}
	}
	return m
}

// schematicInstallerTree is the tree of SchematicInstaller's layer, with
// the bodies of the files written from where they are (the initramfs,
// the UKI laid out on it).
func schematicInstallerTree(base io.Reader, arch string, in InstallerAssets) (*rootfs.Tree, map[string]rootfs.Body, error) {
	replaced := replacedAssets(arch, in.ESP != nil)
	t, err := rootfs.ReadTarSkipping(base, maxInstallerFile, func(p string) bool { return replaced[p] })
	if err != nil {
		return nil, nil, fmt.Errorf("installer layer: %w", err)
	}
	t, bodies, err := replaceInstallerAssets(t, arch, in)
	if err != nil {
		return nil, nil, err
	}
	// Every file left without its data has been given new data.
	for p := range replaced {
		if n := t.Get(p); n != nil && n.Data == nil && bodies[p] == nil {
			return nil, nil, fmt.Errorf("installer layer: %s is neither replaced nor removed", p)
		}
	}
	return t, bodies, nil
}

// replaceInstallerAssets puts the schematic's boot assets into t, the
// release's installer layer.
func replaceInstallerAssets(t *rootfs.Tree, arch string, in InstallerAssets) (*rootfs.Tree, map[string]rootfs.Body, error) {
	dir, legacy := "/"+InstallDir(arch), false
	if t.Get(dir+"initramfs.xz") == nil {
		dir, legacy = "/"+LegacyInstallDir(arch), true
	}
	n := t.Get(dir + "initramfs.xz")
	if n == nil || n.Kind != rootfs.KindFile {
		return nil, nil, fmt.Errorf("installer layer: no %sinitramfs.xz", InstallDir(arch))
	}
	if in.Initramfs == nil {
		return nil, nil, errors.New("installer layer: no initramfs of the schematic was given")
	}
	bodies := map[string]rootfs.Body{}
	n.Data, n.Digest = nil, ""
	bodies[n.Path] = blobBody{in.Initramfs}
	// add puts a file of data, whose digest is sum ("": not taken yet).
	add := func(name, generator string, data []byte, sum string) (*rootfs.Node, error) {
		if sum == "" {
			sum = digest.SHA256Hex(data)
		}
		c := &rootfs.Node{Path: dir + name, Kind: rootfs.KindFile, Mode: n.Mode, User: n.User, Group: n.Group,
			Data: data, Digest: sum, Origin: report.Origin{Generator: generator}}
		t.Remove(c.Path)
		if err := t.Add(c); err != nil {
			return nil, fmt.Errorf("installer layer: %w", err)
		}
		return c, nil
	}
	if u := t.Get(dir + UKIName); u != nil && in.ESP == nil {
		if in.UKI == nil {
			return nil, nil, fmt.Errorf("installer layer: the release's has %s%s, and no UKI of the schematic was made", InstallDir(arch), UKIName)
		}
		u.Data, u.Digest = nil, ""
		bodies[u.Path] = in.UKI
	}
	if in.Cmdline != nil {
		if _, err := add("cmdline", "cmdline", in.Cmdline, ""); err != nil {
			return nil, nil, err
		}
	}
	if in.ESP != nil {
		for _, name := range []string{"vmlinuz", "initramfs.xz", BootloaderName, LegacyBootloaderName, StubName, UKIName} {
			t.Remove(dir + name)
		}
		ta, err := target.Lookup(arch)
		if err != nil {
			return nil, nil, err
		}
		talos := map[string]string{ta.EFIBootFile(): BootloaderName, ukiName: UKIName}
		for _, f := range in.ESP {
			leader, err := add(ESPDir+"/"+f.Path, "secureboot", f.Data, "")
			if err != nil {
				return nil, nil, err
			}
			name := talos[f.Path]
			if name == "" || legacy {
				continue
			}
			// A link to the leader: its bytes, hashed once.
			link, err := add(name, "secureboot", f.Data, leader.Digest)
			if err != nil {
				return nil, nil, err
			}
			leader.LinkGroup, link.LinkGroup = leader.Path, leader.Path
		}
	}
	return t, bodies, nil
}

// blobBody is a blob as a tar body, written from its start each time.
type blobBody struct{ Blob }

func (b blobBody) WriteTo(w io.Writer) (int64, error) {
	return io.Copy(w, io.NewSectionReader(b.Blob, 0, b.Size()))
}
