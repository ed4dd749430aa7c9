package certification

import (
	"bytes"
	"context"
	"debug/pe"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/nodeforge/builder/attest/authenticode"
	"github.com/nodeforge/builder/attest/pcr"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/oci"
)

// ukiName is a release's signed UKI among its boot assets (builder/compose's
// UKIName).
const ukiName = "uki.efi"

// maxUKI bounds a UKI read whole: a kernel and an initramfs.
const maxUKI = 1 << 30

// UKI is a release's signed unified kernel image as the audit found it:
// the base packages of its parts, who signed it, and what was checked.
type UKI struct {
	Arch              string `json:"arch"`
	Digest            string `json:"digest"`      // the boot asset
	Stub              string `json:"stub"`        // base package (NEVRA) of systemd-stub
	Kernel            string `json:"kernel"`      // base package of the kernel (.linux)
	Initramfs         string `json:"initramfs"`   // digest of the release's initramfs (.initrd)
	SigningCert       string `json:"signingCert"` // the signer's subject
	SigningCertSHA256 string `json:"signingCertSha256"`
	// UnsignedSHA256 is the digest of the UKI stripped of its signature:
	// the build report's digest of the UKI before signing.
	UnsignedSHA256 string   `json:"unsignedSha256"`
	PCR11          string   `json:"pcr11,omitempty"`
	Checks         []string `json:"checks"` // what held
}

// ukis checks each signed UKI of the release: its Authenticode signature
// holds and is the build report's certificate's; stripped of it, the
// image is the one the report describes; its kernel and initramfs are
// the release's boot assets byte for byte; its stub and kernel come from
// packages of the lock; its signed PCR 11 value is what its sections
// measure to.
func ukis(ctx context.Context, st oci.Reader, r *Report, rel *auditedRelease, fail func(string, ...any)) {
	r.UKIs = []UKI{}
	if rel.report == nil {
		return
	}
	seen := map[string]bool{}
	for _, a := range r.Artifacts {
		if a.Kind != "boot-asset" || a.Name != ukiName || a.manifest == "" {
			continue
		}
		_, goarch, _ := strings.Cut(a.Platform, "/")
		arch := rpmArch(rel.report, goarch)
		seen[arch] = true
		u, err := auditUKI(ctx, st, a, arch, rel)
		if err != nil {
			fail("%s: %s %s: %v", a.Ref, ukiName, a.Digest, err)
		}
		if u != nil {
			r.UKIs = append(r.UKIs, *u)
		}
	}
	for arch, ar := range rel.report.Architectures {
		if ar.UKI != nil && !seen[arch] {
			fail("the build report describes a signed UKI of %s that the release does not publish", arch)
		}
	}
	slices.SortFunc(r.UKIs, func(a, b UKI) int { return strings.Compare(a.Arch, b.Arch) })
}

// auditUKI checks one UKI; what it found is returned with the first
// problem.
func auditUKI(ctx context.Context, st oci.Reader, a Artifact, arch string, rel *auditedRelease) (*UKI, error) {
	ar := rel.report.Architectures[arch]
	if ar == nil || ar.UKI == nil {
		return nil, fmt.Errorf("the build report does not describe it")
	}
	rep := ar.UKI
	u := &UKI{Arch: arch, Digest: a.Digest, Stub: rep.Stub, Kernel: rep.Kernel, Checks: []string{}}
	img, err := readLayer(ctx, st, a.Repository, a.manifest, a.Digest)
	if err != nil {
		return u, err
	}
	cert, err := authenticode.Verify(img)
	if err != nil {
		return u, fmt.Errorf("its Authenticode signature: %w", err)
	}
	u.SigningCert, u.SigningCertSHA256 = cert.Subject.String(), digest.SHA256Hex(cert.Raw)
	if u.SigningCertSHA256 != rep.SigningCertSHA256 {
		return u, fmt.Errorf("signed by %s (sha256 %s), the build report says %s", u.SigningCert, u.SigningCertSHA256, rep.SigningCertSHA256)
	}
	u.Checks = append(u.Checks, "the Authenticode signature holds, by the reported certificate")
	unsigned, err := authenticode.Strip(img)
	if err != nil {
		return u, err
	}
	if u.UnsignedSHA256 = digest.SHA256Hex(unsigned); u.UnsignedSHA256 != rep.UnsignedSHA256 {
		return u, fmt.Errorf("stripped of its signature it hashes to %s, the build report says %s", u.UnsignedSHA256, rep.UnsignedSHA256)
	}
	u.Checks = append(u.Checks, "stripped of its signature it is the unsigned UKI of the build report")
	f, err := pe.NewFile(bytes.NewReader(unsigned))
	if err != nil {
		return u, err
	}
	for _, part := range []struct{ section, asset string }{{".linux", "vmlinuz"}, {".initrd", "initramfs.xz"}} {
		s := f.Section(part.section)
		want, ok := rel.report.Artifacts[arch+"/"+part.asset]
		if s == nil || !ok {
			return u, fmt.Errorf("no %s section, or no %s boot asset", part.section, part.asset)
		}
		d, err := s.Data()
		if err != nil {
			return u, err
		}
		if got := digest.SHA256Hex(d[:min(len(d), int(s.VirtualSize))]); got != want.SHA256 {
			return u, fmt.Errorf("its %s is not the release's %s (%s, want %s)", part.section, part.asset, got, want.SHA256)
		}
		if part.asset == "initramfs.xz" {
			u.Initramfs = "sha256:" + want.SHA256
		}
	}
	u.Checks = append(u.Checks, "its .linux and .initrd are the release's vmlinuz and initramfs.xz")
	locked := map[string]bool{}
	if la := rel.lock.Architectures[arch]; la != nil {
		for _, p := range la.Packages {
			locked[p.NEVRA] = true
		}
	}
	if !locked[rep.Stub] || !locked[rep.Kernel] {
		return u, fmt.Errorf("its stub (%s) and kernel (%s) are not both packages of the lock", rep.Stub, rep.Kernel)
	}
	u.Checks = append(u.Checks, "its stub and kernel are packages of the lock")
	if f.Section(".pcrsig") != nil {
		known := pcr.Known(unsigned) // the stub's strings are in the UKI
		secs, err := pcr.Sections(unsigned, known)
		if err != nil {
			return u, err
		}
		u.PCR11 = hex.EncodeToString(pcr.Measure(secs, known))
		if u.PCR11 != rep.PCR11 {
			return u, fmt.Errorf("its sections measure to PCR 11 %s, the build report signed %s", u.PCR11, rep.PCR11)
		}
		u.Checks = append(u.Checks, "its sections measure to the PCR 11 value its policies sign")
	}
	return u, nil
}

// readLayer reads a layer whole, checking its digest.
func readLayer(ctx context.Context, st oci.Reader, repo, manifest, want string) ([]byte, error) {
	rc, err := openLayer(ctx, st, repo, manifest, want)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxUKI+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxUKI {
		return nil, fmt.Errorf("larger than %d bytes", maxUKI)
	}
	if got := "sha256:" + digest.SHA256Hex(b); got != want {
		return nil, fmt.Errorf("read %s (damaged or tampered)", got)
	}
	return b, nil
}
