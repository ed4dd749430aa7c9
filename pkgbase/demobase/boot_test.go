package demobase

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
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
	dir := t.TempDir()
	sum, err := WriteBootable(dir, b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sum.KernelVersion, "6.1.0-") || sum.Packages < 30 {
		t.Errorf("summary %+v", sum)
	}

	s, err := specs.Load(filepath.Join(dir, SpecFile))
	if err != nil {
		t.Fatal(err)
	}
	if s.Image.Init.Package != InitPackage || s.Image.Init.Path != InitPath || !strings.Contains(strings.Join(s.Image.Cmdline, " "), "console=ttyS0") {
		t.Errorf("image section: %+v", s.Image)
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
	for _, f := range []string{kernel, find("systemd-boot-efi"), find(InitPackage)} {
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
