package build

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodeforge/builder/build/media/authenticode"
	"github.com/nodeforge/builder/build/media/uki"
	"github.com/nodeforge/builder/internal/testbase"
	"github.com/nodeforge/builder/internal/testutil"
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
		// The secure-boot build of OVMF runs its variable store in SMM.
		return testutil.BootQEMU(t, qemu, limit, "-machine", "q35,smm=on", "-global", "driver=cfi.pflash01,property=secure,value=on",
			"-accel", "tcg", "-cpu", "max", "-m", "1024", "-smp", "1", "-nographic", "-serial", "stdio", "-monitor", "none",
			"-no-reboot", "-nic", "none",
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+code,
			"-drive", "if=pflash,format=raw,unit=1,file="+vars,
			// The ESP as a read-only FAT disk of the directory (qemu's vvfat).
			"-drive", "if=virtio,format=raw,readonly=on,file=fat:"+esp)
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
