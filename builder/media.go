package builder

import (
	"context"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/attest/pcr"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/builder/media/fat"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/internal/digest"
)

// mediaResult is what writeMedia wrote for one architecture.
type mediaResult struct {
	Initramfs []byte // with the extensions appended
	ISOTool   string
	Schematic string
	Platform  string
	Files     map[string]report.ArtifactInfo
	Layers    []report.FileEntry
	PCR11     []byte     // see compose.Result
	ESP       []fat.File // the Secure Boot media's ESP, for the Secure Boot installer
}

// writeMedia writes the boot media of the options' schematic and platform
// for one architecture into dir/<schematic id>/ (builder/compose makes
// them from the build's boot assets and extensions).
func (b *archBuild) writeMedia(ctx context.Context, dir string, initramfs, bootloader []byte) (*mediaResult, error) {
	boot, exts, o := b.composeInputs(initramfs, bootloader, dir)
	res, err := compose.Media(ctx, boot, exts, o)
	if err != nil {
		return nil, err
	}
	d := filepath.Join(dir, res.Schematic)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return nil, err
	}
	r := &mediaResult{Schematic: res.Schematic, Platform: res.Platform, ISOTool: res.ISOTool, Initramfs: res.Initramfs, Files: map[string]report.ArtifactInfo{}, PCR11: res.PCR11, ESP: res.ESP}
	for _, f := range res.Files {
		info, err := f.Save(filepath.Join(d, f.Name))
		if err != nil {
			return nil, err
		}
		r.Files["media/"+res.Schematic+"/"+f.Name] = info
	}
	for _, e := range res.Segment {
		r.Layers = append(r.Layers, report.FileEntry{Path: "/" + e.Name, Type: "file", Mode: fmt.Sprintf("%04o", e.Mode&0o7777), Size: int64(len(e.Data)), SHA256: digest.SHA256Hex(e.Data), Origin: e.Origin})
	}
	return r, nil
}

// composeInputs are the build's boot assets and extensions as
// builder/compose takes them.
func (b *archBuild) composeInputs(initramfs, bootloader []byte, work string) (compose.Boot, []*compose.Extension, compose.Options) {
	as := b.as
	boot := compose.Boot{Arch: b.arch, Vmlinuz: as.kernel.vmlinuz, Initramfs: initramfs, Cmdline: b.spec.Image.Cmdline,
		Bootloader: bootloader, KernelVersion: as.kernel.Version, Modules: func() (map[string][]byte, error) {
			files := map[string][]byte{}
			for _, n := range as.tree.Nodes() {
				if rel, ok := strings.CutPrefix(n.Path, as.kernel.modDir+"/"); ok && n.Kind == rootfs.KindFile {
					files[rel] = n.Data
				}
			}
			return files, nil
		}}
	var exts []*compose.Extension
	for _, e := range b.exts {
		exts = append(exts, &compose.Extension{Name: e.name, Metadata: e.metadata, Tree: e.tree, Modules: e.report.Modules})
	}
	o := compose.Options{Schematic: b.opts.Schematic, Platform: b.opts.Platform,
		DiskFormats: b.opts.DiskFormats, Compressions: b.opts.DiskCompressions, UKI: b.opts.UKI, Squashfs: b.opts.Squashfs, Cache: b.blockCache(),
		InitramfsCompression: b.spec.Image.InitramfsCompression, Owners: b.owners, PrettyName: b.spec.Image.OS.PrettyName,
		SourceDate: b.sde, Work: work, Version: b.spec.Version}
	// Checked when the spec was read.
	o.Platforms, _ = b.spec.Image.PlatformTable()
	boot.Stub = b.stubData
	if b.opts.SecureBoot != nil {
		o.SecureBoot = &compose.SecureBoot{Signing: b.opts.SecureBoot}
	}
	return boot, exts, o
}

// readStub reads the base's systemd-stub, for the installer and the
// Secure Boot UKIs: beside the EFI boot manager. A base without one makes
// no Secure Boot UKI: an error only when one is asked for.
func (b *archBuild) readStub() error {
	wanted := b.opts.SecureBoot != nil
	if b.bootloaderData == nil {
		if wanted {
			return fmt.Errorf("%s: Secure Boot media need the EFI boot manager: %w", b.arch, b.noBootloader)
		}
		return nil
	}
	var err error
	b.stubData, b.stubPkg, err = lockedData(b.spec.Image.StubRef(b.target.EFI), "image.stub", false, b.locked, b.paths, b.layCache)
	if err != nil && wanted {
		return fmt.Errorf("%s: Secure Boot needs the base's systemd-stub: %w", b.arch, err)
	}
	if err != nil {
		b.stubData = nil
	}
	return nil
}

// recordSecureBoot notes in the media report what signed the Secure Boot
// media of this architecture and what they boot.
func (b *archBuild) recordSecureBoot(m *report.MediaReport, pcr11 []byte) error {
	s := b.opts.SecureBoot
	if m.SecureBoot == nil {
		m.SecureBoot = &report.SecureBootReport{
			SigningCert:       string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Signer.Cert.Raw})),
			SigningCertSHA256: s.CertSHA256(), Subject: s.Signer.Cert.Subject.String(),
			Stub: map[string]string{}, Bootloader: map[string]string{}, EnrolsKeys: s.Auth != nil,
		}
		if s.PCR != nil {
			pub, err := pcr.PublicKey(s.PCR)
			if err != nil {
				return err
			}
			m.SecureBoot.PCRPublicKey, m.SecureBoot.PCR11 = string(pub), map[string]string{}
		}
	}
	m.SecureBoot.Stub[b.arch] = b.stubPkg
	m.SecureBoot.Bootloader[b.arch] = b.bootloaderPkg
	if pcr11 != nil {
		m.SecureBoot.PCR11[b.arch] = hex.EncodeToString(pcr11)
	}
	return nil
}

// releaseUKI is the release's signed UKI of the architecture: the base's
// systemd-stub with the kernel, the release's initramfs and command
// line, signed with the Secure Boot key set; recorded in the report.
func (b *archBuild) releaseUKI(initramfs []byte) ([]byte, error) {
	s := b.opts.SecureBoot
	boot := compose.Boot{Arch: b.arch, Vmlinuz: b.as.kernel.vmlinuz, Stub: b.stubData, KernelVersion: b.as.kernel.Version}
	u, err := compose.UKI(boot, initramfs, b.spec.Image.Cmdline, b.spec.Image.OS.PrettyName, &compose.SecureBoot{Signing: s})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.arch, err)
	}
	ur := &report.UKIReport{File: b.arch + "/" + compose.ReleaseUKIName, UnsignedSHA256: digest.SHA256Hex(u.Unsigned),
		SigningCertSHA256: s.CertSHA256(), Subject: s.Signer.Cert.Subject.String(),
		Stub: b.stubPkg, Kernel: b.as.kernel.Package, Initramfs: b.arch + "/initramfs.xz"}
	if u.PCR11 != nil {
		ur.PCR11 = hex.EncodeToString(u.PCR11)
	}
	b.uki = ur
	return u.Image, nil
}
