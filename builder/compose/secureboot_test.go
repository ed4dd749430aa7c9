package compose

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/builder/media/secureboot"
	"github.com/nodeforge/builder/pkgbase/testbase"
)

// TestWellKnownESP: with secureboot.includeWellKnownCertificates the
// Secure Boot ESP's loader/keys/auto/ holds the key set's WellKnownAuth
// (KEK.auth and db.auth enrolling Microsoft's UEFI certificates too,
// PK.auth the set's own); without it, the set's .auth files as before.
// The signed boot loader and UKI are the same bytes either way. A key set
// that can make no such files refuses the option, naming it.
func TestWellKnownESP(t *testing.T) {
	stub := testbase.EFIForTest(t, "linuxx64.efi.stub")
	loader := testbase.EFIForTest(t, "systemd-bootx64.efi")
	if stub == nil || loader == nil {
		return
	}
	ks, err := secureboot.Generate("Nodeforge compose test", time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	files, err := ks.Files()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := secureboot.Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	_, initrd := testBootFiles()
	b := Boot{Arch: "x86_64", Vmlinuz: []byte("vmlinuz"), Initramfs: initrd, Bootloader: loader, KernelVersion: "6.1.0-57-amd64", Stub: stub}
	esp := func(doc string, s *secureboot.Signing) (map[string][]byte, error) {
		sch, err := schematic.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		r, err := Media(context.Background(), b, nil, Options{Schematic: sch, Platform: "metal", InitramfsCompression: "zstd", SourceDate: 1700000000,
			Work: t.TempDir(), PrettyName: "Nodeforge test", DiskFormats: []string{}, SecureBoot: &SecureBoot{Signing: s}})
		if err != nil {
			return nil, err
		}
		m := map[string][]byte{}
		for _, f := range r.ESP {
			m[f.Path] = f.Data
		}
		return m, nil
	}
	plain, err := esp("{}", s)
	if err != nil {
		t.Fatal(err)
	}
	wk, err := esp("customization: {secureboot: {includeWellKnownCertificates: true, enrollKeys: if-safe}}", s)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range secureboot.Names {
		p := "loader/keys/auto/" + n + ".auth"
		want := files[n+secureboot.WellKnownSuffix]
		if n == "PK" {
			want = files["PK.auth"]
		}
		if !bytes.Equal(plain[p], files[n+".auth"]) || !bytes.Equal(wk[p], want) {
			t.Errorf("%s: not the key set's .auth file (%d, %d bytes)", p, len(plain[p]), len(wk[p]))
		}
	}
	// The UKI's initramfs carries the schematic's ID (the schematic
	// layer): another schematic, another UKI.
	for p, data := range plain {
		if !strings.HasPrefix(p, "loader/") && !strings.HasPrefix(p, "EFI/Linux/") && !bytes.Equal(wk[p], data) {
			t.Errorf("%s differs with the well-known certificates", p)
		}
	}
	if string(wk["loader/loader.conf"]) != "timeout 0\nsecure-boot-enroll if-safe\n" {
		t.Errorf("loader.conf: %q", wk["loader/loader.conf"])
	}

	for _, n := range []string{"KEK" + secureboot.WellKnownSuffix, "db" + secureboot.WellKnownSuffix, "PK.key"} {
		os.Remove(filepath.Join(dir, n))
	}
	if s, err = secureboot.Load(dir, ""); err != nil {
		t.Fatal(err)
	}
	_, err = esp("customization: {secureboot: {includeWellKnownCertificates: true}}", s)
	if err == nil || !strings.Contains(err.Error(), "customization.secureboot.includeWellKnownCertificates") || !strings.Contains(err.Error(), "PK.key") {
		t.Errorf("a key set without PK.key made the well-known .auth files: %v", err)
	}
}
