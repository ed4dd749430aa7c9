package demobase

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/internal/testutil"
)

// TestBootFromCacheMissing: an empty cache is ErrNoBootPackages (make demo
// then writes the stand-ins), naming the directory and the fetcher.
func TestBootFromCacheMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := BootFromCache(dir, "/nonexistent/init")
	if !errors.Is(err, ErrNoBootPackages) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "fetch-test-kernel.sh --demo") {
		t.Errorf("empty cache: %v", err)
	}
}

// TestWriteBootable wraps Debian's packages (cached by
// scripts/fetch-test-kernel.sh; one small module tree, to stay cheap) and
// judges the result with Debian's rpm and dpkg-deb: the demo key's
// signatures verify, the kernel package's vmlinuz is the .deb's byte for
// byte (GNU tar stops at it: --occurrence), and the spec boots nodeforge-init.
func TestWriteBootable(t *testing.T) {
	rpmBin := testutil.NeedTool(t, "rpm")
	testutil.NeedTool(t, "dpkg-deb")
	cache := os.Getenv("NODEFORGE_CACHE_DIR")
	if cache == "" {
		cache = "/var/cache/nodeforge"
	}
	init := filepath.Join(t.TempDir(), "init")
	// Only the ELF magic is checked; no node runs this one.
	if err := os.WriteFile(init, append([]byte("\x7fELF\x02\x01\x01"), make([]byte, 57)...), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := BootFromCache(cache, init)
	if errors.Is(err, ErrNoBootPackages) {
		testutil.Missing(t, err.Error())
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	b.ModuleTrees = []string{"kernel/fs/squashfs", "modules.order"}
	// Two of the extensions' packages, to stay cheap (containerd is 100
	// MB): btrfs-progs and libc6, which takes glibc-core's place.
	b.ExtDebs = slices.DeleteFunc(b.ExtDebs, func(deb string) bool {
		name, _, _ := strings.Cut(filepath.Base(deb), "_")
		return name != "btrfs-progs" && name != "libc6"
	})
	if len(b.ExtDebs) != 2 {
		testutil.Missing(t, "Debian's btrfs-progs and libc6 in "+filepath.Join(cache, "extension-debs")+" (scripts/fetch-test-kernel.sh --demo fetches them)")
		return
	}
	dir := t.TempDir()
	sum, err := WriteBootable(dir, b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sum.KernelVersion, "6.1.0-") || sum.Packages < 25 || len(sum.Extensions) != 2 {
		t.Errorf("summary %+v", sum)
	}

	s, err := specs.Load(filepath.Join(dir, SpecFile))
	if err != nil {
		t.Fatal(err)
	}
	if s.Image.Init.Package != InitPackage || s.Image.Init.Path != InitPath || !strings.Contains(strings.Join(s.Image.Cmdline, " "), "console=ttyS0") {
		t.Errorf("image section: %+v", s.Image)
	}
	// The cri and btrfs extensions take Debian's packages by their
	// definitions (the extensions-dir's, in place of the shipped ones);
	// the root takes the libraries they load, libc6 for glibc-core.
	for name, pkg := range map[string]string{"cri": "containernetworking-plugins", "btrfs": "btrfs-progs"} {
		if c := s.Components[name]; !slices.Contains(c.Packages, pkg) || !slices.Equal(c.Packages, s.Extensions[name].Packages) {
			t.Errorf("component %s %+v, definition %+v", name, c, s.Extensions[name])
		}
	}
	if root := s.Components["rootfs"].Packages; !slices.Contains(root, "libc6") || !slices.Contains(root, "filesystem") || slices.Contains(root, "glibc-core") {
		t.Errorf("rootfs packages %v", root)
	}
	// The container image the node runs is the release's own, of the
	// init's package.
	if im, ok := s.Images[ImageName]; !ok || !slices.Equal(im.Packages, []string{InitPackage}) || !slices.Equal(im.Entrypoint, []string{InitPath, "hello"}) {
		t.Errorf("images: %+v", s.Images)
	}

	db := t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run(rpmBin, "--dbpath", db, "--import", filepath.Join(dir, KeyFile))
	rpms := filepath.Join(dir, RepoDir, Arch, "RPMS."+Component)
	find := func(name string) string {
		t.Helper()
		m, _ := filepath.Glob(filepath.Join(rpms, name+"-[0-9]*.rpm"))
		if len(m) != 1 {
			t.Fatalf("%s: %v", name, m)
		}
		return m[0]
	}
	kernel := find("kernel-image-std-def")
	for _, gone := range []string{"glibc-core", "btrfs-progs-6.12", "containerd", "cni-plugins"} {
		if m, _ := filepath.Glob(filepath.Join(rpms, gone+"-[0-9]*.rpm")); len(m) > 0 {
			t.Errorf("the stand-in %v is still there", m)
		}
	}
	libc := find("libc6")
	if out := run(rpmBin, "-qp", "--provides", libc); !strings.Contains(out, "libc.so.6()(64bit)") || !strings.Contains(out, "rtld(GNU_HASH)") {
		t.Errorf("libc6 provides %s", out)
	}
	for _, f := range []string{kernel, find("systemd-boot-efi"), find(InitPackage), libc, find("btrfs-progs")} {
		if out := run(rpmBin, "--dbpath", db, "-K", f); !strings.Contains(out, "digests signatures OK") {
			t.Errorf("%s: rpm -K: %s", filepath.Base(f), out)
		}
	}
	vmlinuz := "/boot/vmlinuz-" + sum.KernelVersion
	var rpmSum string
	for _, l := range strings.Split(run(rpmBin, "--dbpath", db, "-qp", "--dump", kernel), "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[0] == vmlinuz {
			rpmSum = f[3]
		}
	}
	deb := exec.Command("sh", "-c", `dpkg-deb --fsys-tarfile "$0" | tar -xO --occurrence=1 "./boot/vmlinuz-$1"`, b.KernelDeb, sum.KernelVersion)
	var img bytes.Buffer
	deb.Stdout = &img
	if err := deb.Run(); err != nil {
		t.Fatal(err)
	}
	debSum := sha256.Sum256(img.Bytes())
	if rpmSum == "" || rpmSum != hex.EncodeToString(debSum[:]) {
		t.Errorf("%s: the RPM's sha256 %q, the .deb's %x", vmlinuz, rpmSum, debSum)
	}
}
