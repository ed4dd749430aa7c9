package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/builder/media/secureboot"
	"github.com/nodeforge/builder/certification"
	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/factory/server"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/pkgbase/testbase"
)

// TestFactoryBoot releases the extensions' boot test base (Debian's
// kernel, the node init, the testext extension, and the cri and btrfs
// extensions made from Debian's containerd, runc, CNI plugins and
// btrfs-progs) into a layout, asks a factory for the media of a schematic
// with cri and btrfs and boots what it served under OVMF, the ISO as a CD
// and the raw disk image, to the markers of TestBootExtensions (build's
// ISO of the same schematic): a container's output and a btrfs file
// system. (Boots without the extensions, which must not start them, are
// TestBootDebianKernel's; the factory's ISO is the one code path of
// builder/compose, whose hybrid ISO boots as a disk there.)
func TestFactoryBoot(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain; the longest test of the package, which alone would keep a core idle
	t0 := time.Now()
	specPath := testbase.ForTest(t, testbase.Options{Extensions: true})
	qemu := testutil.NeedTool(t, "qemu-system-x86_64")
	s, err := specs.Load(specPath)
	if err != nil {
		t.Fatal(err)
	}
	baseTime := time.Since(t0)
	keys := filepath.Join(t.TempDir(), "keys")
	if out, err := runBuilder(t, "keys", "generate", "--out", keys); err != nil {
		t.Fatalf("keys generate: %v\n%s", err, out)
	}
	// Released with Secure Boot: a signed UKI per architecture among the
	// boot assets, which the audit checks.
	sbKeys := filepath.Join(t.TempDir(), "sb")
	if out, err := runBuilder(t, "keys", "generate", "--secureboot", "--out", sbKeys); err != nil {
		t.Fatalf("keys generate --secureboot: %v\n%s", err, out)
	}
	t1 := time.Now()
	if out, err := runBuilder(t, "release", "-q", "--branch", "boottest", "--spec", specPath, "--cache", t.TempDir(), "--key", filepath.Join(keys, "cosign.key"),
		"--secureboot", sbKeys); err != nil {
		t.Fatalf("release: %v\n%s", err, out)
	}
	releaseTime := time.Since(t1)
	layout := filepath.Join(filepath.Dir(specPath), "release", "dev")
	checkRelocatedTraced(t, auditSecureBoot(t, layout, filepath.Join(keys, "cosign.pub"), sbKeys))
	url := startBootFactory(t, layout, filepath.Join(keys, "cosign.pub"), sbKeys)
	id := postSchematic(t, url, "customization:\n  systemExtensions:\n    officialExtensions: [testext]\n")
	versions := getBody(t, url+"/versions")
	version := strings.Trim(strings.TrimSpace(versions), `[]"`)
	checkFactorySecureBoot(t, url, id, version, sbKeys, layout, filepath.Join(keys, "cosign.pub"))
	// The node of TestBootExtensions, from the factory.
	extID := postSchematic(t, url, "customization:\n  systemExtensions:\n    officialExtensions: [cri, btrfs]\n")
	t2 := time.Now()
	extISO := download(t, url+"/image/"+extID+"/"+version+"/metal-amd64.iso")
	isoTime := time.Since(t2)
	extRaw := download(t, url+"/image/"+extID+"/"+version+"/metal-amd64.raw")
	t.Logf("timings: base %s, release %s, the factory's ISO %s, raw disk %s", baseTime.Round(time.Millisecond), releaseTime.Round(time.Millisecond),
		isoTime.Round(time.Millisecond), (time.Since(t2) - isoTime).Round(time.Millisecond))

	want := "NODEFORGE-BOOT-OK PRETTY_NAME=" + s.Image.OS.PrettyName
	for _, c := range []struct{ what, drive string }{
		{"the factory's cri and btrfs ISO as a CD", "-cdrom"},
		{"the factory's cri and btrfs raw disk", "-drive"},
	} {
		media := []string{"-cdrom", extISO}
		if c.drive == "-drive" {
			media = []string{"-drive", "if=virtio,format=raw,file=" + extRaw}
		}
		args := append(append(append(append([]string{}, testutil.TCG...), testutil.OVMF(t)...), media...), testbase.ExtensionDisks(t, specPath)...)
		// The banner names the schematic: the factory's media carry its layer.
		lines := append([]string{testbase.SchematicLine(extID)}, testbase.ExtensionBootLines...)
		res := testutil.BootCheck(t, qemu, c.what, want, testutil.BootTimeout(t, 2*testutil.BootTimeoutDefault), args, lines...)
		testbase.LogExtensionSteps(t, c.what, res)
		t.Logf("%s: marker after %s (qemu ran %s)", c.what, res.ToMarker.Round(time.Millisecond), res.Total.Round(time.Millisecond))
	}
}

// startBootFactory serves the release layout with a factory (verified
// with pub, Secure Boot media signed with the set in sbKeys) and returns
// its URL.
func startBootFactory(t *testing.T, layout, pub, sbKeys string) string {
	t.Helper()
	st, err := oci.OpenLayout(layout)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := oci.CreateLayout(filepath.Join(t.TempDir(), "factory-cache"))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := loadVerifiers([]string{pub})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := secureboot.Load(sbKeys, "")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(context.Background(), server.Options{Service: factory.Options{Releases: []factory.ReleaseStore{{Store: st, Keys: vs}},
		Cache: cache, BuilderVersion: "test", Work: t.TempDir(), SecureBoot: sb}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// postSchematic POSTs a schematic to the factory at url and returns its ID.
func postSchematic(t *testing.T, url, yaml string) string {
	t.Helper()
	resp, err := http.Post(url+"/schematics", "application/yaml", strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	id, _, _ := strings.Cut(strings.TrimPrefix(string(b), `{"id":"`), `"`)
	if resp.StatusCode != 201 || len(id) != 64 {
		t.Fatalf("POST /schematics: %d %s", resp.StatusCode, b)
	}
	return id
}

// download GETs url (200) into a new file named as its last element.
func download(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	p := filepath.Join(t.TempDir(), path.Base(url))
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// getBody GETs url and wants 200.
func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}

// checkFactorySecureBoot: the factory serves its Secure Boot certificate,
// and a -secureboot UKI that sbverify accepts with it, byte for byte
// what builder image --release --secureboot writes from the same release
// (one code path: the release's installer carries the base's
// systemd-stub); the Secure Boot ISO comes whole.
func checkFactorySecureBoot(t *testing.T, url, id, version, sbKeys, layout, pub string) {
	t.Helper()
	cert := getBody(t, url+"/secureboot/signing-cert.pem")
	if want, _ := os.ReadFile(filepath.Join(sbKeys, "db.pem")); cert != string(want) {
		t.Errorf("/secureboot/signing-cert.pem is not db.pem:\n%s", cert)
	}
	served := filepath.Join(t.TempDir(), "metal-x86_64-secureboot-uki.efi")
	if err := os.WriteFile(served, []byte(getBody(t, url+"/image/"+id+"/"+version+"/metal-amd64-secureboot-uki.efi")), 0o644); err != nil {
		t.Fatal(err)
	}
	if o, err := exec.Command(testutil.NeedTool(t, "sbverify"), "--cert", filepath.Join(sbKeys, "db.pem"), served).CombinedOutput(); err != nil {
		t.Errorf("sbverify the factory's UKI: %v\n%s", err, o)
	}
	sch := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(sch, []byte("customization:\n  systemExtensions:\n    officialExtensions: [testext]\n"), 0o644)
	out := t.TempDir()
	if o, err := builderStdout(t, "image", "-q", "--release", "oci:"+layout, "--version", version, "--key", pub, "--schematic", sch,
		"--kind", "uki", "--secureboot", sbKeys, "--out", out); err != nil {
		t.Fatalf("image --release --secureboot: %v\n%s", err, o)
	}
	a, _ := os.ReadFile(served)
	b, _ := os.ReadFile(filepath.Join(out, "media", id, "metal-x86_64-secureboot-uki.efi"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("the factory's UKI (%d bytes) is not builder image --release --secureboot's (%d bytes)", len(a), len(b))
	}
	iso := getBody(t, url+"/image/"+id+"/"+version+"/metal-amd64-secureboot.iso")
	if len(iso) < 1<<20 || iso[0x8001:0x8006] != "CD001" {
		t.Errorf("the Secure Boot ISO: %d bytes, no ISO 9660 descriptor", len(iso))
	}
	checkSecureBootInstaller(t, strings.TrimPrefix(url, "http://")+"/installer-secureboot/"+id+":"+version, a, sbKeys,
		"image", "-q", "--release", "oci:"+layout, "--version", version, "--key", pub, "--schematic", sch, "--secureboot", sbKeys)
}

// checkSecureBootInstaller: the factory's installer-secureboot (ref) is
// the index builder image (args) --kind installer writes, by digest; in
// it, as crane exports it, the signed ESP replaces the unsigned boot code:
// the UKI is the Secure Boot media's (uki), sbverify accepts it and
// systemd-boot with db.pem, the key set's .auth files are there.
func checkSecureBootInstaller(t *testing.T, ref string, uki []byte, sbKeys string, args ...string) {
	t.Helper()
	out := t.TempDir()
	o, err := builderStdout(t, append(args, "--kind", "installer", "--out", out)...)
	if err != nil {
		t.Fatalf("image --kind installer --secureboot: %v\n%s", err, o)
	}
	var wrote string
	for _, line := range strings.Split(strings.TrimSpace(o), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && filepath.Base(f[0]) == "installer-secureboot" {
			wrote = "sha256:" + strings.TrimPrefix(f[1], "sha256:")
		}
	}
	if got := strings.TrimSpace(judge(t, "crane", "digest", "--insecure", ref)); wrote == "" || got != wrote {
		t.Errorf("crane digest %s = %s, builder image --kind installer --secureboot wrote %q:\n%s", ref, got, wrote, o)
	}
	exported := filepath.Join(t.TempDir(), "fs.tar")
	judge(t, "crane", "export", "--insecure", "--platform", "linux/amd64", ref, exported)
	files := tarFiles(t, exported)
	dir := "usr/install/amd64/"
	// The ESP's UKI, and the same where Talos's installer looks for it.
	for _, name := range []string{"esp/EFI/Linux/nodeforge.efi", "vmlinuz.efi"} {
		if !bytes.Equal(files[dir+name], uki) {
			t.Errorf("the Secure Boot installer's %s (%d bytes) is not the Secure Boot media's UKI", name, len(files[dir+name]))
		}
	}
	if b := files[dir+"systemd-boot.efi"]; len(b) == 0 || !bytes.Equal(b, files[dir+"esp/EFI/BOOT/BOOTX64.EFI"]) {
		t.Error("the Secure Boot installer's systemd-boot.efi is not its ESP's signed systemd-boot")
	}
	for _, name := range []string{"vmlinuz", "initramfs.xz", "systemd-stub.efi"} {
		if _, ok := files[dir+name]; ok {
			t.Errorf("the Secure Boot installer still carries the unsigned %s", name)
		}
	}
	for _, name := range []string{"esp/loader/loader.conf", "esp/loader/keys/auto/PK.auth", "esp/loader/keys/auto/db.auth"} {
		if len(files[dir+name]) == 0 {
			t.Errorf("the Secure Boot installer has no %s", name)
		}
	}
	t.Logf("%s: %s, %d files (%d under esp/)", ref, wrote, len(files), len(slices.DeleteFunc(slices.Collect(maps.Keys(files)), func(n string) bool { return !strings.Contains(n, "/esp/") })))
	for _, name := range []string{"esp/EFI/BOOT/BOOTX64.EFI", "esp/EFI/Linux/nodeforge.efi"} {
		p := filepath.Join(t.TempDir(), filepath.Base(name))
		os.WriteFile(p, files[dir+name], 0o644)
		if o, err := exec.Command(testutil.NeedTool(t, "sbverify"), "--cert", filepath.Join(sbKeys, "db.pem"), p).CombinedOutput(); err != nil {
			t.Errorf("sbverify the Secure Boot installer's %s: %v\n%s", name, err, o)
		}
	}
}

// tarFiles reads the regular files of a tar by name (hard links as the
// files they link to).
func tarFiles(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[strings.TrimPrefix(h.Name, "./")] = b
		case tar.TypeLink: // a hard link to a file before it
			files[strings.TrimPrefix(h.Name, "./")] = files[strings.TrimPrefix(strings.TrimPrefix(h.Linkname, "/"), "./")]
		}
	}
}

// auditSecureBoot: builder audit lists the release's signed UKI with the
// packages of its stub and kernel, its initramfs and its signing
// certificate (the set's db certificate), every check holding (its
// signature verified, stripped it is the unsigned UKI, its kernel and
// initramfs the release's, its PCR 11 value what its sections measure).
func auditSecureBoot(t *testing.T, layout, pub, sbKeys string) *certification.Report {
	t.Helper()
	// The test base is signed: the release passes, UKI and all.
	rep, out, stdout, _ := auditChild(t, "--key", pub, layout)
	if rep.Verdict != "pass" {
		t.Errorf("the audit of the Secure Boot release: %s %v\n%s", rep.Verdict, rep.Reasons, stdout)
	}
	b, _ := os.ReadFile(filepath.Join(out, "audit.json"))
	validateSchema(t, "../audit.schema.json", b)
	dbPEM, _ := os.ReadFile(filepath.Join(sbKeys, "db.pem"))
	block, _ := pem.Decode(dbPEM)
	if len(rep.UKIs) != 1 {
		t.Fatalf("the audit lists %d UKIs: %+v", len(rep.UKIs), rep.UKIs)
	}
	u := rep.UKIs[0]
	if u.Arch != "x86_64" || !strings.HasPrefix(u.Stub, "systemd-boot-efi-") || !strings.HasPrefix(u.Kernel, "kernel-image-") ||
		u.SigningCertSHA256 != digest.SHA256Hex(block.Bytes) || u.PCR11 == "" || len(u.Checks) < 5 {
		t.Errorf("the audit's UKI: %+v", u)
	}
	md, _ := os.ReadFile(filepath.Join(out, "audit.md"))
	if !strings.Contains(string(md), "Secure Boot: signed UKIs (1)") {
		t.Errorf("audit.md has no Secure Boot section")
	}
	t.Logf("audit: UKI %s, stub %s, kernel %s, signed by %s; %s", u.Digest, u.Stub, u.Kernel, u.SigningCert, strings.Join(u.Checks, "; "))
	return rep
}

// checkRelocatedTraced: the audit passed (0 unowned files) with the cri
// and btrfs extensions made from Debian's layout: their programs,
// relocated into /usr/local by the definitions' rules, are each traced to
// the package that put them in /usr/bin, /sbin, /usr/lib/cni.
func checkRelocatedTraced(t *testing.T, rep *certification.Report) {
	t.Helper()
	want := map[string][2]string{
		"/usr/local/bin/containerd":       {"/usr/bin/containerd", "containerd-"},
		"/usr/local/sbin/runc":            {"/usr/sbin/runc", "runc-"},
		"/usr/local/lib/cni/bin/loopback": {"/usr/lib/cni/loopback", "containernetworking-plugins-"},
		"/usr/local/sbin/mkfs.btrfs":      {"/sbin/mkfs.btrfs", "btrfs-progs-"},
	}
	for _, f := range rep.Files.List {
		w, ok := want[f.Path]
		if !ok || !strings.HasPrefix(f.Artifact, "extension/") {
			continue
		}
		if f.RelocatedFrom != w[0] || !strings.HasPrefix(f.Package, w[1]) || f.Problem != "" {
			t.Errorf("the audit's %s: %+v, want relocated from %s, package %s*", f.Path, f, w[0], w[1])
		}
		delete(want, f.Path)
	}
	if len(want) > 0 || rep.Files.Relocated == 0 || rep.Files.Unowned != 0 {
		t.Errorf("the audit: %d relocated, %d unowned files; not listed: %v", rep.Files.Relocated, rep.Files.Unowned, want)
	}
	t.Logf("audit: %d files, %d relocated by the extensions' definitions, each traced to its package", rep.Files.Total, rep.Files.Relocated)
}
