package compose

import (
	"fmt"
	"strings"

	"github.com/nodeforge/builder/build/media/authenticode"
	"github.com/nodeforge/builder/build/media/fat"
	"github.com/nodeforge/builder/build/media/secureboot"
	"github.com/nodeforge/builder/build/media/uki"
)

// SecureBoot makes the ISO and disk images boot under UEFI Secure Boot:
// systemd-boot and a unified kernel image (the base's systemd-stub with
// the kernel, the initramfs and the command line), both signed with the
// db key; the key set's .auth files go to loader/keys/auto/ for
// systemd-boot to enrol in setup mode.
type SecureBoot struct {
	Stub    []byte // the base's systemd-stub
	Signing *secureboot.Signing
}

// SecureBootSuffix marks the Secure Boot media's names:
// <platform>-<arch>-secureboot.<format>, <platform>-<arch>-secureboot-uki.efi.
const SecureBootSuffix = "-secureboot"

// efiArch is the UEFI name of an architecture, as in BOOT<efiArch>.EFI and
// linux<efiArch>.efi.stub.
var efiArch = map[string]string{"x86_64": "x64", "aarch64": "aa64"}

// EFIArch is the UEFI name of arch ("x64", "aa64").
func EFIArch(arch string) (string, error) {
	a, ok := efiArch[arch]
	if !ok {
		return "", fmt.Errorf("no UEFI boot for architecture %q", arch)
	}
	return a, nil
}

// ukiName is where the UKI lies on the ESP: systemd-boot lists every
// EFI/Linux/*.efi as an entry (the Boot Loader Specification's type #2).
const ukiName = "EFI/Linux/nodeforge.efi"

// signedBoot returns the signed UKI of the boot and the ESP's files
// around it.
func signedBoot(b Boot, initramfs []byte, args []string, osRelease []byte, sb *SecureBoot) ([]byte, []fat.File, error) {
	ea, err := EFIArch(b.Arch)
	if err != nil {
		return nil, nil, err
	}
	unsigned, err := uki.Build(sb.Stub, uki.Sections(osRelease, []byte(strings.Join(args, " ")), []byte(b.KernelVersion), initramfs, b.Vmlinuz))
	if err != nil {
		return nil, nil, fmt.Errorf("unified kernel image: %w", err)
	}
	image, err := authenticode.Sign(unsigned, sb.Signing.Signer)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the unified kernel image: %w", err)
	}
	loader, err := authenticode.Sign(b.Bootloader, sb.Signing.Signer)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the EFI boot manager: %w", err)
	}
	// "force" enrols the keys only when the firmware is in setup mode,
	// at once in a virtual machine and after a 15 second countdown (any
	// key aborts) on hardware; PK goes last and ends setup mode.
	conf := "timeout 0\n"
	files := []fat.File{{Path: "EFI/BOOT/BOOT" + strings.ToUpper(ea) + ".EFI", Data: loader}, {Path: ukiName, Data: image}}
	if sb.Signing.Auth != nil {
		conf += "secure-boot-enroll force\n"
		for _, n := range secureboot.Names {
			files = append(files, fat.File{Path: "loader/keys/auto/" + n + ".auth", Data: sb.Signing.Auth[n]})
		}
	}
	files = append(files, fat.File{Path: "loader/loader.conf", Data: []byte(conf)})
	return image, files, nil
}

// osRelease is the UKI's .osrel when the boot has none: systemd-boot's
// menu shows PRETTY_NAME.
func osRelease(prettyName string) []byte {
	return []byte(fmt.Sprintf("NAME=%q\nID=nodeforge\nPRETTY_NAME=%q\n", prettyName, prettyName))
}
