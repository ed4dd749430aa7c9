package builder

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/klauspost/compress/zstd"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/demobase"
	"github.com/nodeforge/builder/pkgbase/locker"
)

type demoRelease struct {
	spec      *specs.Spec
	lock      *lock.Lock
	lockBytes []byte
	cache     *cache.Cache
}

func newDemo(t *testing.T) *demoRelease {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo")
	if err := demobase.Write(dir); err != nil {
		t.Fatal(err)
	}
	return lockSpec(t, filepath.Join(dir, "spec.yaml"))
}

// lockSpec loads a spec and locks it with a new cache.
func lockSpec(t *testing.T, specPath string) *demoRelease {
	t.Helper()
	s, err := specs.Load(specPath)
	if err != nil {
		t.Fatal(err)
	}
	c := &cache.Cache{Dir: t.TempDir()}
	l, err := locker.Create(context.Background(), s, locker.Options{Cache: c})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := l.Marshal()
	return &demoRelease{spec: s, lock: l, lockBytes: b, cache: c}
}

func (d *demoRelease) build(t *testing.T, out string, shuffle int64) *report.Report {
	t.Helper()
	rep, err := Build(context.Background(), Options{Spec: d.spec, Lock: d.lock, LockBytes: d.lockBytes, Out: out, Cache: d.cache, Version: "test", Shuffle: shuffle})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// buildSchematic builds into a new directory with the schematic (YAML)
// and returns the output directory, the report and the schematic's media
// directory.
func (d *demoRelease) buildSchematic(t *testing.T, schematicYAML string) (out string, rep *report.Report, media string) {
	t.Helper()
	sch, err := schematic.Parse([]byte(schematicYAML))
	if err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(t.TempDir(), "out")
	if rep, err = Build(context.Background(), Options{Spec: d.spec, Lock: d.lock, LockBytes: d.lockBytes, Out: out, Cache: d.cache, Version: "test", Schematic: sch}); err != nil {
		t.Fatal(err)
	}
	id, _ := sch.ID()
	return out, rep, filepath.Join(out, "media", id)
}

// assembled fetches and assembles the demo's x86_64 root filesystem.
func (d *demoRelease) assembled(t *testing.T) *archBuild {
	t.Helper()
	r, err := newRun(Options{Spec: d.spec, Lock: d.lock, LockBytes: d.lockBytes, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.newArchBuild("x86_64")
	if err != nil {
		t.Fatal(err)
	}
	if b.paths, err = fetchArch(context.Background(), Options{Spec: d.spec, Lock: d.lock, Cache: d.cache}, b.locked); err != nil {
		t.Fatal(err)
	}
	if b.as, err = assemble(context.Background(), d.spec, "x86_64", b.locked, b.paths, layInputs{}); err != nil {
		t.Fatal(err)
	}
	b.owners = b.as.accounts.Owners()
	return b
}

func TestBuildDemo(t *testing.T) {
	d := newDemo(t)
	out := filepath.Join(t.TempDir(), "out")
	rep := d.build(t, out, 0)
	for _, f := range []string{"x86_64/vmlinuz", "x86_64/initramfs.xz", "x86_64/rootfs.sqsh", "x86_64/cmdline", "report.json", "oci/index.json", "oci/oci-layout"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing output %s", f)
		}
	}
	ar := rep.Architectures["x86_64"]
	if ar.Kernel == nil || ar.Kernel.Modules < 8 || len(ar.Kernel.BootModules) < 5 {
		t.Fatalf("kernel: %+v", ar.Kernel)
	}
	// depmod output and the module dependencies of the boot set.
	boot := strings.Join(ar.Kernel.BootModules, " ")
	if !strings.Contains(boot, "virtio_ring.ko") || strings.Index(boot, "virtio_ring.ko") > strings.Index(boot, "virtio_blk.ko") {
		t.Errorf("boot modules not in load order: %s", boot)
	}
	// Every file traces to a package or a generator.
	for _, e := range ar.Rootfs {
		if e.Origin.Package == "" && e.Origin.Generator == "" {
			t.Errorf("%s has no origin", e.Path)
		}
	}
	t.Run("unsquashfs lists the reported tree", func(t *testing.T) { checkSquashfs(t, filepath.Join(out, "x86_64", "rootfs.sqsh"), ar.Rootfs) })
	t.Run("cpio lists the sorted initramfs", func(t *testing.T) { checkInitramfs(t, filepath.Join(out, "x86_64", "initramfs.xz"), ar.Initramfs) })

	// A second build, packages laid in another order, is identical.
	out2 := filepath.Join(t.TempDir(), "out")
	d.build(t, out2, 42)
	diffs, err := Compare(out, out2)
	if err != nil {
		t.Fatal(err)
	}
	if len(diffs) != 0 {
		t.Fatalf("builds differ: %+v", diffs)
	}
}

// checkSquashfs compares `unsquashfs -lln` with the report, and the
// extracted files' bytes with the digests the report and RPMs give.
func checkSquashfs(t *testing.T, img string, entries []report.FileEntry) {
	unsq := testutil.NeedTool(t, "unsquashfs")
	out, err := exec.Command(unsq, "-lln", "-d", "", img).CombinedOutput()
	if err != nil {
		t.Fatalf("unsquashfs: %v\n%s", err, out)
	}
	listed := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasPrefix(f[0], "-") && !strings.HasPrefix(f[0], "d") && !strings.HasPrefix(f[0], "l") {
			continue
		}
		p := f[5]
		if p == "" {
			continue
		}
		target := ""
		if len(f) >= 8 && f[6] == "->" {
			target = f[7]
		}
		listed[p] = fmt.Sprintf("%s %s %s %s", f[0], f[1], sizeField(f), target)
	}
	want := map[string]string{}
	for _, e := range entries {
		p := e.Path
		if p == "/" {
			p = "/"
		}
		mode, _ := strconv.ParseUint(e.Mode, 8, 32)
		size := fmt.Sprint(e.Size)
		if e.Type == "symlink" {
			size = fmt.Sprint(len(e.Target))
		}
		want[p] = fmt.Sprintf("%s %d/%d %s %s", modeString(e.Type, uint32(mode)), e.UID, e.GID, size, e.Target)
	}
	for p, w := range want {
		if p == "/" {
			continue
		}
		g, ok := listed[p]
		if !ok {
			t.Errorf("%s: in the report, not in the image", p)
			continue
		}
		if strings.HasPrefix(w, "d") {
			// Directory sizes are squashfs's own.
			g, w = strings.Join(strings.Fields(g)[:2], " "), strings.Join(strings.Fields(w)[:2], " ")
		}
		if g != w {
			t.Errorf("%s: image %q, report %q", p, g, w)
		}
	}
	for p := range listed {
		if _, ok := want[p]; !ok && p != "/" {
			t.Errorf("%s: in the image, not in the report", p)
		}
	}
	// Extracted bytes match the report's digests (which are checked
	// against each RPM's header digest when laid).
	dir := filepath.Join(t.TempDir(), "x")
	if out, err := exec.Command(unsq, "-n", "-d", dir, img).CombinedOutput(); err != nil {
		t.Fatalf("unsquashfs -d: %v\n%s", err, out)
	}
	for _, e := range entries {
		if e.Type != "file" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Path))
		if err != nil {
			t.Errorf("%s: %v", e.Path, err)
			continue
		}
		s := sha256.Sum256(b)
		if hex.EncodeToString(s[:]) != e.SHA256 {
			t.Errorf("%s: extracted bytes differ from the report", e.Path)
		}
		if e.RPMDigest != "" && len(e.RPMDigest) == 64 && e.RPMDigest != e.SHA256 {
			t.Errorf("%s: differs from the RPM header's digest", e.Path)
		}
	}
}

func sizeField(f []string) string { return f[2] }

func modeString(typ string, mode uint32) string {
	b := []byte("----------")
	switch typ {
	case "dir":
		b[0] = 'd'
	case "symlink":
		b[0] = 'l'
	}
	const rwx = "rwxrwxrwx"
	for i := 0; i < 9; i++ {
		if mode&(1<<(8-i)) != 0 {
			b[i+1] = rwx[i]
		}
	}
	if mode&0o4000 != 0 {
		b[3] = map[bool]byte{true: 's', false: 'S'}[mode&0o100 != 0]
	}
	if mode&0o2000 != 0 {
		b[6] = map[bool]byte{true: 's', false: 'S'}[mode&0o010 != 0]
	}
	if mode&0o1000 != 0 {
		b[9] = map[bool]byte{true: 't', false: 'T'}[mode&0o001 != 0]
	}
	return string(b)
}

func checkInitramfs(t *testing.T, path string, entries []report.FileEntry) {
	cpio := testutil.NeedTool(t, "cpio")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := zr.DecodeAll(raw, nil)
	if err != nil {
		t.Fatalf("initramfs is not zstd: %v", err)
	}
	cmd := exec.Command(cpio, "-itv", "--numeric-uid-gid", "--quiet")
	cmd.Stdin = bytes.NewReader(plain)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cpio -itv: %v\n%s", err, out)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[2] != "0" || f[3] != "0" {
			t.Errorf("entry not owned by 0:0: %q", line)
		}
		names = append(names, f[len(f)-1])
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("initramfs entries are not sorted: %v", names)
	}
	if len(names) != len(entries) {
		t.Errorf("initramfs: %v; report: %d entries", names, len(entries))
	}
	for _, want := range []string{"init", "rootfs.sqsh", "dev/console"} {
		found := false
		for _, n := range names {
			found = found || n == want
		}
		if !found {
			t.Errorf("%s is not in the initramfs", want)
		}
	}
	if !regexp.MustCompile(`(?m)^crw------- +1 0 +0 +5, +1 .* dev/console$`).Match(out) {
		t.Errorf("dev/console is not the console device:\n%s", out)
	}
}

func TestBuildFailureLeavesNothing(t *testing.T) {
	d := newDemo(t)
	out := filepath.Join(t.TempDir(), "out")
	// Corrupt a cached package: the build must refuse it and write nothing.
	var victim string
	filepath.WalkDir(d.cache.Dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() && victim == "" {
			victim = p
		}
		return nil
	})
	os.RemoveAll(d.cache.Dir)
	pkg := d.lock.Architectures["x86_64"].Packages[0]
	os.MkdirAll(filepath.Join(d.cache.Dir, "sha256"), 0o755)
	os.WriteFile(filepath.Join(d.cache.Dir, "sha256", pkg.SHA256), []byte("not the package"), 0o644)
	// The cache re-downloads a file of the wrong size; tamper with the
	// source instead so the download itself fails verification.
	src := filepath.Join(d.spec.Dir, pkg.URL, pkg.Location)
	b, _ := os.ReadFile(src)
	b[len(b)-5] ^= 1
	os.WriteFile(src, b, 0o644)
	os.Remove(filepath.Join(d.cache.Dir, "sha256", pkg.SHA256))
	_, err := Build(context.Background(), Options{Spec: d.spec, Lock: d.lock, LockBytes: d.lockBytes, Out: out, Cache: d.cache})
	if err == nil || !strings.Contains(err.Error(), pkg.NEVRA) {
		t.Fatalf("want an error naming %s, got %v", pkg.NEVRA, err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed build left an output directory")
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".out.build-*"))
	if len(left) != 0 {
		t.Errorf("work directories left: %v", left)
	}
	_ = json.Marshal
}

func TestBuildRefusesStaleLock(t *testing.T) {
	d := newDemo(t)
	s2 := *d.spec
	s2.Raw = append([]byte("# edited\n"), s2.Raw...)
	_, err := Build(context.Background(), Options{Spec: &s2, Lock: d.lock, LockBytes: d.lockBytes, Out: t.TempDir(), Cache: d.cache})
	if err == nil || !strings.Contains(err.Error(), "spec changed since the lock") {
		t.Fatalf("stale lock accepted: %v", err)
	}
}

// TestSchematicRefusedEarly: what no media build of the schematic could
// make is refused before any work (nothing written, not even the output's
// parent), naming the option; the lock here has nothing a build could
// fetch, so a later check would fail otherwise.
func TestSchematicRefusedEarly(t *testing.T) {
	s := &specs.Spec{Name: "t", Version: "1", Raw: []byte("a spec")}
	l := &lock.Lock{Spec: lock.SpecRef{Name: "t", Version: "1", SHA256: digest.SHA256Hex(s.Raw)},
		Architectures: map[string]*lock.Arch{"x86_64": {Packages: []lock.Package{{NEVRA: "missing-1-1.x86_64"}}}}}
	sch := func(args []string, exts ...string) *schematic.Schematic {
		var c schematic.Schematic
		c.Customization.ExtraKernelArgs = args
		c.Customization.SystemExtensions.OfficialExtensions = exts
		return &c
	}
	for _, c := range []struct {
		name     string
		sch      *schematic.Schematic
		platform string
		says     string
	}{
		{"a line break in extraKernelArgs", sch([]string{"a\nb"}), "", `customization.extraKernelArgs: "a\nb" holds a control character`},
		{"an unknown platform", sch(nil), "mars", `unknown platform "mars"`},
		{"an extension of another namespace", sch(nil, "example.org/zfs"), "", `extension "example.org/zfs" is not in the namespace`},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "parent", "out")
			_, err := Build(context.Background(), Options{Spec: s, Lock: l, Out: out, Cache: &cache.Cache{Dir: t.TempDir()}, Schematic: c.sch, Platform: c.platform})
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("got %v, want an error saying %s", err, c.says)
			}
			if _, err := os.Stat(filepath.Dir(out)); err == nil {
				t.Error("the refused build wrote beside its output")
			}
		})
	}
}

func TestCompareNamesTheDifference(t *testing.T) {
	d := newDemo(t)
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	d.build(t, a, 0)
	d.build(t, b, 0)
	// Change one file's entry in b's report and the image bytes.
	rp := filepath.Join(b, "report.json")
	raw, _ := os.ReadFile(rp)
	var rep report.Report
	json.Unmarshal(raw, &rep)
	for i, e := range rep.Architectures["x86_64"].Rootfs {
		if e.Path == "/etc/os-release" {
			rep.Architectures["x86_64"].Rootfs[i].SHA256 = "00"
		}
	}
	nb, _ := json.Marshal(rep)
	os.WriteFile(rp, nb, 0o644)
	sq := filepath.Join(b, "x86_64", "rootfs.sqsh")
	img, _ := os.ReadFile(sq)
	img[len(img)/2] ^= 1
	os.WriteFile(sq, img, 0o644)
	diffs, err := Compare(a, b)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, df := range diffs {
		if df.Artifact == "x86_64/rootfs.sqsh" && len(df.Inside) == 1 && df.Inside[0] == "/etc/os-release" {
			found = true
		}
	}
	if !found {
		t.Errorf("diffs: %+v", diffs)
	}
}

// TestBuildDemoTar2sqfs builds with the other squashfs writer: the image
// must list and extract as the report says.
func TestBuildDemoTar2sqfs(t *testing.T) {
	testutil.NeedTool(t, "tar2sqfs")
	d := newDemo(t)
	d.spec.Image.SquashfsWriter = "tar2sqfs"
	out := filepath.Join(t.TempDir(), "out")
	rep := d.build(t, out, 0)
	if !strings.Contains(rep.Tools["squashfs"], "tar2sqfs") {
		t.Errorf("report names %q as the squashfs tool", rep.Tools["squashfs"])
	}
	checkSquashfs(t, filepath.Join(out, "x86_64", "rootfs.sqsh"), rep.Architectures["x86_64"].Rootfs)
}

// TestBuildFromStepCaches: a rebuild takes laid packages and compressed
// blocks from the caches and gives the same bytes, in every output, as the
// first build and as a build with empty caches.
func TestBuildFromStepCaches(t *testing.T) {
	d := newDemo(t)
	first := filepath.Join(t.TempDir(), "out")
	rep := d.build(t, first, 0)
	if !strings.Contains(rep.Tools["squashfs"], "rootfs/sqfs") {
		t.Errorf("report names %q as the squashfs tool", rep.Tools["squashfs"])
	}
	for _, sub := range []string{"squashfs-packs", "laid"} {
		if ents, _ := os.ReadDir(filepath.Join(d.cache.Dir, sub)); len(ents) == 0 {
			t.Errorf("nothing cached in %s", sub)
		}
	}
	again := filepath.Join(t.TempDir(), "out")
	d.build(t, again, 3)
	sameTree(t, first, again)

	// Empty step caches (the downloads stay): the same bytes again.
	for _, sub := range []string{"squashfs-packs", "laid"} {
		os.RemoveAll(filepath.Join(d.cache.Dir, sub))
	}
	fresh := filepath.Join(t.TempDir(), "out")
	d.build(t, fresh, 5)
	sameTree(t, first, fresh)
}

// sameTree compares every file under two output directories.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	n := 0
	filepath.Walk(a, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		x, _ := os.ReadFile(p)
		y, err := os.ReadFile(filepath.Join(b, rel))
		if err != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between builds (%v)", rel, err)
		}
		n++
		return nil
	})
	if n < 8 {
		t.Errorf("only %d files compared", n)
	}
}

// TestBuildDemoExtensions: every extension of the demo release is built,
// relocated into the allowed paths and valid; module extensions carry the
// locked kernel's version.
func TestBuildDemoExtensions(t *testing.T) {
	d := newDemo(t)
	out := filepath.Join(t.TempDir(), "out")
	rep := d.build(t, out, 0)
	if len(rep.Extensions) != 4 {
		t.Fatalf("extensions: %v", rep.Extensions)
	}
	for name := range rep.Extensions {
		rs, err := extensions.ValidatePath(filepath.Join(out, "extensions", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if len(r.Violations) > 0 {
				t.Errorf("%s: %v", name, r.Violations)
			}
		}
	}
	ext := rep.Architectures["x86_64"].Extensions
	kver := rep.Architectures["x86_64"].Kernel.Version
	zfs := ext["zfs"]
	if zfs == nil || !zfs.Modules || !strings.HasSuffix(zfs.Version, "-6.12.40") {
		t.Fatalf("zfs: %+v", zfs)
	}
	paths := map[string]bool{}
	for _, f := range zfs.Files {
		paths[f.Path] = true
	}
	for _, p := range []string{"/usr/lib/modules/" + kver + "/misc/zfs.ko", "/usr/local/sbin/zpool", "/usr/local/lib64/libzfs.so.4"} {
		if !paths[p] {
			t.Errorf("zfs lacks %s", p)
		}
	}
	if cri := ext["cri"]; cri == nil || len(cri.Excluded) != 1 || !strings.HasPrefix(cri.Excluded[0], "shadow-utils-") {
		t.Errorf("cri: %+v", cri)
	}
}

// TestExtensionForAnotherKernel: a module package built for another kernel
// than the locked one is refused, naming both.
func TestExtensionForAnotherKernel(t *testing.T) {
	d := newDemo(t)
	b := d.assembled(t)
	locked := b.as.kernel.Version
	b.as.kernel.Version = "6.12.30-std-def-alt1"
	b.sde = 0
	_, err := b.buildExtensions()
	if err == nil || !strings.Contains(err.Error(), locked) || !strings.Contains(err.Error(), "6.12.30-std-def-alt1") || !strings.Contains(err.Error(), "kernel-modules-") {
		t.Errorf("got %v", err)
	}
}

// TestExtensionSegment: the initramfs segment for a schematic's extensions
// holds one squashfs per extension in name order, the schematic's layer, a
// module-index layer when an extension ships modules, and extensions.yaml
// listing them; real
// cpio and unsquashfs read it.
func TestExtensionSegment(t *testing.T) {
	cpioTool := testutil.NeedTool(t, "cpio")
	unsq := testutil.NeedTool(t, "unsquashfs")
	d := newDemo(t)
	b := d.assembled(t)
	as, owners := b.as, b.owners
	b.sde = 1700000000
	exts, err := b.buildExtensions()
	if err != nil {
		t.Fatal(err)
	}
	b.exts, b.owners = exts, owners
	b.opts.Schematic = &schematic.Schematic{}
	b.opts.Schematic.Customization.SystemExtensions.OfficialExtensions = []string{"zfs", "cri"}
	b.opts.Squashfs = rootfs.SquashfsOptions{Compressor: "zstd", Level: 13}
	b.spec.Image.InitramfsCompression = "zstd"
	boot, cexts, o := b.composeInputs(nil, nil, t.TempDir())
	res, err := compose.Media(context.Background(), boot, cexts, o)
	if err != nil {
		t.Fatal(err)
	}
	seg, entries := res.Initramfs, res.Segment
	if len(entries) != 5 {
		t.Fatalf("entries: %d", len(entries))
	}
	dec, _ := zstd.NewReader(nil)
	raw, err := dec.DecodeAll(seg, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(cpioTool, "-idm", "--quiet")
	cmd.Dir, cmd.Stdin = dir, bytes.NewReader(raw)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio: %v\n%s", err, out)
	}
	y, _ := os.ReadFile(filepath.Join(dir, "extensions.yaml"))
	for _, want := range []string{"image: 0.sqsh\n    metadata:\n      name: cri", "image: 1.sqsh\n    metadata:\n      name: zfs",
		"image: 2.sqsh\n    metadata:\n      name: schematic", "image: 3.sqsh\n    metadata:\n      name: modules.dep"} {
		if !strings.Contains(string(y), want) {
			t.Errorf("extensions.yaml lacks %q:\n%s", want, y)
		}
	}
	list := func(img string) string {
		out, err := exec.Command(unsq, "-lls", "-n", filepath.Join(dir, img)).CombinedOutput()
		if err != nil {
			t.Fatalf("unsquashfs %s: %v\n%s", img, err, out)
		}
		return string(out)
	}
	if l := list("0.sqsh"); !strings.Contains(l, "squashfs-root/usr/local/sbin/runc") || !strings.Contains(l, "squashfs-root/etc/cri/conf.d/20-nodeforge-cri.part") {
		t.Errorf("cri layer:\n%s", l)
	}
	kver := as.kernel.Version
	if l := list("1.sqsh"); !strings.Contains(l, "squashfs-root/usr/lib/modules/"+kver+"/misc/zfs.ko") {
		t.Errorf("zfs layer:\n%s", l)
	}
	x := t.TempDir()
	if out, err := exec.Command(unsq, "-d", x+"/m", filepath.Join(dir, "3.sqsh")).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	dep, _ := os.ReadFile(filepath.Join(x, "m/usr/lib/modules", kver, "modules.dep"))
	if !strings.Contains(string(dep), "misc/zfs.ko:") || !strings.Contains(string(dep), "kernel/") {
		t.Errorf("modules.dep of the modules layer:\n%s", dep)
	}
}

// TestBuildDemoInstaller: the installer image holds the kernel, the
// initramfs, the SBOM and the base's installer binary; its config's
// creation time is the source date, so its digest is the same on every
// build (TestBuildFromStepCaches compares every file of the layout).
func TestBuildDemoInstaller(t *testing.T) {
	d := newDemo(t)
	out := filepath.Join(t.TempDir(), "out")
	rep := d.build(t, out, 0)
	idx, err := layout.ImageIndexFromPath(filepath.Join(out, "installer"))
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := idx.Digest(); h.String() != rep.Installer {
		t.Errorf("installer digest %s, report says %s", h, rep.Installer)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 || im.Manifests[0].Platform.Architecture != "amd64" {
		t.Fatalf("index: %+v %v", im, err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Created.Unix() != rep.SourceDateEpoch || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/usr/bin/installer" {
		t.Errorf("config: created %v, entrypoint %v", cf.Created, cf.Config.Entrypoint)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	got := map[string]int64{}
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		got[strings.TrimPrefix(h.Name, "./")] = h.Size
	}
	// Talos's layout: the installer, then its boot assets under Go's
	// architecture name (the demo base has no systemd-stub: no UKI).
	initramfs, _ := os.ReadFile(filepath.Join(out, "x86_64", "initramfs.xz"))
	if got["usr/install/amd64/initramfs.xz"] != int64(len(initramfs)) {
		t.Errorf("installer initramfs: %d bytes, the build's is %d", got["usr/install/amd64/initramfs.xz"], len(initramfs))
	}
	for _, p := range []string{"usr/install/amd64/vmlinuz", "usr/install/amd64/demo.spdx.json", "usr/install/amd64/systemd-boot.efi", "usr/bin/installer"} {
		if got[p] == 0 {
			t.Errorf("installer lacks %s (has %v)", p, got)
		}
	}
	if layers, _ := img.Layers(); len(layers) != 2 {
		t.Errorf("%d layers, want the installer's and the boot assets'", len(layers))
	} else if lr, err := layers[0].Uncompressed(); err == nil {
		var first []string
		for tr := tar.NewReader(lr); ; {
			h, err := tr.Next()
			if err != nil {
				break
			}
			if h.Typeflag == tar.TypeReg {
				first = append(first, strings.TrimPrefix(h.Name, "./"))
			}
		}
		lr.Close()
		if len(first) != 1 || first[0] != "usr/bin/installer" {
			t.Errorf("the first layer holds %v, want the installer alone", first)
		}
	}
	for _, f := range []string{"sbom.spdx.json", "sbom.cdx.json"} {
		sb, _ := os.ReadFile(filepath.Join(out, "x86_64", f))
		if !strings.Contains(string(sb), "pkg:rpm/altlinux/glibc-core@") {
			t.Errorf("%s lacks glibc-core:\n%.500s", f, sb)
		}
	}
}

// A build with nothing changed returns the report of the output in place,
// after hashing it; a change to a file of the output or to an input builds
// again, a file added is refused.
func TestBuildUpToDate(t *testing.T) {
	d := newDemo(t)
	out := filepath.Join(t.TempDir(), "out")
	var logged []string
	try := func(builderSHA string) (*report.Report, error) {
		logged = nil
		return Build(context.Background(), Options{Spec: d.spec, Lock: d.lock, LockBytes: d.lockBytes, Out: out, Cache: d.cache,
			Version: "test", BuilderSHA256: builderSHA, Log: func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }})
	}
	build := func(builderSHA string) *report.Report {
		t.Helper()
		rep, err := try(builderSHA)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	upToDate := func() bool {
		return slices.ContainsFunc(logged, func(l string) bool { return strings.Contains(l, "is up to date") })
	}
	first := build("b1")
	want := treeHash(t, out)
	firstJSON, _ := json.Marshal(first)

	again := build("b1")
	if !upToDate() {
		t.Fatalf("nothing changed, yet the build ran: %q", logged)
	}
	if b, _ := json.Marshal(again); !bytes.Equal(b, firstJSON) {
		t.Error("the report of an up-to-date build differs from the build's")
	}
	// Damage to the output: the build runs and puts it right.
	sq := filepath.Join(out, "x86_64", "rootfs.sqsh")
	b, _ := os.ReadFile(sq)
	b[len(b)/2] ^= 1
	os.WriteFile(sq, b, 0o644)
	build("b1")
	if upToDate() || treeHash(t, out) != want {
		t.Error("a damaged output was taken as up to date")
	}
	// Another builder: the build runs.
	build("b2")
	if upToDate() {
		t.Error("another builder's binary took the earlier build as its own")
	}
	// A file added is not the build's: neither up to date nor replaced.
	extra := filepath.Join(out, "oci", "extra")
	os.WriteFile(extra, nil, 0o644)
	if _, err := try("b2"); err == nil || !strings.Contains(err.Error(), `"oci/extra"`) || upToDate() {
		t.Errorf("an output with a file added: %v, want a refusal naming it", err)
	}
	if _, err := os.Stat(extra); err != nil {
		t.Error(err)
	}
	os.Remove(extra)
	// Without the builder's digest there is no shortcut.
	build("")
	if upToDate() {
		t.Error("a build without the builder's digest was skipped")
	}
}

// treeHash digests every path, mode and content under dir.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	entries, err := describeOutput(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(entries)
	return digest.SHA256Hex(b)
}

// TestOpenOutputs: the outputs handed to publishing are the build's, and a
// report that names other images (the directory was built again since) is
// refused.
func TestOpenOutputs(t *testing.T) {
	d := newDemo(t)
	out := filepath.Join(t.TempDir(), "out")
	rep := d.build(t, out, 0)
	o, err := OpenOutputs(out, rep)
	if err != nil {
		t.Fatal(err)
	}
	if dg, _ := o.Installer.Digest(); dg.String() != rep.Installer || len(o.Extensions) != len(rep.Extensions) || len(o.ReportJSON) == 0 {
		t.Errorf("outputs %v %d %d do not match the report", dg, len(o.Extensions), len(o.ReportJSON))
	}
	other := *rep
	other.OCIIndex = "sha256:" + strings.Repeat("0", 64)
	if _, err := OpenOutputs(out, &other); err == nil || !strings.Contains(err.Error(), "built again") {
		t.Errorf("a report of another build: %v", err)
	}
}

// TestExtensionLayerRoundTrip: an extension read back from its image
// layer (as the Image Factory reads a release) writes the same squashfs
// as the tree the build made it from.
func TestExtensionLayerRoundTrip(t *testing.T) {
	d := newDemo(t)
	b := d.assembled(t)
	b.sde = 1700000000
	exts, err := b.buildExtensions()
	if err != nil {
		t.Fatal(err)
	}
	sq := rootfs.SquashfsOptions{Compressor: "zstd", Level: 13}
	for _, eb := range exts {
		e, err := compose.ExtensionFromLayer(bytes.NewReader(eb.layer))
		if err != nil {
			t.Fatalf("%s: %v", eb.name, err)
		}
		if e.Name != eb.name || e.Modules != eb.report.Modules || e.Metadata != eb.metadata {
			t.Errorf("%s: read back as %s, modules %t, %+v", eb.name, e.Name, e.Modules, e.Metadata)
		}
		var want, got bytes.Buffer
		if err := eb.tree.WriteSquashfsTo(&want, b.owners, b.sde, sq, nil); err != nil {
			t.Fatal(err)
		}
		if err := e.Tree.WriteSquashfsTo(&got, rootfs.NumericOwners(e.Tree), b.sde, sq, nil); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want.Bytes(), got.Bytes()) {
			wn, gn := map[string]string{}, map[string]string{}
			for _, n := range eb.tree.Nodes() {
				uid, gid, _ := b.owners.IDs(n)
				wn[n.Path] = fmt.Sprintf("%v %o %d:%d %s %s %v %q", n.Kind, n.Mode, uid, gid, n.Digest, n.Target, n.Xattrs, n.LinkGroup)
			}
			o := rootfs.NumericOwners(e.Tree)
			for _, n := range e.Tree.Nodes() {
				uid, gid, _ := o.IDs(n)
				gn[n.Path] = fmt.Sprintf("%v %o %d:%d %s %s %v %q", n.Kind, n.Mode, uid, gid, n.Digest, n.Target, n.Xattrs, n.LinkGroup)
			}
			for p, w := range wn {
				if gn[p] != w {
					t.Errorf("%s %s: built %s, read back %s", eb.name, p, w, gn[p])
				}
			}
			for p, g := range gn {
				if _, ok := wn[p]; !ok {
					t.Errorf("%s %s: only read back: %s", eb.name, p, g)
				}
			}
		}
	}
}
