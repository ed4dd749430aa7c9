package compose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nodeforge/builder/api/schematic"
)

// Output is what one request makes of a schematic: which of its options
// apply depends on it, as upstream applies each to some outputs only.
type Output struct {
	// Kind is kernel, initramfs, cmdline, iso, disk (the other disk
	// formats), installer or uki.
	Kind       string
	SecureBoot bool
}

// diskSectorSizes are the values of customization.diskImage.sectorSize
// the disk images are made with (0: 512): the sizes a FAT boot sector
// declares, and the ones upstream's imager (mkfs.vfat -S, mkfs.xfs -s)
// makes; 4096 for disks of 4K logical blocks.
var diskSectorSizes = []uint{0, 512, 1024, 2048, 4096}

// Refusal names the schematic option these media cannot honour for out
// (nil: none). An option that would change upstream's image and that
// Nodeforge does not implement yet is refused, never ignored: the media
// would boot without it.
func Refusal(sch *schematic.Schematic, out Output) error {
	if sch.Overlay.Requested() {
		return &OverlayError{Name: sch.Overlay.Name, Image: sch.Overlay.Image}
	}
	c := sch.Customization
	image := out.Kind == "iso" || out.Kind == "disk"
	if out.Kind != "kernel" && out.Kind != "initramfs" {
		// A line break would end the command line where the boot entry,
		// the iPXE script or cmdline-* write it, and start a command.
		for _, a := range c.ExtraKernelArgs {
			if strings.IndexFunc(a, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
				return fmt.Errorf("customization.extraKernelArgs: %q holds a control character", a)
			}
		}
	}
	switch {
	case image && (c.Bootloader == schematic.BootloaderGrub || c.Bootloader == schematic.BootloaderDualBoot):
		return fmt.Errorf("customization.bootloader %s: the release's media boot with systemd-boot (sd-boot) only; it ships no GRUB", c.Bootloader)
	case out.Kind == "disk" && !slices.Contains(diskSectorSizes, c.DiskImage.SectorSize):
		// Upstream's imager has no check: its mkfs tools fail on these
		// (a 500 from its factory). The ISO ignores the option, as upstream's.
		return fmt.Errorf("customization.diskImage.sectorSize %d: a disk image's logical sector size is 512, 1024, 2048 or 4096 bytes", c.DiskImage.SectorSize)
	case out.SecureBoot && image && c.SecureBoot.EnrollKeys != "" && !slices.Contains(schematic.EnrollKeysValues, c.SecureBoot.EnrollKeys):
		// Upstream's text.
		return fmt.Errorf("invalid secureboot enrollKeys value %q: %s does not belong to SDBootEnrollKeys values (%s)", c.SecureBoot.EnrollKeys, c.SecureBoot.EnrollKeys, strings.Join(schematic.EnrollKeysValues, ", "))
	}
	return nil
}

// DiskKind is the Output kind of a disk format: iso or disk.
func DiskKind(format string) string {
	if format == "iso" {
		return "iso"
	}
	return "disk"
}
