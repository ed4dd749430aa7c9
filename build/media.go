package build

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/build/media/disktar"
	"github.com/nodeforge/builder/build/media/fat"
	"github.com/nodeforge/builder/build/media/gpt"
	"github.com/nodeforge/builder/build/media/meta"
	"github.com/nodeforge/builder/build/media/qcow2"
	"github.com/nodeforge/builder/build/media/vhd"
	"github.com/nodeforge/builder/build/rootfs"
	"github.com/nodeforge/builder/build/rootfs/sqfs"
	"github.com/nodeforge/builder/internal/digest"
)

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

// extensionSegment packs the named extensions for the initramfs: one
// squashfs per extension in name order (0.sqsh, 1.sqsh, ...), one more
// with the module indexes of the kernel's and the extensions' modules
// together when any extension ships modules, and /extensions.yaml listing
// them. It returns the compressed cpio to append to the initramfs and
// its entries (for the report).
func extensionSegment(exts []*extensionBuild, names []string, as *assembly, owners rootfs.Owners, sde int64,
	sq rootfs.SquashfsOptions, cache sqfs.BlockCache, compression string) ([]byte, []rootfs.CpioEntry, error) {
	byName := map[string]*extensionBuild{}
	var have []string
	for _, e := range exts {
		byName[e.name] = e
		have = append(have, e.name)
	}
	names = append([]string(nil), names...)
	sort.Strings(names)
	var doc ExtensionsYAML
	var entries []rootfs.CpioEntry
	modules := map[string][]byte{} // path under the modules dir -> bytes, kernel's and extensions'
	anyModules := false
	for i, name := range names {
		e := byName[name]
		if e == nil {
			return nil, nil, fmt.Errorf("schematic: extension %q is not built by this release (have %s)", name, strings.Join(have, ", "))
		}
		var b bytes.Buffer
		if err := e.tree.WriteSquashfsTo(&b, owners, sde, sq, cache); err != nil {
			return nil, nil, fmt.Errorf("extension %s: %w", name, err)
		}
		img := fmt.Sprintf("%d.sqsh", i)
		doc.Layers = append(doc.Layers, Layer{Image: img, Metadata: e.metadata})
		entries = append(entries, rootfs.CpioEntry{Name: img, Mode: 0o100444, Data: b.Bytes(), Origin: generated("extension-layer")})
		if e.report.Modules {
			anyModules = true
			for _, n := range e.tree.Nodes() {
				if rel, ok := strings.CutPrefix(n.Path, "/usr/lib/modules/"+as.kernel.Version+"/"); ok && n.Kind == rootfs.KindFile {
					modules[rel] = n.Data
				}
			}
		}
	}
	if anyModules {
		prefix := as.kernel.modDir + "/"
		for _, n := range as.tree.Nodes() {
			if rel, ok := strings.CutPrefix(n.Path, prefix); ok && n.Kind == rootfs.KindFile {
				if _, ext := modules[rel]; !ext {
					modules[rel] = n.Data
				}
			}
		}
		idx, _, err := depmod(as.kernel.Version, modules)
		if err != nil {
			return nil, nil, err
		}
		t := rootfs.New()
		for name, data := range idx {
			if err := t.Add(&rootfs.Node{Path: "/usr/lib/modules/" + as.kernel.Version + "/" + name, Kind: rootfs.KindFile, Mode: 0o644,
				User: "root", Group: "root", Data: data, Digest: digest.SHA256Hex(data), Origin: generated("depmod")}); err != nil {
				return nil, nil, err
			}
		}
		var b bytes.Buffer
		if err := t.WriteSquashfsTo(&b, owners, sde, sq, cache); err != nil {
			return nil, nil, fmt.Errorf("modules layer: %w", err)
		}
		img := fmt.Sprintf("%d.sqsh", len(names))
		doc.Layers = append(doc.Layers, Layer{Image: img, Metadata: extensions.Metadata{
			Name: "modules.dep", Version: as.kernel.Version, Description: "module indexes of the kernel's and the extensions' modules",
		}})
		entries = append(entries, rootfs.CpioEntry{Name: img, Mode: 0o100444, Data: b.Bytes(), Origin: generated("depmod")})
	}
	var y bytes.Buffer
	enc := yaml.NewEncoder(&y)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, nil, err
	}
	enc.Close()
	entries = append(entries, rootfs.CpioEntry{Name: "extensions.yaml", Mode: 0o100444, Data: y.Bytes(), Origin: generated("extensions.yaml")})
	size := 0
	for _, e := range entries {
		size += len(e.Data)
	}
	seg, err := compressInitramfs(compression, size, func(w io.Writer) error { return rootfs.WriteCpio(w, entries, sde) })
	if err != nil {
		return nil, nil, err
	}
	return seg, entries, nil
}

// mediaResult is what writeMedia wrote for one architecture.
type mediaResult struct {
	Initramfs []byte // with the extensions appended
	ISOTool   string
	Schematic string
	Platform  string
	Files     map[string]report.ArtifactInfo
	Layers    []report.FileEntry
}

// writeMedia writes the boot media of a schematic for one architecture
// and the options' platform into dir/<schematic id>/: kernel-<arch>,
// initramfs-<arch>.xz (the release's initramfs with the extensions'
// segment appended: the kernel unpacks concatenated cpio archives in
// order), cmdline-<platform>-<arch> (the image's kernel arguments, the
// platform's and the schematic's), ipxe-<platform>-<arch>, and the disk
// images <platform>-<arch>.<format>.
func (b *archBuild) writeMedia(ctx context.Context, dir string, initramfs, bootloader []byte) (*mediaResult, error) {
	sch, arch, exts, as, owners, sde := b.opts.Schematic, b.arch, b.exts, b.as, b.owners, b.sde
	sq, cache, compression := b.opts.Squashfs, b.blockCache(), b.spec.Image.InitramfsCompression
	p, err := platform.Lookup(b.opts.Platform)
	if err != nil {
		return nil, err
	}
	id, err := sch.ID()
	if err != nil {
		return nil, err
	}
	seg, entries, err := extensionSegment(exts, sch.Extensions(), as, owners, sde, sq, cache, compression)
	if err != nil {
		return nil, err
	}
	d := filepath.Join(dir, id)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	args := slices.Concat(b.spec.Image.Cmdline, p.Args, sch.Customization.ExtraKernelArgs)
	kernelName, initrdName := "kernel-"+arch, "initramfs-"+arch+".xz"
	ipxe := fmt.Sprintf("#!ipxe\nkernel %s %s\ninitrd %s\nboot\n", kernelName, strings.Join(args, " "), initrdName)
	files := []mediaFile{
		{kernelName, as.kernel.vmlinuz},
		{initrdName, append(append(make([]byte, 0, len(initramfs)+len(seg)), initramfs...), seg...)},
		{"cmdline-" + p.Name + "-" + arch, []byte(strings.Join(args, " ") + "\n")},
		{"ipxe-" + p.Name + "-" + arch, []byte(ipxe)},
	}
	r := &mediaResult{Schematic: id, Platform: p.Name, Files: map[string]report.ArtifactInfo{}, Initramfs: files[1].data}
	if bootloader != nil {
		formats := b.opts.DiskFormats
		if formats == nil {
			formats = p.Formats
		}
		// The disk images boot with the base's EFI boot manager.
		bf := bootFiles(bootloader, as.kernel.vmlinuz, files[1].data, b.spec.Image.OS.PrettyName, args)
		meta := map[uint8][]byte{}
		for _, m := range sch.Customization.Meta {
			meta[m.Key] = []byte(m.Value)
		}
		disks, tool, err := diskImages(ctx, dir, bf, id, meta, formats, b.opts.DiskCompressions, sde)
		if err != nil {
			return nil, err
		}
		r.ISOTool = tool
		for _, dk := range disks {
			files = append(files, mediaFile{p.Name + "-" + arch + "." + dk.name, dk.data})
		}
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(d, f.name), f.data, 0o644); err != nil {
			return nil, err
		}
		r.Files["media/"+id+"/"+f.name] = report.ArtifactInfo{SHA256: digest.SHA256Hex(f.data), Size: int64(len(f.data))}
	}
	for _, e := range entries {
		r.Layers = append(r.Layers, report.FileEntry{Path: "/" + e.Name, Type: "file", Mode: fmt.Sprintf("%04o", e.Mode&0o7777), Size: int64(len(e.Data)), SHA256: digest.SHA256Hex(e.Data), Origin: e.Origin})
	}
	return r, nil
}

// diskImages makes the disk images of formats (file name suffixes, see
// api/platform) from the boot files, in the order the formats are listed
// there, then the compressed variants of the ISO, raw and VHD images. It
// returns them named by suffix, and the tool that made the ISO.
func diskImages(ctx context.Context, work string, bf []fat.File, id string, meta map[uint8][]byte, formats, compressions []string, sde int64) ([]mediaFile, string, error) {
	want := map[string]bool{}
	for _, f := range formats {
		if err := platform.CheckFormat(f); err != nil {
			return nil, "", err
		}
		want[f] = true
	}
	var out []mediaFile
	var tool string
	if want["iso"] {
		esp, err := espImage(bf, sde, id, 0)
		if err != nil {
			return nil, "", err
		}
		iso, t, err := isoImage(ctx, work, esp, bf, sde, "NODEFORGE")
		if err != nil {
			return nil, "", err
		}
		tool = t
		out = append(out, mediaFile{"iso", iso})
	}
	if want["raw"] || want["qcow2"] || want["vhd"] || want["raw.tar.gz"] {
		raw, err := rawImage(bf, sde, id, meta)
		if err != nil {
			return nil, "", err
		}
		if want["raw"] {
			out = append(out, mediaFile{"raw", raw})
		}
		for _, f := range []string{"qcow2", "vhd", "raw.tar.gz"} {
			if !want[f] {
				continue
			}
			var buf bytes.Buffer
			switch f {
			case "qcow2":
				// Sparse already: no compressed variants.
				err = qcow2.Write(&buf, raw)
			case "vhd":
				err = vhd.Write(&buf, raw, sde)
			case "raw.tar.gz":
				err = disktar.Write(&buf, raw, sde)
			}
			if err != nil {
				return nil, "", fmt.Errorf("%s: %w", f, err)
			}
			out = append(out, mediaFile{f, buf.Bytes()})
		}
	}
	// The large ones also compressed, as downloads.
	var variants []mediaFile
	for _, big := range out {
		if big.name != "iso" && big.name != "raw" && big.name != "vhd" {
			continue
		}
		for _, c := range compressions {
			v, err := compressVariant(c, big.data)
			if err != nil {
				return nil, "", err
			}
			variants = append(variants, mediaFile{big.name + "." + c, v})
		}
	}
	return append(out, variants...), tool, nil
}

// mediaFile is one file of a schematic's media.
type mediaFile struct {
	name string
	data []byte
}

// bootFiles are what an EFI system partition holds: systemd-boot as the
// removable-media boot path, its configuration with one entry, the kernel
// and the initramfs.
func bootFiles(bootloader, vmlinuz, initramfs []byte, title string, args []string) []fat.File {
	entry := fmt.Sprintf("title %s\nlinux /nodeforge/vmlinuz\ninitrd /nodeforge/initramfs.xz\noptions %s\n", title, strings.Join(args, " "))
	return []fat.File{
		{Path: "EFI/BOOT/BOOTX64.EFI", Data: bootloader},
		{Path: "loader/loader.conf", Data: []byte("timeout 0\ndefault nodeforge.conf\n")},
		{Path: "loader/entries/nodeforge.conf", Data: []byte(entry)},
		{Path: "nodeforge/vmlinuz", Data: vmlinuz},
		{Path: "nodeforge/initramfs.xz", Data: initramfs},
	}
}

// mediaGUIDs is the namespace of the disk images' GUIDs: the disk's and
// each partition's are version 5 UUIDs of a name in it, so every build
// gives the same ones.
var mediaGUIDs = gpt.MustParse("6e6f6465-666f-5267-8565-6d6564696131")

// espImage is the FAT file system of the EFI system partition.
func espImage(files []fat.File, sde int64, id string, hidden uint32) ([]byte, error) {
	var vol uint32 // the schematic ID's first 32 bits
	if len(id) >= 8 {
		fmt.Sscanf(id[:8], "%08x", &vol)
	}
	return fat.Write(files, fat.Options{Label: "NODEFORGE", VolumeID: vol, Time: time.Unix(sde, 0), MinSize: espSize(files), HiddenSectors: hidden})
}

// espSize is the EFI system partition's size for its files: a tenth
// more, and 8 MiB of room.
func espSize(files []fat.File) int64 {
	var total int64
	for _, f := range files {
		total += int64(len(f.Data))
	}
	return total*11/10 + 8<<20
}

// rawImage is a GPT disk: EFI (the system partition with the boot
// files), BIOS (empty, for a BIOS boot loader), BOOT (empty and small: the
// kernel and initramfs boot from the EFI partition; kept for the layout
// installers expect) and META (the schematic's initial META values in
// Talos's ADV layout), with GUIDs derived from the schematic ID and the
// partition names.
func rawImage(files []fat.File, sde int64, id string, metaValues map[uint8][]byte) ([]byte, error) {
	names := []string{"EFI", "BIOS", "BOOT", "META"}
	types := []gpt.GUID{gpt.TypeEFISystem, gpt.TypeBIOSBoot, gpt.TypeLinuxData, gpt.TypeLinuxData}
	var guids []gpt.GUID
	for _, n := range names {
		guids = append(guids, gpt.NameGUID(mediaGUIDs, id+" partition "+n))
	}
	parts, size := gpt.Layout(names, types, []int64{espSize(files), 1 << 20, 1 << 20, 1 << 20}, guids)
	esp, err := espImage(files, sde, id, uint32(parts[0].Start))
	if err != nil {
		return nil, err
	}
	if int64(len(esp)) > int64(parts[0].Sectors)*gpt.SectorSize {
		return nil, fmt.Errorf("raw image: the EFI file system (%d bytes) outgrew its partition", len(esp))
	}
	disk := make([]byte, size)
	if err := gpt.Write(disk, gpt.NameGUID(mediaGUIDs, id+" disk"), parts); err != nil {
		return nil, err
	}
	copy(disk[int64(parts[0].Start)*gpt.SectorSize:], esp)
	adv, err := meta.Encode(metaValues)
	if err != nil {
		return nil, err
	}
	copy(disk[int64(parts[3].Start)*gpt.SectorSize:], adv)
	return disk, nil
}

// isoImage makes a UEFI-bootable ISO 9660 image with xorriso: the EFI
// system partition image as the El Torito EFI boot image. Every date is the
// source date (SOURCE_DATE_EPOCH, which xorriso honours, and the staged
// files' times).
func isoImage(ctx context.Context, work string, esp []byte, files []fat.File, sde int64, label string) ([]byte, string, error) {
	xorriso, err := exec.LookPath("xorriso")
	if err != nil {
		return nil, "", fmt.Errorf("the ISO needs xorriso (Debian's xorriso): %w", err)
	}
	root := filepath.Join(work, "iso-root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(root)
	img := filepath.Join(root, "efiboot.img")
	if err := os.WriteFile(img, esp, 0o644); err != nil {
		return nil, "", err
	}
	// The boot files are in the ISO tree too, for tools and people that
	// look there; firmware boots from the El Torito image.
	modes := map[string]os.FileMode{img: 0o644, root: 0o755}
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f.Path))
		for d := filepath.Dir(p); d != root; d = filepath.Dir(d) {
			modes[d] = 0o755
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, "", err
		}
		if err := os.WriteFile(p, f.Data, 0o644); err != nil {
			return nil, "", err
		}
		modes[p] = 0o644
	}
	t := time.Unix(sde, 0)
	for p, mode := range modes {
		if err := os.Chmod(p, mode); err != nil {
			return nil, "", err
		}
		if err := os.Chtimes(p, t, t); err != nil {
			return nil, "", err
		}
	}
	out := filepath.Join(work, "image.iso")
	defer os.Remove(out)
	// -r (not -R): Rock Ridge with owners 0:0 and rationalised modes, so
	// neither the builder's user nor its umask reaches the image. Hybrid,
	// as grub-mkrescue makes them: a GPT (behind a protective MBR) whose
	// EFI system partition is the El Torito image, so the same file boots
	// as a CD and written to a USB stick with dd.
	cmd := exec.CommandContext(ctx, xorriso, "-as", "mkisofs", "-o", out, "-V", label, "-r", "-e", "efiboot.img", "-no-emul-boot",
		"-efi-boot-part", "--efi-boot-image", "--protective-msdos-label", root)
	// Nothing of the caller's environment reaches the tool (found by
	// LookPath above, it needs no PATH).
	cmd.Env = []string{"SOURCE_DATE_EPOCH=" + fmt.Sprint(sde), "LC_ALL=C", "TZ=UTC"}
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, "", fmt.Errorf("xorriso: %v\n%s", err, b)
	}
	iso, err := os.ReadFile(out)
	if err != nil {
		return nil, "", err
	}
	ver, _ := exec.Command(xorriso, "-version").Output()
	first, _, _ := strings.Cut(string(ver), "\n")
	return iso, strings.TrimSpace(first), nil
}

// compressVariant compresses a disk image: "zst" (zstd) or "xz". xz is
// written as independent streams of 16 MiB, compressed in parallel and
// concatenated (a valid .xz file): the bytes depend on the chunking, not
// on the number of cores.
func compressVariant(algo string, data []byte) ([]byte, error) {
	one := func(a string, b []byte) ([]byte, error) {
		return compressInitramfs(a, len(b)/4, func(w io.Writer) error { _, err := w.Write(b); return err })
	}
	switch algo {
	case "zst":
		return one("zstd", data)
	case "xz":
		const chunk = 16 << 20
		n := (len(data) + chunk - 1) / chunk
		parts := make([][]byte, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		sem := make(chan struct{}, runtime.GOMAXPROCS(0))
		for i := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				parts[i], errs[i] = one("xz", data[i*chunk:min((i+1)*chunk, len(data))])
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		return bytes.Join(parts, nil), nil
	}
	return nil, fmt.Errorf("unknown disk image compression %q (zst or xz)", algo)
}
