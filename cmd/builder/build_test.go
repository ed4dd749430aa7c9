package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// TestDemoBuildAndRepro: the README quick start (demo base, lock, build),
// then builder repro, which starts two builds as child processes under
// different TZ, locale, umask, GOMAXPROCS, cwd, HOME and lay order.
func TestDemoBuildAndRepro(t *testing.T) {
	dir, spec, cacheDir := lockedDemo(t)
	out, err := runBuilder(t, "build", "-q", "--spec", spec, "--cache", cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"x86_64/vmlinuz", "x86_64/initramfs.xz", "x86_64/rootfs.sqsh", "x86_64/cmdline", "report.json"} {
		if !strings.Contains(out, filepath.Join(dir, "out", f)) {
			t.Errorf("build output does not name %s:\n%s", f, out)
		}
		if _, err := os.Stat(filepath.Join(dir, "out", f)); err != nil {
			t.Error(err)
		}
	}
	// With a schematic the builds also write its boot media: the
	// initramfs with extensions, the ISO and the raw image with variants;
	// extensions and the installer image are in every build.
	sch := filepath.Join(t.TempDir(), "schematic.yaml")
	os.WriteFile(sch, []byte("customization:\n  extraKernelArgs: [console=ttyS0]\n  systemExtensions:\n    officialExtensions: [zfs, cri]\n"), 0o644)
	out, err = runBuilder(t, "repro", "--json", "--spec", spec, "--cache", cacheDir, "--schematic", sch)
	if err != nil {
		t.Fatalf("repro: %v\n%s", err, out)
	}
	validateSchema(t, "repro.schema.json", []byte(out))
	if !strings.Contains(out, `"reproducible": true`) || !strings.Contains(out, `"differences": []`) {
		t.Errorf("repro: %s", out)
	}
	// What was compared: a build with the same schematic lists the media.
	out, err = runBuilder(t, "image", "-q", "--spec", spec, "--cache", cacheDir, "--schematic", sch, "--kind", "raw")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"metal-x86_64.raw", "metal-x86_64.raw.zst", "metal-x86_64.raw.xz"} {
		if !strings.Contains(out, f+"  sha256:") {
			t.Errorf("image --kind raw does not list %s:\n%s", f, out)
		}
	}
	for _, f := range []string{"metal-x86_64.iso  sha256:", "metal-x86_64.iso.zst", "metal-x86_64.iso.xz"} {
		if o, _ := runBuilder(t, "image", "-q", "--spec", spec, "--cache", cacheDir, "--schematic", sch, "--kind", "iso"); !strings.Contains(o, f) {
			t.Errorf("image --kind iso does not list %s:\n%s", f, o)
		}
	}
	out, err = runBuilder(t, "image", "-q", "--spec", spec, "--cache", cacheDir, "--schematic", sch, "--kind", "installer")
	if err != nil || !strings.Contains(out, "/installer  sha256:") {
		t.Errorf("image --kind installer: %v\n%s", err, out)
	}
	for _, d := range []string{"installer/index.json", "extensions/zfs/index.json", "extensions/cri/index.json"} {
		if _, err := os.Stat(filepath.Join(dir, "out", d)); err != nil {
			t.Error(err)
		}
	}
	// --kind builds only what it names: no disk image for the installer.
	if _, err := os.Stat(filepath.Join(dir, "out", "media")); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "out", "media", "*", "metal-*")); len(m) > 0 {
		t.Errorf("image --kind installer wrote disk images: %v", m)
	}
	checkPlatformDisks(t, spec, cacheDir, sch, filepath.Join(dir, "out"))
	out, err = runBuilder(t, "image", "-q", "--spec", spec, "--cache", cacheDir, "--schematic", sch, "--kind", "all")
	if err != nil || !strings.Contains(out, "metal-x86_64.iso  sha256:") || !strings.Contains(out, "metal-x86_64.raw.xz  sha256:") {
		t.Errorf("image --kind all: %v\n%s", err, out)
	}
	// qemu-img judges the qcow2 disk: sound, and the raw disk's equal.
	media, _ := filepath.Glob(filepath.Join(dir, "out", "media", "*"))
	if len(media) == 1 {
		qemuImg := testutil.NeedTool(t, "qemu-img")
		q, r := filepath.Join(media[0], "metal-x86_64.qcow2"), filepath.Join(media[0], "metal-x86_64.raw")
		for _, args := range [][]string{{"check", "-f", "qcow2", q}, {"compare", "-f", "raw", "-F", "qcow2", r, q}} {
			if o, err := exec.Command(qemuImg, args...).CombinedOutput(); err != nil {
				t.Errorf("qemu-img %v: %v\n%s", args, err, o)
			}
		}
	} else {
		t.Errorf("media directories: %v", media)
	}
	checkGoldenFiles(t, filepath.Join(dir, "out"), "demo-build.sha256")
}

// checkPlatformDisks builds the Azure and GCP disks of the schematic into
// out and has qemu-img and GNU tar judge them against the raw disk.
func checkPlatformDisks(t *testing.T, spec, cacheDir, sch, out string) {
	t.Helper()
	qemuImg, tarTool := testutil.NeedTool(t, "qemu-img"), testutil.NeedTool(t, "tar")
	o, err := runBuilder(t, "image", "-q", "--spec", spec, "--cache", cacheDir, "--schematic", sch, "--platform", "azure", "--kind", "all", "--compress", "")
	if err != nil || !strings.Contains(o, "azure-x86_64.vhd  sha256:") || strings.Contains(o, ".iso") {
		t.Fatalf("image --platform azure --kind all: %v\n%s", err, o)
	}
	media, _ := filepath.Glob(filepath.Join(out, "media", "*"))
	if len(media) != 1 {
		t.Fatalf("media directories: %v", media)
	}
	cmdline, err := os.ReadFile(filepath.Join(media[0], "cmdline-azure-x86_64"))
	// Talos's: the platform's arguments first, the schematic's console=
	// in place of Azure's, no trailing newline.
	if err != nil || !strings.HasPrefix(string(cmdline), "talos.platform=azure console=ttyS0 earlyprintk=ttyS0,115200 rootdelay=300 net.ifnames=0 ") || !strings.HasSuffix(string(cmdline), " module.sig_enforce=1") {
		t.Errorf("cmdline-azure-x86_64: %v %q", err, cmdline)
	}
	vhd := filepath.Join(media[0], "azure-x86_64.vhd")
	// The raw disk of the same platform, to compare with.
	if o, err := runBuilder(t, "image", "-q", "--spec", spec, "--cache", cacheDir, "--schematic", sch, "--platform", "azure", "--kind", "raw", "--compress", ""); err != nil {
		t.Fatalf("image --platform azure --kind raw: %v\n%s", err, o)
	}
	raw := filepath.Join(t.TempDir(), "azure.raw")
	if err := os.Rename(filepath.Join(media[0], "azure-x86_64.raw"), raw); err != nil {
		t.Fatal(err)
	}
	o, err = runBuilder(t, "image", "-q", "--spec", spec, "--cache", cacheDir, "--schematic", sch, "--platform", "azure", "--kind", "vhd", "--compress", "")
	if err != nil || !strings.Contains(o, "azure-x86_64.vhd  sha256:") {
		t.Fatalf("image --kind vhd: %v\n%s", err, o)
	}
	if o, err := exec.Command(qemuImg, "compare", "-f", "raw", "-F", "vpc", raw, vhd).CombinedOutput(); err != nil {
		t.Errorf("qemu-img compare raw vhd: %v\n%s", err, o)
	}
	if o, err := runBuilder(t, "image", "-q", "--spec", spec, "--cache", cacheDir, "--schematic", sch, "--platform", "gcp", "--kind", "all"); err != nil || !strings.Contains(o, "gcp-x86_64.raw.tar.gz  sha256:") {
		t.Fatalf("image --platform gcp: %v\n%s", err, o)
	}
	gz := filepath.Join(media[0], "gcp-x86_64.raw.tar.gz")
	if o, err := exec.Command(tarTool, "-tzf", gz).CombinedOutput(); err != nil || string(o) != "disk.raw\n" {
		t.Errorf("tar -tzf %s: %v\n%s", gz, err, o)
	}
}
