package compose

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/api/target"
	"github.com/nodeforge/builder/attest/authenticode"
	"github.com/nodeforge/builder/attest/pcr"
	"github.com/nodeforge/builder/builder/media/fat"
	"github.com/nodeforge/builder/builder/media/secureboot"
	"github.com/nodeforge/builder/builder/media/uki"
)

// SecureBoot makes the ISO and disk images boot under UEFI Secure Boot:
// systemd-boot and a unified kernel image (the base's systemd-stub with
// the kernel, the initramfs and the command line), both signed with the
// db key; the key set's .auth files go to loader/keys/auto/ for
// systemd-boot to enrol in setup mode.
type SecureBoot struct {
	Signing *secureboot.Signing
}

// SecureBootSuffix marks the Secure Boot media's names:
// <platform>-<arch>-secureboot.<format>, <platform>-<arch>-secureboot-uki.efi.
const SecureBootSuffix = "-secureboot"

// ukiName is where the UKI lies on the ESP: systemd-boot lists every
// EFI/Linux/*.efi as an entry (the Boot Loader Specification's type #2).
const ukiName = "EFI/Linux/nodeforge.efi"

// SignedUKI is a signed UKI and what it was made of.
type SignedUKI struct {
	Image    []byte
	Unsigned []byte // the same before signing: Image stripped of its signature
	// PCR11 is what systemd-stub leaves in PCR 11 booting it, when it
	// carries signed PCR policies (nil otherwise).
	PCR11 []byte
}

// UKI makes the signed UKI of a boot: the base's systemd-stub with the
// kernel, initramfs, the command line args, an os-release of prettyName
// and the kernel's version.
func UKI(b Boot, initramfs []byte, args []string, prettyName string, sb *SecureBoot) (*SignedUKI, error) {
	if b.Stub == nil {
		return nil, errors.New("Secure Boot needs the base's systemd-stub, and the release has none (image.stub)")
	}
	unsigned, value, err := assembleUKI(b.Stub, sb, ukiSections(b, initramfs, args, prettyName))
	if err != nil {
		return nil, fmt.Errorf("unified kernel image: %w", err)
	}
	image, err := authenticode.Sign(unsigned, sb.Signing.Signer)
	if err != nil {
		return nil, fmt.Errorf("signing the unified kernel image: %w", err)
	}
	return &SignedUKI{Image: image, Unsigned: unsigned, PCR11: value}, nil
}

// signedBoot returns the signed UKI of the boot and the ESP's files
// around it; sc is the schematic's secureboot: enrollKeys ("": force),
// includeWellKnownCertificates (KEK.auth and db.auth enrol Microsoft's
// UEFI certificates too).
func signedBoot(b Boot, initramfs []byte, args []string, prettyName string, sb *SecureBoot, sc schematic.SecureBoot) (*SignedUKI, []fat.File, error) {
	a, err := target.Lookup(b.Arch)
	if err != nil {
		return nil, nil, err
	}
	u, err := UKI(b, initramfs, args, prettyName, sb)
	if err != nil {
		return nil, nil, err
	}
	loader, err := authenticode.Sign(b.Bootloader, sb.Signing.Signer)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the EFI boot manager: %w", err)
	}
	auth := sb.Signing.Auth
	if sc.IncludeWellKnownCertificates {
		if auth, err = sb.Signing.WellKnownAuth(); err != nil {
			return nil, nil, fmt.Errorf("customization.secureboot.includeWellKnownCertificates: %w", err)
		}
	}
	conf := loaderConf(auth != nil, sc.EnrollKeys)
	files := []fat.File{{Path: a.EFIBootFile(), Data: loader}, {Path: ukiName, Data: u.Image}}
	if auth != nil {
		for _, n := range secureboot.Names {
			files = append(files, fat.File{Path: "loader/keys/auto/" + n + ".auth", Data: auth[n]})
		}
	}
	files = append(files, fat.File{Path: "loader/loader.conf", Data: []byte(conf)})
	return u, files, nil
}

// loaderConf is the Secure Boot ESP's loader/loader.conf. With keys to
// enrol (auth), "force" enrols them only when the firmware is in setup
// mode, at once in a virtual machine and after a 15 second countdown (any
// key aborts) on hardware; PK goes last and ends setup mode. A schematic
// may ask for another mode (enroll: upstream's default is if-safe,
// virtual machines only).
func loaderConf(auth bool, enroll string) string {
	conf := "timeout 0\n"
	if auth {
		conf += "secure-boot-enroll " + cmp.Or(enroll, "force") + "\n"
	}
	return conf
}

// ukiSections are a UKI's sections, the plain's and the signed's: an
// os-release of prettyName, the command line args, the kernel's version,
// the initramfs and the kernel.
func ukiSections(b Boot, initramfs []byte, args []string, prettyName string) []uki.Section {
	return uki.Sections(osRelease(prettyName), []byte(strings.Join(args, " ")), []byte(b.KernelVersion), initramfs, b.Vmlinuz)
}

// osRelease is the UKI's .osrel: systemd-boot's
// menu shows PRETTY_NAME.
func osRelease(prettyName string) []byte {
	return []byte(fmt.Sprintf("NAME=%q\nID=nodeforge\nPRETTY_NAME=%q\n", prettyName, prettyName))
}

// assembleUKI builds the unsigned UKI. With a PCR key it carries
// .pcrpkey and .pcrsig: the policies of the PCR 11 values the stub will
// measure of this very image (.pcrsig itself is not measured, so it is
// added last), signed for each boot phase; it returns the value the stub
// leaves in PCR 11 then.
func assembleUKI(stub []byte, sb *SecureBoot, secs []uki.Section) ([]byte, []byte, error) {
	if sb.Signing.PCR == nil {
		img, err := uki.Build(stub, secs)
		return img, nil, err
	}
	pub, err := pcr.PublicKey(sb.Signing.PCR)
	if err != nil {
		return nil, nil, err
	}
	// Before the initrd and the kernel, where ukify puts them.
	at := len(secs) - 2
	with := slices.Insert(slices.Clone(secs), at, uki.Section{Name: ".pcrpkey", Data: pub})
	img, err := uki.Build(stub, with)
	if err != nil {
		return nil, nil, err
	}
	known := pcr.Known(stub)
	measured, err := pcr.Sections(img, known)
	if err != nil {
		return nil, nil, err
	}
	value := pcr.Measure(measured, known)
	sig, err := pcr.Signature(value, sb.Signing.PCR)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the PCR 11 policies: %w", err)
	}
	img, err = uki.Build(stub, slices.Insert(with, at, uki.Section{Name: ".pcrsig", Data: sig}))
	return img, value, err
}
