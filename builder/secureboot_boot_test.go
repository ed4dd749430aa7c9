package builder

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/attest/authenticode"
	"github.com/nodeforge/builder/builder/media/secureboot"
	"github.com/nodeforge/builder/builder/media/uki"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/testbase"
)

// snakeoilSigner is the test key Debian's ovmf ships, enrolled in PK, KEK
// and db of OVMF_VARS_4M.snakeoil.fd (its password is "snakeoil").
func snakeoilSigner(t *testing.T) authenticode.Signer {
	t.Helper()
	keyFile := testutil.NeedFile(t, "/usr/share/ovmf/PkKek-1-snakeoil.key", "ovmf")
	certFile := testutil.NeedFile(t, "/usr/share/ovmf/PkKek-1-snakeoil.pem", "ovmf")
	plain, err := exec.Command(testutil.NeedTool(t, "openssl"), "pkey", "-in", keyFile, "-passin", "pass:snakeoil").Output()
	if err != nil {
		t.Fatalf("openssl pkey: %v", err)
	}
	kb, _ := pem.Decode(plain)
	if kb == nil {
		t.Fatal("openssl pkey printed no PEM")
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(cb)
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return authenticode.Signer{Key: key.(crypto.Signer), Cert: cert}
}

// bootUKISecure boots a UKI of the test base (systemd-stub from the base's
// systemd-boot-efi, the kernel, the initramfs and the command line) as
// \EFI\BOOT\BOOTX64.EFI under Debian's OVMF with the snakeoil keys
// enrolled and Secure Boot on: signed with the snakeoil key it boots to
// the marker with the init reading SecureBoot=1; unsigned, or signed and
// then changed by one byte, the firmware refuses to start it.
func bootUKISecure(t *testing.T, qemu, kernel, initrd, cmdline, want string, timeout time.Duration) {
	t.Helper()
	stub, err := testbase.BootEFI(testbase.Options{}, "linuxx64.efi.stub")
	if err != nil {
		t.Fatal(err)
	}
	k, err := os.ReadFile(kernel)
	if err != nil {
		t.Fatal(err)
	}
	ird, err := os.ReadFile(initrd)
	if err != nil {
		t.Fatal(err)
	}
	unsigned, err := uki.Build(stub, uki.Sections([]byte("ID=nodeforge\nNAME=Nodeforge\n"), []byte(cmdline), nil, ird, k))
	if err != nil {
		t.Fatal(err)
	}
	signed, err := authenticode.Sign(unsigned, snakeoilSigner(t))
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(signed)
	flipped[len(flipped)/2] ^= 1 // in the kernel's section
	code := testutil.NeedFile(t, "/usr/share/OVMF/OVMF_CODE_4M.snakeoil.fd", "ovmf")
	varsTemplate, err := os.ReadFile(testutil.NeedFile(t, "/usr/share/OVMF/OVMF_VARS_4M.snakeoil.fd", "ovmf"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(img []byte, limit time.Duration) *testutil.BootResult {
		t.Helper()
		esp := filepath.Join(t.TempDir(), "esp")
		if err := os.MkdirAll(filepath.Join(esp, "EFI", "BOOT"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(esp, "EFI", "BOOT", "BOOTX64.EFI"), img, 0o644); err != nil {
			t.Fatal(err)
		}
		vars := filepath.Join(t.TempDir(), "vars.fd")
		if err := os.WriteFile(vars, varsTemplate, 0o644); err != nil {
			t.Fatal(err)
		}
		// The ESP as a read-only FAT disk of the directory (qemu's vvfat).
		return bootSecure(t, qemu, limit, code, vars, "fat:"+esp)
	}
	res := run(signed, timeout)
	if res.Marker != want || res.Find("nodeforge-init: SecureBoot=1") == "" {
		t.Errorf("the signed UKI under Secure Boot: marker %q (want %q), SecureBoot line %q; console:\n%s", res.Marker, want, res.Find("nodeforge-init: SecureBoot"), res.Tail(60))
	} else {
		t.Logf("signed UKI under Secure Boot: %s to the marker, %s", res.ToMarker.Round(time.Millisecond), res.Find("nodeforge-init: SecureBoot"))
	}
	// Refused images never reach a marker: the firmware's boot manager
	// says "Access Denied" and moves on; a short limit is enough.
	for what, img := range map[string][]byte{"unsigned UKI": unsigned, "signed UKI with a flipped byte": flipped} {
		res := run(img, 45*time.Second)
		if res.Marker != "" || res.Find("nodeforge-init:") != "" {
			t.Errorf("the %s ran under Secure Boot:\n%s", what, res.Tail(40))
		}
		if denied := res.Find("Access Denied"); denied == "" {
			t.Errorf("%s: the firmware did not refuse it with Access Denied:\n%s", what, res.Tail(20))
		}
	}
}

// bootSecure boots disk under the Secure Boot build of OVMF (code) with
// the variable store vars, until the init powers off, the firmware resets
// (-no-reboot makes qemu exit) or limit.
func bootSecure(t *testing.T, qemu string, limit time.Duration, code, vars, disk string, more ...string) *testutil.BootResult {
	t.Helper()
	// The secure-boot build of OVMF runs its variable store in SMM.
	args := append([]string{"-machine", "q35,smm=on", "-global", "driver=cfi.pflash01,property=secure,value=on",
		"-accel", "tcg", "-cpu", "max", "-m", "1024", "-smp", "1", "-nographic", "-serial", "stdio", "-monitor", "none",
		"-no-reboot", "-nic", "none",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + code,
		"-drive", "if=pflash,format=raw,unit=1,file=" + vars,
		"-drive", "if=virtio,format=raw,readonly=on,file=" + disk}, more...)
	return testutil.BootQEMU(t, qemu, limit, args...)
}

// bootSecureBootMedia builds the Secure Boot media of o (a new key set)
// and checks them with the judges: sbverify accepts the UKI and the
// ISO's systemd-boot with the db certificate, objdump lists the UKI's
// sections; then OVMF in setup mode (no keys: Debian's blank variable
// store) boots the raw image, systemd-boot enrols the set from
// loader/keys/auto/ and resets (the variable store then holds the set's
// certificates and, with the schematic's
// secureboot.includeWellKnownCertificates, Microsoft's), and the next
// boot, with Secure Boot now enforcing our keys, reaches the marker with
// the init reading SecureBoot=1.
func bootSecureBootMedia(t *testing.T, qemu string, o Options, want string, timeout time.Duration) {
	t.Helper()
	keys := t.TempDir()
	ks, err := secureboot.Generate("Nodeforge boot test", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	files, err := ks.Files()
	if err != nil {
		t.Fatal(err)
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(keys, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if o.SecureBoot, err = secureboot.Load(keys, ""); err != nil {
		t.Fatal(err)
	}
	o.DiskFormats, o.DiskCompressions = []string{"iso", "raw"}, []string{}
	t0 := time.Now()
	rep, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Secure Boot media built in %s", time.Since(t0).Round(time.Millisecond))
	// A next build may replace it: the report accounts for every file,
	// the Secure Boot installer's layout included.
	if _, err := ResolveOutput(o.Out); err != nil {
		t.Error(err)
	}
	sb := rep.Media.SecureBoot
	if sb == nil || sb.SigningCertSHA256 != digest.SHA256Hex(ks.DB.Cert.Raw) || sb.Stub["x86_64"] == "" || !sb.EnrolsKeys {
		t.Errorf("the report's secureBoot says %+v", sb)
	}
	media := filepath.Join(o.Out, "media", rep.Media.Schematic)
	ukiPath := filepath.Join(media, "metal-x86_64-secureboot-uki.efi")
	sbverify := testutil.NeedTool(t, "sbverify")
	loader := filepath.Join(t.TempDir(), "BOOTX64.EFI")
	if out, err := exec.Command(testutil.NeedTool(t, "xorriso"), "-osirrox", "on", "-indev", filepath.Join(media, "metal-x86_64-secureboot.iso"),
		"-extract", "/EFI/BOOT/BOOTX64.EFI", loader).CombinedOutput(); err != nil {
		t.Fatalf("xorriso -extract: %v\n%s", err, out)
	}
	for _, f := range []string{ukiPath, loader} {
		if out, err := exec.Command(sbverify, "--cert", filepath.Join(keys, "db.pem"), f).CombinedOutput(); err != nil {
			t.Errorf("sbverify --cert db.pem %s: %v\n%s", filepath.Base(f), err, out)
		}
	}
	hdr, err := exec.Command(testutil.NeedTool(t, "objdump"), "-h", ukiPath).CombinedOutput()
	if err != nil {
		t.Fatalf("objdump -h: %v\n%s", err, hdr)
	}
	for _, sec := range []string{".osrel", ".cmdline", ".uname", ".pcrsig", ".pcrpkey", ".initrd", ".linux"} {
		if !strings.Contains(string(hdr), " "+sec+" ") {
			t.Errorf("objdump -h lists no %s in the UKI:\n%s", sec, hdr)
		}
	}

	code := testutil.NeedFile(t, "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd", "ovmf")
	blank, err := os.ReadFile(testutil.NeedFile(t, "/usr/share/OVMF/OVMF_VARS_4M.fd", "ovmf"))
	if err != nil {
		t.Fatal(err)
	}
	vars := filepath.Join(t.TempDir(), "vars.fd")
	if err := os.WriteFile(vars, blank, 0o644); err != nil {
		t.Fatal(err)
	}
	raw := filepath.Join(media, "metal-x86_64-secureboot.raw")
	enrol := bootSecure(t, qemu, timeout, code, vars, raw)
	if enrol.Find("Enrolling secure boot keys") == "" || enrol.Marker != "" {
		t.Fatalf("setup mode: systemd-boot did not enrol the keys and reset (marker %q, qemu: %v):\n%s", enrol.Marker, enrol.Err, enrol.Tail(40))
	}
	t.Logf("setup mode: keys enrolled, firmware reset after %s", enrol.Total.Round(time.Millisecond))
	checkEnrolled(t, vars, ks, o.Schematic != nil && o.Schematic.Customization.SecureBoot.IncludeWellKnownCertificates)
	// A TPM (swtpm) measures this boot: systemd-stub extends PCR 11 with
	// the UKI's sections, and the value must be the one whose policies
	// the UKI's .pcrsig signs.
	tpm := testutil.StartSWTPM(t, true)
	res := bootSecure(t, qemu, timeout, code, vars, raw, "-chardev", "socket,id=chrtpm,path="+tpm,
		"-tpmdev", "emulator,id=tpm0,chardev=chrtpm", "-device", "tpm-tis,tpmdev=tpm0")
	if res.Marker != want || res.Find("nodeforge-init: SecureBoot=1") == "" {
		t.Errorf("after enrolment: marker %q (want %q), SecureBoot line %q; console:\n%s", res.Marker, want, res.Find("nodeforge-init: SecureBoot"), res.Tail(60))
	} else {
		t.Logf("after enrolment: the raw image boots to the marker in %s under Secure Boot with our keys (%s)", res.ToMarker.Round(time.Millisecond), res.Find("nodeforge-init: SecureBoot"))
	}
	if got := res.Find("nodeforge-init: PCR11 sha256"); !strings.HasSuffix(got, " "+sb.PCR11["x86_64"]) || sb.PCR11["x86_64"] == "" {
		t.Errorf("the TPM's PCR 11 after the boot: %q; the report (and .pcrsig) say %q", got, sb.PCR11["x86_64"])
	} else {
		t.Logf("PCR 11 in the TPM equals the value the UKI's .pcrsig signs: %s", sb.PCR11["x86_64"])
	}
}

// checkEnrolled: the firmware's variable store holds the key set's
// certificates and, when wellKnown, Microsoft's well-known ones.
func checkEnrolled(t *testing.T, vars string, ks *secureboot.Keys, wellKnown bool) {
	t.Helper()
	store, err := os.ReadFile(vars)
	if err != nil {
		t.Fatal(err)
	}
	certs := []*x509.Certificate{ks.PK.Cert, ks.KEK.Cert, ks.DB.Cert}
	if wellKnown {
		for _, n := range []string{"KEK", "db"} {
			wk, err := secureboot.WellKnown(n)
			if err != nil {
				t.Fatal(err)
			}
			certs = append(certs, wk...)
		}
	}
	for _, c := range certs {
		if !bytes.Contains(store, c.Raw) {
			t.Errorf("the firmware did not enrol %s", c.Subject.CommonName)
		}
	}
}
