// Package compose makes the boot media of a schematic for a platform
// from what a release holds: the kernel, the release's initramfs, the
// command line and the EFI boot manager of an architecture, and the
// release's extensions. It needs no package base: builder image calls it
// with what the build just made, the Image Factory with what it read from
// a published release, and the same inputs give the same bytes.
package compose

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/api/target"
	"github.com/nodeforge/builder/builder/media/disktar"
	"github.com/nodeforge/builder/builder/media/fat"
	"github.com/nodeforge/builder/builder/media/meta"
	"github.com/nodeforge/builder/builder/media/ova"
	"github.com/nodeforge/builder/builder/media/qcow2"
	"github.com/nodeforge/builder/builder/media/uki"
	"github.com/nodeforge/builder/builder/media/vhd"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/builder/rootfs/sqfs"
	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/internal/digest"
)

// Boot is what the media take from one architecture of a release.
type Boot struct {
	Arch      string
	Vmlinuz   []byte
	Initramfs []byte // the release's, which the extensions' segment follows
	// WriteInitramfs, set instead of Initramfs, writes the release's
	// initramfs to w, checked as it is read: called once the segment is
	// made (it is not held while the segment's squashfs is written), and
	// with a scratch directory (Options.Work) into a file there, with the
	// segment after it, which the media read from (a real base's
	// initramfs is 140 MiB, never held in memory).
	WriteInitramfs func(w io.Writer) error
	Cmdline        []string // the image's kernel arguments
	// Bootloader is the EFI boot manager (systemd-boot) of the base; nil
	// makes no disk images.
	Bootloader    []byte
	KernelVersion string
	// Stub is the base's systemd-stub, for the Secure Boot media's UKI
	// (nil: the base has none, no Secure Boot media).
	Stub []byte
	// Modules returns the files of the kernel's module directory by path
	// below it (modules, modules.order, modules.builtin...), for the module
	// indexes of extensions that ship modules; called only then.
	Modules func() (map[string][]byte, error)
	// Key names the kernel's modules (the release's boot image's digest)
	// for Options.Layers; "" keeps no module indexes.
	Key string
}

// Extension is one extension of the release, for one architecture.
type Extension struct {
	Name     string
	Metadata extensions.Metadata
	Tree     *rootfs.Tree // its files as on the node
	// Load reads Tree when it is nil, the first time the files are
	// needed: an Image Factory's extension whose squashfs Options.Layers
	// keeps is not read at all. Modules must be set without it. A Tree
	// that Load can read again is dropped once its squashfs is made.
	Load    func() (*rootfs.Tree, error)
	Modules bool // it ships kernel modules
	// Generator names what made a virtual extension (the schematic's,
	// the embedded configuration's): its layer's origin in the report.
	Generator string
	// Key names the extension's content (its layer's digest in the
	// release) for Options.Layers; "" is never kept.
	Key string
}

// Options say what to make and how.
type Options struct {
	Schematic *schematic.Schematic
	// Platform is an api/platform name ("" is metal).
	Platform string
	// DiskFormats are the disk images to make (iso, raw, qcow2, vhd,
	// raw.tar.gz); nil is the platform's own list, empty none.
	DiskFormats []string
	// Compressions are the compressed variants of the ISO, raw and VHD
	// images (or of CompressedFormats): "zst", "xz", "gz".
	Compressions      []string
	CompressedFormats []string
	// Layers keeps the segment's squashfs images between compositions
	// (nil: none kept).
	Layers LayerCache
	// Squashfs, Cache, InitramfsCompression and Owners are the release's:
	// how its extension layers and its initramfs were written.
	Squashfs             rootfs.SquashfsOptions
	Cache                sqfs.BlockCache
	InitramfsCompression string
	Owners               rootfs.Owners
	PrettyName           string // the boot menu's title
	SourceDate           int64
	Work                 string // a scratch directory (the ISO tool's)
	// SecureBoot, when set, makes the ISO and disk images the Secure Boot
	// ones (named with SecureBootSuffix) and adds the signed UKI.
	SecureBoot *SecureBoot
	// UKI adds the plain (unsigned) UKI, <platform>-<arch>-uki.efi: the
	// base's systemd-stub with the kernel, the initramfs and the command
	// line of the disk images.
	UKI bool
	// Platforms is the release's platform table (the zero Table is
	// Talos's: api/platform).
	Platforms platform.Table
	// Version is the release's (Talos's numbering, "v" or not): the
	// schematic's layer carries the schematic from 1.7.0 on, as
	// upstream's (see schematicLayer).
	Version string
}

// table is the options' platform table.
func (o Options) table() platform.Table {
	if o.Platforms.Prefix == "" {
		return platform.Talos
	}
	return o.Platforms
}

// File is one file of the media: its bytes in Data, or, for the ISO
// (which xorriso writes), in the file Path of Options.Work, which the
// caller moves away (Save) or reads before removing Work.
type File struct {
	Name string
	Data []byte
	Path string
	// SHA256 is Path's SHA-256 (hex) when its maker hashed it (the ISO's
	// was, as its records were pointed): Save moving it need not read it.
	SHA256 string
}

// Bytes are the file's bytes, read from Path when it has one.
func (f File) Bytes() ([]byte, error) {
	if f.Path != "" {
		return os.ReadFile(f.Path)
	}
	return f.Data, nil
}

// Save puts the file at path with mode 0644, whole or not at all: Data
// written to a temporary file beside it, or Path, then renamed there
// (Path copied where it cannot be). It returns the file's SHA-256 and
// size. Nothing is synced: builder image and the factory keep media as
// they kept them before, in the output directory the caller makes
// durable, or in scratch space.
func (f File) Save(path string) (report.ArtifactInfo, error) {
	src := f.Path
	if src == "" || os.Rename(src, path) != nil {
		if err := atomicfile.Replace(path, 0o644, f.copyTo); err != nil {
			return report.ArtifactInfo{}, err
		}
		if f.Path == "" {
			return report.ArtifactInfo{SHA256: digest.SHA256Hex(f.Data), Size: int64(len(f.Data))}, nil
		}
	} else if err := os.Chmod(path, 0o644); err != nil {
		return report.ArtifactInfo{}, err
	} else if f.SHA256 != "" {
		fi, err := os.Stat(path)
		if err != nil {
			return report.ArtifactInfo{}, err
		}
		return report.ArtifactInfo{SHA256: f.SHA256, Size: fi.Size()}, nil
	}
	r, err := os.Open(path)
	if err != nil {
		return report.ArtifactInfo{}, err
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return report.ArtifactInfo{}, err
	}
	return report.ArtifactInfo{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// copyTo writes the file's bytes to w.
func (f File) copyTo(w io.Writer) error {
	if f.Path == "" {
		_, err := w.Write(f.Data)
		return err
	}
	r, err := os.Open(f.Path)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.Copy(w, r)
	return err
}

// Result is the media of one architecture: kernel-<arch>,
// initramfs-<arch>.xz (the release's initramfs with the extensions'
// segment appended: the kernel unpacks concatenated cpio archives in
// order), cmdline-<platform>-<arch> (the kernel arguments as Talos's
// imager puts them together: platform.Table.KernelArgs),
// ipxe-<platform>-<arch>, the disk images <platform>-<arch>.<format> and
// the UKIs.
type Result struct {
	Schematic, Platform string
	Files               []File
	// Initramfs is the release's initramfs with the extensions'
	// segment appended; nil when it is in a file (Boot.WriteInitramfs),
	// as InitramfsBlob is.
	Initramfs     []byte
	InitramfsBlob Blob
	Segment       []rootfs.CpioEntry // what the appended segment holds
	ISOTool       string             // what made the ISO, when there is one
	// PCR11 is what systemd-stub leaves in PCR 11 booting the Secure Boot
	// disk images' UKI (the -uki.efi file), when it carries signed PCR
	// policies; the ISO's UKI (the ISO's command line) has its own.
	PCR11 []byte
	// ESP is the Secure Boot media's EFI System Partition (nil without
	// Secure Boot): what the Secure Boot installer carries.
	ESP []fat.File
	// InstallerCmdline is the command line a platform's installer
	// carries: the disk images' (no META values: as Talos's, an
	// installer has none).
	InstallerCmdline []byte
}

// OverlayError refuses a schematic that asks for a board overlay: no
// release ships overlays yet, and media without the one asked for would
// not boot that board.
type OverlayError struct{ Name, Image string }

func (e *OverlayError) Error() string {
	return fmt.Sprintf("the schematic asks for the overlay %s (%s), and this release ships no overlays", e.Name, e.Image)
}

// Media makes the boot media of o.Schematic for one architecture and
// o.Platform from the release's boot assets b and its extensions: the
// files of OUT/media/<schematic id>/ (see Result).
func Media(ctx context.Context, b Boot, exts []*Extension, o Options) (*Result, error) {
	sch, arch := o.Schematic, b.Arch
	if err := Refusal(sch, Output{Kind: "initramfs", SecureBoot: o.SecureBoot != nil}); err != nil {
		return nil, err
	}
	p, ta, err := o.platform(arch)
	if err != nil {
		return nil, err
	}
	id, err := sch.ID()
	if err != nil {
		return nil, err
	}
	layers, err := segmentLayers(exts, sch, o.Version)
	if err != nil {
		return nil, err
	}
	initramfs, blob, initrdPath, entries, err := b.withSegment(layers, o)
	if err != nil {
		return nil, err
	}
	b.Initramfs = nil // in initramfs now: this copy (a real base's is 140 MiB) may be freed
	// As Talos's: the media with no META partition (the command line, PXE,
	// the ISO) carry the META values on the command line, for the
	// installer to write; the disk images, the UKIs and the installer
	// have them in the partition or not at all.
	var values []meta.Value
	for _, m := range sch.Customization.Meta {
		values = append(values, meta.Value{Key: m.Key, Value: m.Value})
	}
	table := o.table()
	a := o.kernelArgs(b)
	diskArgs := table.KernelArgs(p, ta.OCI, a)
	if len(values) > 0 {
		a.Meta = meta.Env(values)
	}
	args := table.KernelArgs(p, ta.OCI, a)
	a.ISO = true
	isoArgs := table.KernelArgs(p, ta.OCI, a)
	kernelName, initrdName := "kernel-"+arch, "initramfs-"+arch+".xz"
	ipxe := fmt.Sprintf("#!ipxe\nkernel %s %s\ninitrd %s\nboot\n", kernelName, strings.Join(args, " "), initrdName)
	r := &Result{Schematic: id, Platform: p.Name, Initramfs: initramfs, InitramfsBlob: blob, Segment: entries, Files: []File{
		{Name: kernelName, Data: b.Vmlinuz},
		{Name: initrdName, Data: initramfs, Path: initrdPath},
		// No newline: the kernel's and Talos's command line asset have none.
		{Name: CmdlineName(p.Name, arch), Data: []byte(strings.Join(args, " "))},
		{Name: "ipxe-" + p.Name + "-" + arch, Data: []byte(ipxe)},
	}, InstallerCmdline: []byte(strings.Join(diskArgs, " "))}
	prefix := p.Name + "-" + arch
	if o.UKI && o.SecureBoot == nil {
		uf, err := plainUKIFile(b, blob, diskArgs, o, prefix+"-uki.efi")
		if err != nil {
			return nil, err
		}
		r.Files = append(r.Files, uf)
	}
	if b.Bootloader == nil {
		return r, nil
	}
	formats := o.DiskFormats
	if formats == nil {
		formats = p.Formats
	}
	for _, f := range formats {
		if err := Refusal(sch, Output{Kind: DiskKind(f), SecureBoot: o.SecureBoot != nil}); err != nil {
			return nil, err
		}
	}
	// The disk images boot with the base's EFI boot manager.
	isoFiles := bootFiles(ta, b.Bootloader, b.Vmlinuz, blob, o.PrettyName, isoArgs)
	diskFiles := bootFiles(ta, b.Bootloader, b.Vmlinuz, blob, o.PrettyName, diskArgs)
	if o.SecureBoot != nil {
		// Signing hashes the UKI whole: Secure Boot media read the
		// initramfs into memory.
		if initramfs, err = blobBytes(initramfs, blob); err != nil {
			return nil, err
		}
		// The UKI's .osrel is made from the release's pretty name, which
		// a release records (its /etc/os-release is inside the root):
		// media from a build and from its release are the same bytes.
		su, files, err := signedBoot(b, initramfs, diskArgs, o.PrettyName, o.SecureBoot, sch.Customization.SecureBoot)
		if err != nil {
			return nil, err
		}
		prefix += SecureBootSuffix
		diskFiles, r.PCR11, r.ESP = files, su.PCR11, files
		if slices.Contains(formats, "iso") {
			// The ISO's UKI has the ISO's command line; signed apart.
			if _, isoFiles, err = signedBoot(b, initramfs, isoArgs, o.PrettyName, o.SecureBoot, sch.Customization.SecureBoot); err != nil {
				return nil, err
			}
		}
		r.Files = append(r.Files, File{Name: prefix + "-uki.efi", Data: su.Image})
	}
	metaValues := map[uint8][]byte{}
	for _, m := range sch.Customization.Meta {
		metaValues[m.Key] = []byte(m.Value)
	}
	compressed := o.CompressedFormats
	if compressed == nil {
		compressed = []string{"iso", "raw", "vhd"}
	}
	// The appliance is named and configured as Talos's.
	app := ova.Options{Name: table.Prefix, ConfigKey: table.Param("config"), SourceDate: o.SourceDate}
	disks, tool, err := diskImages(ctx, o.Work, espFiles{iso: isoFiles, disk: diskFiles}, id, metaValues,
		diskFormats{formats: formats, compressions: o.Compressions, compressed: compressed, sectorSize: int(sch.Customization.DiskImage.SectorSize)}, app)
	if err != nil {
		return nil, err
	}
	r.ISOTool = tool
	for _, dk := range disks {
		r.Files = append(r.Files, File{Name: prefix + "." + dk.Name, Data: dk.Data, Path: dk.Path})
	}
	return r, nil
}

// fromRaw makes the formats of want made from the raw disk (qcow2, vhd,
// raw.tar.gz, ova), in that order: qcow2 and VHD from its file into
// files, never whole in memory; the others (and all without a scratch
// directory) from its bytes.
func fromRaw(work string, rawFile File, want map[string]bool, app ova.Options) ([]File, error) {
	var out []File
	var raw []byte // read for the formats made from it whole
	for _, f := range []string{"qcow2", "vhd", "raw.tar.gz", "ova"} {
		if !want[f] {
			continue
		}
		if rawFile.Path != "" && (f == "qcow2" || f == "vhd") {
			p, err := scratchFile(work, "disk-*."+f, func(w io.Writer) error { return fromRawFile(w, rawFile.Path, f, app.SourceDate) })
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out = append(out, File{Name: f, Path: p})
			continue
		}
		if raw == nil {
			var err error
			if raw, err = rawFile.Bytes(); err != nil {
				return nil, err
			}
		}
		var buf bytes.Buffer
		var err error
		switch f {
		case "qcow2":
			// Sparse already: no compressed variants. The buffer is
			// sized at once: growing it copied and zeroed 150 MB
			// several times.
			buf.Grow(int(qcow2.Size(raw)))
			err = qcow2.Write(&buf, raw)
		case "vhd":
			buf.Grow(len(raw) + 512)
			err = vhd.Write(&buf, raw, app.SourceDate)
		case "raw.tar.gz":
			err = disktar.Write(&buf, raw, app.SourceDate)
		case "ova":
			err = ova.Write(&buf, raw, app)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, File{Name: f, Data: buf.Bytes()})
	}
	return out, nil
}

// fromRawFile writes the qcow2 or VHD image of the raw disk in the file
// path to w.
func fromRawFile(w io.Writer, path, format string, sde int64) error {
	r, err := os.Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	fi, err := r.Stat()
	if err != nil {
		return err
	}
	if format == "qcow2" {
		return qcow2.WriteFrom(w, r, fi.Size())
	}
	return vhd.WriteFrom(w, r, fi.Size(), sde)
}

// rawDisk is the raw disk image (rawImageTo) as a file of work: its
// .xz and .zst variants are made from the file, and it is never whole in
// memory. Without a scratch directory it is in memory.
func rawDisk(work string, files []fat.File, sde int64, id string, metaValues map[uint8][]byte, sectorSize int) (File, error) {
	if work == "" {
		raw, err := rawImage(files, sde, id, metaValues, sectorSize)
		return File{Name: "raw", Data: raw}, err
	}
	p, err := scratchFile(work, "raw-*.img", func(w io.Writer) error {
		_, err := rawImageTo(w, files, sde, id, metaValues, sectorSize)
		return err
	})
	return File{Name: "raw", Path: p}, err
}

// scratchFile writes what write writes into a new file of work named
// after pattern (os.CreateTemp's), buffered, and returns its path; on an
// error nothing is left.
func scratchFile(work, pattern string, write func(io.Writer) error) (string, error) {
	// As the ISO's staging directory, work is made when missing.
	if err := os.MkdirAll(work, 0o755); err != nil {
		return "", err
	}
	out, err := os.CreateTemp(work, pattern)
	if err != nil {
		return "", err
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err = errors.Join(err, out.Close()); err != nil {
		os.Remove(out.Name())
		return "", err
	}
	return out.Name(), nil
}

// Variant compresses big with algo (xz, zst, gz: the downloads' variants,
// as Media makes them) into a file of
// work, read from big's file or bytes: a variant is never whole in
// memory.
func Variant(work string, big File, algo string) (File, error) {
	name := big.Name + "." + algo
	if work == "" { // no scratch directory: in memory
		data, err := big.Bytes()
		if err == nil {
			data, err = compressVariant(algo, data)
		}
		return File{Name: name, Data: data}, err
	}
	src, size := io.ReaderAt(bytes.NewReader(big.Data)), int64(len(big.Data))
	if big.Path != "" {
		f, err := os.Open(big.Path)
		if err != nil {
			return File{}, err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return File{}, err
		}
		src, size = f, fi.Size()
	}
	p, err := scratchFile(work, "variant-*."+name, func(w io.Writer) error { return compressVariantTo(w, algo, src, size, work) })
	if err != nil {
		return File{}, fmt.Errorf("%s: %w", name, err)
	}
	return File{Name: name, Path: p}, nil
}

// Blob is content read at offsets, of a known size: the initramfs, in
// memory (*bytes.Reader) or in a scratch file (*io.SectionReader).
type Blob interface {
	io.ReaderAt
	Size() int64
}

// initramfsWith is the release's initramfs with seg appended, in memory
// (the bytes, and the blob reading them): without a scratch directory,
// or for a release that gives its initramfs as bytes (startInitramfs
// writes it into a file otherwise).
func (b Boot) initramfsWith(seg []byte) ([]byte, Blob, string, error) {
	var buf bytes.Buffer
	buf.Grow(len(b.Initramfs) + len(seg))
	if b.WriteInitramfs == nil {
		buf.Write(b.Initramfs)
	} else if err := b.WriteInitramfs(&buf); err != nil {
		return nil, nil, "", fmt.Errorf("the release's initramfs: %w", err)
	}
	buf.Write(seg)
	return buf.Bytes(), bytes.NewReader(buf.Bytes()), "", nil
}

// withSegment is the release's initramfs with the segment of layers
// appended (initramfsFile.finish's results) and the segment's entries.
// The release's initramfs goes into its file while the segment is made:
// a copy, for which the squashfs compression leaves room.
func (b Boot) withSegment(layers []*Extension, o Options) ([]byte, Blob, string, []rootfs.CpioEntry, error) {
	pending := b.startInitramfs(o.Work)
	seg, entries, err := extensionSegment(b, layers, o)
	if err != nil {
		pending.abort()
		return nil, nil, "", nil, err
	}
	initramfs, blob, path, err := pending.finish(b, seg)
	return initramfs, blob, path, entries, err
}

// initramfsFile is the release's initramfs being written into a new file
// of the scratch directory while the segment is made; finish appends the
// segment, abort drops the file.
type initramfsFile struct {
	f    *os.File
	err  error      // the file could not be made
	done chan error // the copy's end
}

// startInitramfs starts the copy when the release writes its initramfs
// (Boot.WriteInitramfs) and there is a scratch directory; otherwise nil,
// and finish is initramfsWith.
func (b Boot) startInitramfs(work string) *initramfsFile {
	if b.WriteInitramfs == nil || work == "" {
		return nil
	}
	p := &initramfsFile{done: make(chan error, 1)}
	if p.err = os.MkdirAll(work, 0o755); p.err == nil {
		p.f, p.err = os.CreateTemp(work, "initramfs-*.xz")
	}
	if p.err != nil {
		p.done <- nil
		return p
	}
	go func() {
		bw := bufio.NewWriterSize(p.f, 1<<20)
		err := b.WriteInitramfs(bw)
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			err = fmt.Errorf("the release's initramfs: %w", err)
		}
		p.done <- err
	}()
	return p
}

// finish is initramfsWith of the copy started: the segment appended, the
// file as the blob (it closes when the blob is collected), its path.
func (p *initramfsFile) finish(b Boot, seg []byte) ([]byte, Blob, string, error) {
	if p == nil {
		return b.initramfsWith(seg)
	}
	err := errors.Join(<-p.done, p.err)
	if err == nil {
		_, err = p.f.Write(seg)
	}
	var fi os.FileInfo
	if err == nil {
		fi, err = p.f.Stat()
	}
	if err != nil {
		p.drop()
		return nil, nil, "", err
	}
	return nil, io.NewSectionReader(p.f, 0, fi.Size()), p.f.Name(), nil
}

// abort waits for the copy and drops its file.
func (p *initramfsFile) abort() {
	if p != nil {
		<-p.done
		p.drop()
	}
}

func (p *initramfsFile) drop() {
	if p.f != nil {
		p.f.Close()
		os.Remove(p.f.Name())
	}
}

// plainUKIFile is plainUKI as the medium name, a file of o.Work.
func plainUKIFile(b Boot, initramfs Blob, args []string, o Options, name string) (File, error) {
	if b.Stub == nil {
		return File{}, errors.New("a UKI needs the base's systemd-stub, and the release has none (image.stub)")
	}
	u, err := plainUKI(b, initramfs, args, o.PrettyName)
	if err != nil {
		return File{}, err
	}
	return fileOf(o.Work, name, u.Size(), u.WriteTo)
}

// blobBytes is data, or when nil blob's bytes read whole.
func blobBytes(data []byte, blob Blob) ([]byte, error) {
	if data != nil {
		return data, nil
	}
	return readBlob(blob)
}

// readBlob reads a blob whole.
func readBlob(b Blob) ([]byte, error) {
	data := make([]byte, b.Size())
	_, err := io.ReadFull(io.NewSectionReader(b, 0, b.Size()), data)
	return data, err
}

// fileOf is a medium of size bytes that write makes: a file of work,
// or bytes without one.
func fileOf(work, name string, size int64, write func(io.Writer) (int64, error)) (File, error) {
	if work == "" {
		var b bytes.Buffer
		b.Grow(int(size))
		_, err := write(&b)
		return File{Name: name, Data: b.Bytes()}, err
	}
	p, err := scratchFile(work, "medium-*-"+name, func(w io.Writer) error { _, err := write(w); return err })
	return File{Name: name, Path: p}, err
}

// platform is the options' platform and the architecture.
func (o Options) platform(arch string) (platform.Platform, target.Arch, error) {
	p, err := o.table().Lookup(o.Platform)
	if err != nil {
		return p, target.Arch{}, err
	}
	ta, err := target.Lookup(arch)
	return p, ta, err
}

// InstallerUKI is the plain UKI an installer of o.Schematic for o.Platform
// carries at usr/install/<arch>/vmlinuz.efi, where Talos's installer takes
// it for systemd-boot: the base's systemd-stub with the kernel, initramfs
// (the schematic's) and the command line of the disk images; nil when the
// base has no stub.
func InstallerUKI(b Boot, initramfs Blob, o Options) (*uki.Image, error) {
	if b.Stub == nil {
		return nil, nil
	}
	p, ta, err := o.platform(b.Arch)
	if err != nil {
		return nil, err
	}
	return plainUKI(b, initramfs, o.table().KernelArgs(p, ta.OCI, o.kernelArgs(b)), o.PrettyName)
}

// kernelArgs are the disk images' kernel arguments before the platform's:
// the image's and the schematic's (none without one).
func (o Options) kernelArgs(b Boot) platform.Args {
	a := platform.Args{Base: b.Cmdline}
	if o.Schematic != nil {
		a.Extra = o.Schematic.Customization.ExtraKernelArgs
	}
	return a
}

// plainUKI is an unsigned UKI: the stub with the kernel, the initramfs,
// the command line, an os-release of prettyName and the kernel's version.
func plainUKI(b Boot, initramfs Blob, args []string, prettyName string) (*uki.Image, error) {
	secs := ukiSections(b, nil, args, prettyName)
	for i := range secs {
		if secs[i].Name == ".initrd" {
			secs[i].Body = initramfs // read where it is, not copied
		}
	}
	u, err := uki.Layout(b.Stub, secs)
	if err != nil {
		return nil, fmt.Errorf("unified kernel image: %w", err)
	}
	return u, nil
}

// CmdlineName is the command line's file: cmdline-<platform>-<arch>.
func CmdlineName(platform, arch string) string { return "cmdline-" + platform + "-" + arch }

// ExtensionsYAML is /extensions.yaml of the appended initramfs segment:
// the layers in mount order with their manifests' metadata.
type ExtensionsYAML struct {
	Layers []Layer `yaml:"layers"`
}

// Layer is one squashfs of the segment.
type Layer struct {
	Image    string              `yaml:"image"`
	Metadata extensions.Metadata `yaml:"metadata"`
}

// The generators of the segment's entries (report.Origin), besides depmod
// (the module indexes' layer).
const (
	GeneratorExtensionLayer = "extension-layer"
	GeneratorExtensionsYAML = "extensions.yaml"
)

// SegmentGenerators describe the generators of the initramfs segment's
// entries but depmod, for a report that lists them.
var SegmentGenerators = map[string]string{
	GeneratorExtensionLayer: "the squashfs of one of the schematic's extensions in the initramfs segment",
	GeneratorExtensionsYAML: "/extensions.yaml of the initramfs segment: its layers in mount order with their manifests' metadata",
	SchematicLayerName:      "the virtual extension schematic (as the Image Factory's): the schematic's ID as its version and an empty " + SchematicDir + "/<ID>",
	EmbeddedConfigName:      "the virtual extension embedded-config (as Talos's imager): the schematic's embeddedMachineConfiguration as " + EmbeddedConfigPath,
}

// extensionSegment packs the layers (segmentLayers) for the initramfs:
// one squashfs per extension in that order (0.sqsh, 1.sqsh, ...), one more
// with the module indexes of the kernel's and the extensions' modules
// together when any extension ships modules, and /extensions.yaml listing
// them. It returns the compressed cpio to append to the initramfs and
// its entries (for the report).
func extensionSegment(b Boot, layers []*Extension, o Options) ([]byte, []rootfs.CpioEntry, error) {
	sde, compression := o.SourceDate, o.InitramfsCompression
	var doc ExtensionsYAML
	var entries []rootfs.CpioEntry
	var withModules []*Extension
	for i, e := range layers {
		data, err := o.layerImage(e)
		if err != nil {
			return nil, nil, err
		}
		img := fmt.Sprintf("%d.sqsh", i)
		doc.Layers = append(doc.Layers, Layer{Image: img, Metadata: e.Metadata})
		gen := GeneratorExtensionLayer
		if e.Generator != "" {
			gen = e.Generator
		}
		entries = append(entries, rootfs.CpioEntry{Name: img, Mode: 0o100444, Data: data, Origin: report.Origin{Generator: gen}})
		if e.Modules {
			withModules = append(withModules, e)
		}
	}
	if len(withModules) > 0 {
		data, err := o.modulesImage(b, withModules)
		if err != nil {
			return nil, nil, fmt.Errorf("modules layer: %w", err)
		}
		img := fmt.Sprintf("%d.sqsh", len(layers))
		doc.Layers = append(doc.Layers, Layer{Image: img, Metadata: extensions.Metadata{
			Name: "modules.dep", Version: b.KernelVersion, Description: "module indexes of the kernel's and the extensions' modules",
		}})
		entries = append(entries, rootfs.CpioEntry{Name: img, Mode: 0o100444, Data: data, Origin: report.Origin{Generator: "depmod"}})
	}
	// The squashfs images are made: a tree that can be read again lets go
	// of its files (a real extension's are tens of MB) before the
	// initramfs is read.
	for _, e := range layers {
		if e.Load != nil {
			e.Tree = nil
		}
	}
	var y bytes.Buffer
	enc := yaml.NewEncoder(&y)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, nil, err
	}
	enc.Close()
	entries = append(entries, rootfs.CpioEntry{Name: "extensions.yaml", Mode: 0o100444, Data: y.Bytes(), Origin: report.Origin{Generator: GeneratorExtensionsYAML}})
	size := 0
	for _, e := range entries {
		size += len(e.Data)
	}
	seg, err := CompressInitramfs(compression, size, func(w io.Writer) error { return rootfs.WriteCpio(w, entries, sde) })
	if err != nil {
		return nil, nil, err
	}
	return seg, entries, nil
}

// espFiles are the ESP trees of the ISO and of the disks (their command
// lines differ).
type espFiles struct{ iso, disk []fat.File }

// diskFormats are the disk formats to make, the compressions of the
// downloads and which formats get them, and the disk images' logical
// sector size (customization.diskImage.sectorSize; 0: 512).
type diskFormats struct {
	formats, compressions, compressed []string
	sectorSize                        int
}

// diskImages makes the disk images of formats (file name suffixes, see
// api/platform) from the boot files (the ISO's, with the ISO's command
// line, and the disks'), in the order the formats are listed there, then
// the compressed variants of those in compressed. It returns them named by
// suffix, and the tool that made the ISO.
func diskImages(ctx context.Context, work string, esps espFiles, id string, metaValues map[uint8][]byte, fs diskFormats, app ova.Options) ([]File, string, error) {
	isoFiles, diskFiles := esps.iso, esps.disk
	formats, compressions, compressed := fs.formats, fs.compressions, fs.compressed
	sde := app.SourceDate
	want := map[string]bool{}
	for _, f := range formats {
		if err := platform.CheckFormat(f); err != nil {
			return nil, "", err
		}
		want[f] = true
	}
	var out []File
	var tool string
	if want["iso"] {
		iso, sum, t, err := isoImage(ctx, work, isoFiles, sde, id, "NODEFORGE")
		if err != nil {
			return nil, "", err
		}
		tool = t
		out = append(out, File{Name: "iso", Path: iso, SHA256: sum})
	}
	if want["raw"] || want["qcow2"] || want["vhd"] || want["raw.tar.gz"] || want["ova"] {
		rawFile, err := rawDisk(work, diskFiles, sde, id, metaValues, fs.sectorSize)
		if err != nil {
			return nil, "", err
		}
		if want["raw"] {
			out = append(out, rawFile)
		} else if rawFile.Path != "" {
			defer os.Remove(rawFile.Path)
		}
		made, err := fromRaw(work, rawFile, want, app)
		if err != nil {
			return nil, "", err
		}
		out = append(out, made...)
	}
	// The large ones also compressed, as downloads.
	var variants []File
	for _, big := range out {
		if !slices.Contains(compressed, big.Name) {
			continue
		}
		for _, c := range compressions {
			v, err := Variant(work, big, c)
			if err != nil {
				return nil, "", err
			}
			variants = append(variants, v)
		}
	}
	return append(out, variants...), tool, nil
}
