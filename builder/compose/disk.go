package compose

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/nodeforge/builder/api/target"
	"github.com/nodeforge/builder/builder/media/fat"
	"github.com/nodeforge/builder/builder/media/gpt"
	"github.com/nodeforge/builder/builder/media/meta"
	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/internal/xzdec"
)

// bootFiles are what an EFI system partition holds: systemd-boot as the
// removable-media boot path, its configuration with one entry, the kernel
// and the initramfs.
func bootFiles(a target.Arch, bootloader, vmlinuz []byte, initramfs Blob, title string, args []string) []fat.File {
	entry := fmt.Sprintf("title %s\nlinux /nodeforge/vmlinuz\ninitrd /nodeforge/initramfs.xz\noptions %s\n", title, strings.Join(args, " "))
	return []fat.File{
		{Path: a.EFIBootFile(), Data: bootloader},
		{Path: "loader/loader.conf", Data: []byte("timeout 0\ndefault nodeforge.conf\n")},
		{Path: "loader/entries/nodeforge.conf", Data: []byte(entry)},
		{Path: "nodeforge/vmlinuz", Data: vmlinuz},
		{Path: "nodeforge/initramfs.xz", Body: initramfs},
	}
}

// mediaGUIDs is the namespace of the disk images' GUIDs: the disk's and
// each partition's are version 5 UUIDs of a name in it, so every build
// gives the same ones.
var mediaGUIDs = gpt.MustParse("6e6f6465-666f-5267-8565-6d6564696131")

// espOptions are the FAT options of the EFI system partition: hidden is
// the partition's first sector, sectorSize the disk's logical sector size.
func espOptions(files []fat.File, sde int64, id string, hidden uint32, sectorSize int) fat.Options {
	return fat.Options{Label: "NODEFORGE", VolumeID: espVolumeID(id), Time: time.Unix(sde, 0), MinSize: espSize(files),
		HiddenSectors: hidden, SectorSize: sectorSize}
}

// espSize is the EFI system partition's size for its files: a tenth
// more, and 8 MiB of room.
func espSize(files []fat.File) int64 {
	var total int64
	for _, f := range files {
		total += f.Len()
	}
	return total*11/10 + 8<<20
}

// rawImage is rawImageTo's disk in memory.
func rawImage(files []fat.File, sde int64, id string, metaValues map[uint8][]byte, sectorSize int) ([]byte, error) {
	var b bytes.Buffer
	if _, err := rawImageTo(&b, files, sde, id, metaValues, sectorSize); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// rawImageTo writes a GPT disk of sectorSize-byte logical sectors (0:
// 512) to w, in order, and returns its size: EFI (the system partition
// with the boot files), BIOS (empty, for a BIOS boot loader), BOOT (empty
// and small: the kernel and initramfs boot from the EFI partition; kept
// for the layout installers expect) and META (the schematic's initial
// META values in Talos's ADV layout), with GUIDs derived from the
// schematic ID and the partition names. The partitions are at the same
// bytes whatever the sector size (MiB-aligned); the tables and the EFI
// file system count in the disk's sectors, as upstream's imager writes a
// 4096-byte-sector image (its gpt and mkfs given the sector size), for
// disks with 4K logical blocks. The disk (a real base's is 177 MiB) is
// never whole in memory: the tables, the EFI file system as it is laid
// out (fat.WriteExtentsTo) and META's values, with zeros between.
func rawImageTo(w io.Writer, files []fat.File, sde int64, id string, metaValues map[uint8][]byte, sectorSize int) (int64, error) {
	if sectorSize == 0 {
		sectorSize = gpt.SectorSize
	}
	names := []string{"EFI", "BIOS", "BOOT", "META"}
	types := []gpt.GUID{gpt.TypeEFISystem, gpt.TypeBIOSBoot, gpt.TypeLinuxData, gpt.TypeLinuxData}
	var guids []gpt.GUID
	for _, n := range names {
		guids = append(guids, gpt.NameGUID(mediaGUIDs, id+" partition "+n))
	}
	layout := func(espBytes int64) ([]gpt.Partition, int64, error) {
		return gpt.Layout(sectorSize, names, types, []int64{espBytes, 1 << 20, 1 << 20, 1 << 20}, guids)
	}
	parts, size, err := layout(espSize(files))
	if err != nil {
		return 0, err
	}
	ss := int64(sectorSize)
	// The EFI partition is the first: its start does not depend on its
	// size. FAT16's least cluster count in large sectors makes a file
	// system larger than the files need: the partition grows to it.
	fo := espOptions(files, sde, id, uint32(parts[0].Start), sectorSize)
	fsSize, err := fat.Size(files, fo)
	if err != nil {
		return 0, err
	}
	if fsSize > int64(parts[0].Sectors)*ss {
		if parts, size, err = layout(fsSize); err != nil {
			return 0, err
		}
	}
	head, tail, err := gpt.Tables(sectorSize, size, gpt.NameGUID(mediaGUIDs, id+" disk"), parts)
	if err != nil {
		return 0, err
	}
	adv, err := meta.Encode(metaValues)
	if err != nil {
		return 0, err
	}
	dw := &diskWriter{w: w}
	dw.write(head)
	dw.zerosTo(int64(parts[0].Start) * ss)
	if dw.err == nil {
		_, n, err := fat.WriteExtentsTo(dw.w, files, fo)
		dw.at, dw.err = dw.at+n, err
	}
	dw.zerosTo(int64(parts[3].Start) * ss)
	dw.write(adv)
	dw.zerosTo(size - int64(len(tail)))
	dw.write(tail)
	return size, dw.err
}

// diskWriter writes a disk's parts in order, keeping the offset and the
// first error.
type diskWriter struct {
	w   io.Writer
	at  int64
	err error
}

func (d *diskWriter) write(b []byte) {
	if d.err == nil {
		_, d.err = d.w.Write(b)
		d.at += int64(len(b))
	}
}

// zerosTo writes zeros up to the offset end.
func (d *diskWriter) zerosTo(end int64) {
	if d.err != nil {
		return
	}
	if end < d.at {
		d.err = fmt.Errorf("disk image: a part ends at %d, past the next one's start %d", d.at, end)
		return
	}
	_, d.err = io.CopyN(d.w, zeroReader{}, end-d.at)
	d.at = end
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// espVolumeID is an EFI system partition's FAT volume ID: the schematic
// ID's first 32 bits (0 without one).
func espVolumeID(id string) uint32 {
	var vol uint32
	if len(id) >= 8 {
		fmt.Sscanf(id[:8], "%08x", &vol)
	}
	return vol
}

// isoSector is ISO 9660's logical block size.
const isoSector = 2048

// isoESP is the ISO's El Torito EFI image: the boot files in a FAT file
// system of 512-byte sectors whose every file starts at a 2048-byte
// boundary of the image (its ISO 9660 twin points there, isoImage), and
// no room beyond the files: a CD is read-only, and the ISO carries its
// payload once.
// It is written to path as it is laid out (fat.WriteExtentsTo: never
// whole in memory) and hashed on the way.
func isoESP(path string, files []fat.File, sde int64, id string) ([]fat.Extent, espSum, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, espSum{}, err
	}
	// Hashed on another goroutine while the file is written.
	h := sha256.New()
	hw := newAsyncWriter(h)
	bw := bufio.NewWriterSize(io.MultiWriter(f, hw), 1<<20)
	ext, size, err := fat.WriteExtentsTo(bw, files, fat.Options{Label: "NODEFORGE", VolumeID: espVolumeID(id), Time: time.Unix(sde, 0), Align: isoSector})
	if err == nil {
		err = bw.Flush()
	}
	if err = errors.Join(err, hw.Close(), f.Close()); err != nil {
		os.Remove(path)
		return nil, espSum{}, err
	}
	return ext, espSum{size: size, sum: [sha256.Size]byte(h.Sum(nil))}, nil
}

// isoImage makes a UEFI-bootable ISO 9660 image with xorriso: the EFI
// system partition image of files (isoESP) as the El Torito
// EFI boot image, and its files in the ISO 9660 tree too, for tools and
// people that look there, without a second copy: xorriso lays the tree
// out with empty files, then each file's directory record is pointed at
// its data inside efiboot.img (pointISOFiles). Every date is the source
// date (SOURCE_DATE_EPOCH, which xorriso honours, and the staged files'
// times). The image stays in the file xorriso wrote, work/image.iso,
// whose path it returns with its SHA-256 (hex): a real base's is 150 MB,
// never read into memory.
func isoImage(ctx context.Context, work string, files []fat.File, sde int64, id, label string) (path, sum, tool string, err error) {
	xorriso, err := exec.LookPath("xorriso")
	if err != nil {
		return "", "", "", fmt.Errorf("the ISO needs xorriso (Debian's xorriso): %w", err)
	}
	root := filepath.Join(work, "iso-root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", "", "", err
	}
	defer os.RemoveAll(root)
	img := filepath.Join(root, "efiboot.img")
	// Its size and digest say what the ISO's efiboot.img must hold.
	ext, espSum, err := isoESP(img, files, sde, id)
	if err != nil {
		return "", "", "", err
	}
	if err := stageISOTree(root, img, ext, sde); err != nil {
		return "", "", "", err
	}
	out := filepath.Join(work, "image.iso")
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
		os.Remove(out)
		return "", "", "", fmt.Errorf("xorriso: %v\n%s", err, b)
	}
	if sum, err = pointISOFile(out, espSum, ext); err != nil {
		os.Remove(out)
		return "", "", "", fmt.Errorf("the ISO xorriso wrote: %w", err)
	}
	ver, _ := exec.Command(xorriso, "-version").Output()
	first, _, _ := strings.Cut(string(ver), "\n")
	return out, sum, strings.TrimSpace(first), nil
}

// stageISOTree lays out the ISO's tree in root beside efiboot.img (img):
// each file of ext empty, every mode fixed and every time the source
// date.
func stageISOTree(root, img string, ext []fat.Extent, sde int64) error {
	modes := map[string]os.FileMode{img: 0o644, root: 0o755}
	for _, e := range ext {
		p := filepath.Join(root, filepath.FromSlash(e.Path))
		for d := filepath.Dir(p); d != root; d = filepath.Dir(d) {
			modes[d] = 0o755
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return err
		}
		modes[p] = 0o644
	}
	t := time.Unix(sde, 0)
	for p, mode := range modes {
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
		if err := os.Chtimes(p, t, t); err != nil {
			return err
		}
	}
	return nil
}

// pointISOFile is pointISOFiles on the ISO at path, changed in place. It
// returns the SHA-256 of the changed ISO, hex-encoded.
func pointISOFile(path string, esp espSum, ext []fat.Extent) (string, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	atomicfile.StartWriteback(f)
	fi, err := f.Stat()
	var sum [sha256.Size]byte
	if err == nil {
		sum, err = pointISOFiles(f, fi.Size(), esp, ext)
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return "", err
	}
	return hex.EncodeToString(sum[:]), nil
}

// isoFile is an ISO image read and changed in place.
type isoFile interface {
	io.ReaderAt
	io.WriterAt
}

// isoRecord is a directory record read from an ISO: its bytes and where
// they are.
type isoRecord struct {
	b   []byte
	off int64
}

// maxISODir bounds one directory read from an ISO.
const maxISODir = 16 << 20

// pointISOFiles points the directory record of each file of ext (empty in
// the ISO 9660 tree, as isoImage staged them) at the file's data inside
// /efiboot.img: its extent becomes efiboot.img's plus the file's offset in
// the FAT image (a multiple of 2048), its size the file's. Both file
// systems then read the same blocks; ISO 9660 lets extents overlap (as
// hard links share one). The records are found by their Rock Ridge
// names; efiboot.img must be the EFI image esp sums, checked before any
// record is changed. iso is size bytes. It returns the SHA-256 of the ISO
// as changed: one read of the ISO checks efiboot.img and hashes the whole.
func pointISOFiles(iso isoFile, size int64, esp espSum, ext []fat.Extent) ([sha256.Size]byte, error) {
	var none [sha256.Size]byte
	pvd := make([]byte, isoSector)
	if size < 17*isoSector {
		return none, errors.New("no ISO 9660 primary volume descriptor at block 16")
	}
	if _, err := iso.ReadAt(pvd, 16*isoSector); err != nil {
		return none, err
	}
	if pvd[0] != 1 || string(pvd[1:6]) != "CD001" {
		return none, errors.New("no ISO 9660 primary volume descriptor at block 16")
	}
	root := isoRecord{pvd[156 : 156+34], 16*isoSector + 156}
	efi, err := isoLookup(iso, size, root, "efiboot.img")
	if err != nil {
		return none, err
	}
	base, n := isoExtent(efi.b)
	if n != esp.size || base*isoSector+n > size {
		return none, errors.New("/efiboot.img is not the EFI image given")
	}
	// Each record's change, made once efiboot.img is known to be the
	// image given: that is checked first, whatever else is wrong.
	patches, recErr := isoPatches(iso, size, root, base, n, ext)
	got, sum, err := sumPatched(iso, size, base*isoSector, n, patches)
	if err != nil {
		return none, err
	}
	if got != esp.sum {
		return none, errors.New("/efiboot.img is not the EFI image given")
	}
	if recErr != nil {
		return none, recErr
	}
	for _, p := range patches {
		if _, err := iso.WriteAt(p.b, p.off); err != nil {
			return none, err
		}
	}
	return sum, nil
}

// isoPatches finds the directory record of each file of ext and returns
// the change that points it into efiboot.img (n bytes at block base).
func isoPatches(iso isoFile, size int64, root isoRecord, base, n int64, ext []fat.Extent) ([]isoRecord, error) {
	var patches []isoRecord
	for _, e := range ext {
		if e.Size == 0 {
			continue
		}
		if e.Offset%isoSector != 0 || e.Offset+e.Size > n {
			return nil, fmt.Errorf("%s: at %d (%d bytes) in the EFI image, not a 2048-byte block inside it", e.Path, e.Offset, e.Size)
		}
		rec := root
		var err error
		for _, name := range strings.Split(e.Path, "/") {
			if rec, err = isoLookup(iso, size, rec, name); err != nil {
				return nil, fmt.Errorf("%s: %w", e.Path, err)
			}
		}
		if _, n := isoExtent(rec.b); n != 0 || rec.b[25]&2 != 0 {
			return nil, fmt.Errorf("%s: not the empty file staged (%d bytes)", e.Path, n)
		}
		b := make([]byte, 16)
		bothEndian32(b[0:8], uint32(base+e.Offset/isoSector))
		bothEndian32(b[8:16], uint32(e.Size))
		patches = append(patches, isoRecord{b, rec.off + 2})
	}
	return patches, nil
}

// sumPatched reads iso (size bytes) once and returns the SHA-256 of its
// n bytes at off as they are, and of the whole as it will be once the
// patches (bytes and where they go) are written. The whole is hashed on
// another goroutine.
func sumPatched(iso io.ReaderAt, size, off, n int64, patches []isoRecord) (region, whole [sha256.Size]byte, err error) {
	hr, hw := sha256.New(), sha256.New()
	aw := newAsyncWriter(hw)
	buf := make([]byte, 1<<20)
	for at := int64(0); at < size && err == nil; at += int64(len(buf)) {
		b := buf[:min(int64(len(buf)), size-at)]
		if _, err = iso.ReadAt(b, at); err != nil {
			break
		}
		if lo, hi := max(at, off), min(at+int64(len(b)), off+n); lo < hi {
			hr.Write(b[lo-at : hi-at])
		}
		for _, p := range patches {
			if lo, hi := max(at, p.off), min(at+int64(len(b)), p.off+int64(len(p.b))); lo < hi {
				copy(b[lo-at:hi-at], p.b[lo-p.off:hi-p.off])
			}
		}
		aw.Write(b) // copied: buf is read into again
	}
	if cerr := aw.Close(); err == nil {
		err = cerr
	}
	return [sha256.Size]byte(hr.Sum(nil)), [sha256.Size]byte(hw.Sum(nil)), err
}

// espSum is what an EFI image's copy must match: its size and SHA-256.
type espSum struct {
	size int64
	sum  [sha256.Size]byte
}

// isoExtent is a directory record's extent: its first block and size.
func isoExtent(rec []byte) (int64, int64) {
	return int64(binary.LittleEndian.Uint32(rec[2:])), int64(binary.LittleEndian.Uint32(rec[10:]))
}

// bothEndian32 writes v little-endian, then big-endian (ISO 9660's
// both-byte-order fields).
func bothEndian32(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b, v)
	binary.BigEndian.PutUint32(b[4:], v)
}

// isoLookup finds name in the directory dir (its record) of iso (size
// bytes) and returns the entry's record. Names are the Rock Ridge ones
// (NM), else the ISO 9660 ones without their version.
func isoLookup(iso io.ReaderAt, size int64, dir isoRecord, name string) (isoRecord, error) {
	start, n := isoExtent(dir.b)
	if dir.b[25]&2 == 0 || n > maxISODir || start*isoSector+n > size {
		return isoRecord{}, fmt.Errorf("looking up %s: not a directory inside the image", name)
	}
	d := make([]byte, n)
	if _, err := iso.ReadAt(d, start*isoSector); err != nil {
		return isoRecord{}, err
	}
	for pos := int64(0); pos < n; {
		l := int64(d[pos])
		if l == 0 { // the rest of the block is padding
			pos = (pos/isoSector + 1) * isoSector
			continue
		}
		if l < 34 || pos+l > n {
			return isoRecord{}, fmt.Errorf("looking up %s: a bad directory record", name)
		}
		rec := d[pos : pos+l]
		if got, rr := isoRecordName(rec); got == name || !rr && strings.EqualFold(got, name) {
			return isoRecord{rec, start*isoSector + pos}, nil
		}
		pos += l
	}
	return isoRecord{}, fmt.Errorf("no %s in the ISO 9660 tree", name)
}

// isoRecordName is a record's Rock Ridge name (its NM entries; rr), or
// its ISO 9660 name without ";1" and a trailing dot.
func isoRecordName(rec []byte) (string, bool) {
	l := int(rec[32])
	if 33+l > len(rec) {
		return "", false
	}
	iso := string(rec[33 : 33+l])
	su := 33 + l + (l+1)%2 // the system use area follows a pad byte after an even name
	var nm strings.Builder
	found := false
	for su+4 <= len(rec) {
		n := int(rec[su+2])
		if n < 4 || su+n > len(rec) {
			break
		}
		if string(rec[su:su+2]) == "NM" && n >= 5 {
			nm.Write(rec[su+5 : su+n])
			found = true
		}
		su += n
	}
	if found {
		return nm.String(), true
	}
	iso, _, _ = strings.Cut(iso, ";")
	return strings.TrimSuffix(iso, "."), false
}

// compressVariant compresses a disk image: "zst" (zstd), "gz" (gzip) or
// "xz". xz is liblzma's Block encoder (xzdec.EncodeTo): one Stream of
// 24 MiB Blocks at -6, as `xz -T0` writes it, on every core, the bytes
// independent of their number. A builder built without cgo has no
// liblzma encoder: it writes xzChunks, other bytes (builder/compressors
// says so, and refuses releases).
func compressVariant(algo string, data []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := compressVariantTo(&b, algo, bytes.NewReader(data), int64(len(data)), ""); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// compressVariantTo is compressVariant of the size bytes at at, written
// to w as they come: neither the image nor its variant is held whole
// (but by xzChunks, without cgo). xz's Blocks done ahead of their turn
// wait in files of spill ("": in memory).
func compressVariantTo(w io.Writer, algo string, at io.ReaderAt, size int64, spill string) error {
	src := io.NewSectionReader(at, 0, size)
	switch algo {
	case "zst":
		return CompressInitramfsTo(w, "zstd", func(w io.Writer) error { _, err := io.Copy(w, src); return err })
	case "gz":
		// One compressor at a pinned version, no name and no time in the
		// header: the same image gives the same bytes.
		zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
		if err != nil {
			return err
		}
		if _, err = io.Copy(zw, src); err != nil {
			return err
		}
		return zw.Close()
	case "xz":
		if !xzdec.CanEncode {
			data, err := io.ReadAll(src)
			if err != nil {
				return err
			}
			if data, err = xzChunks(data); err != nil {
				return err
			}
			_, err = w.Write(data)
			return err
		}
		return xzdec.EncodeTo(w, at, size, xzdec.EncodeOptions{Preset: diskXZPreset, Threads: runtime.GOMAXPROCS(0), SpillDir: spill})
	}
	return fmt.Errorf("unknown disk image compression %q (zst, xz or gz)", algo)
}

// diskXZPreset is the .xz disk images' preset: xz's default.
const diskXZPreset = 6

// xzChunks is the .xz of a builder without cgo: independent streams of
// 16 MiB written by ulikunitz/xz in parallel and concatenated (a valid
// .xz file); the bytes depend on the chunking, not on the number of
// cores.
func xzChunks(data []byte) ([]byte, error) {
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
			b := data[i*chunk : min((i+1)*chunk, len(data))]
			parts[i], errs[i] = CompressInitramfs("xz", len(b)/4, func(w io.Writer) error { _, err := w.Write(b); return err })
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return bytes.Join(parts, nil), nil
}
