// Package testbase builds the package base of the end-to-end boot test
// from real Debian packages: Debian's linux-image-*-amd64 kernel and part
// of its modules wrapped into an RPM with Debian's rpmbuild, a tiny static
// init written in Go (cmd/nodeforge-init), a filesystem package, an rpm-md
// repository over them (createrepo_c), and a release spec whose image
// section boots that init. builder lock and builder build then make a node
// OS that qemu boots.
//
// Built repositories are cached under CacheDir/testbase-<key>/, the key
// being a digest of the kernel .deb's name and size, the init binary, this
// package's source and the options that shape the RPMs; an entry is built
// in a temporary directory and renamed into place, so a half-built one is
// never used. The spec is written for each call from its options.
package testbase

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/nodeforge/builder/api/target"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/pkgbase/debpkg"
)

// Names in the base.
const (
	// KernelPackage is the RPM wrapping the Debian kernel (ALT's name).
	KernelPackage = "kernel-image-std-def"
	// InitPackage ships the test init at InitPath.
	InitPackage = "nodeforge-testinit"
	InitPath    = "/usr/libexec/nodeforge/init"
	// FilesystemPackage is the root's directory skeleton.
	FilesystemPackage = "filesystem"
	// ExtPackage is the test extension's package; its file in ExtCheckDir
	// holds ExtCheckContent, which the init prints once the extension
	// layer is stacked.
	ExtPackage      = "nodeforge-testext"
	ExtCheckDir     = "/usr/local/share/nodeforge-boot-check"
	ExtCheckContent = "hello from the testext extension"
	// BootPackage wraps Debian's systemd-boot-efi: the EFI boot manager of
	// the boot media, at BootPath ({efiarch}: x64, aa64).
	BootPackage = "systemd-boot-efi"
	BootPath    = "/usr/lib/systemd/boot/efi/systemd-boot{efiarch}.efi"
	// SpecFile is the release spec's name in the base directory.
	SpecFile = "spec.yaml"
	// InfoFile describes the base (see Info).
	InfoFile = "testbase.json"
	// RepoDir is the rpm-md repository, relative to the spec.
	RepoDir = "repo"
)

// DebianKernelPackage is what Build downloads when no kernel .deb is
// cached; the kernel package's tests (kernel/debian_test.go) and .ci/run
// fetch the same one into DefaultCacheDir.
const DebianKernelPackage = "linux-image-6.1.0-57-amd64"

// DefaultCacheDir holds kernel .debs and finished bases between runs.
const DefaultCacheDir = "/var/cache/nodeforge"

// DefaultModuleTrees are the parts of lib/modules/<kver>/ the kernel RPM
// carries: what a boot needs (squashfs, overlay, loop, virtio) and some
// bulk so the image is not a toy, without the whole 320 MB.
var DefaultModuleTrees = []string{
	"kernel/fs",
	"kernel/drivers/block",
	"kernel/drivers/virtio",
	"kernel/drivers/scsi",
	"kernel/lib",
	"kernel/crypto",
	// Kept from the package; the builder writes every index (modules.dep,
	// modules.alias, ...) itself.
	"modules.builtin",
	"modules.builtin.modinfo",
	"modules.order",
}

// DefaultBootModules are the spec's boot-modules (minus any the kernel has
// built in).
var DefaultBootModules = []string{"loop", "squashfs", "overlay", "virtio_pci", "virtio_blk"}

// DefaultCmdline is the spec's kernel command line: the serial console,
// reboot at once on panic (qemu -no-reboot then exits), and signed modules
// only, which also proves the RPM wrapping left the modules' bytes alone.
var DefaultCmdline = []string{"console=ttyS0", "panic=-1", "quiet", "consoleblank=0", "module.sig_enforce=1"}

// ErrNoKernel is wrapped by Build's error when no kernel .deb is cached and
// none can be downloaded: tests skip on a workstation, fail in CI.
var ErrNoKernel = errors.New("no Debian kernel package")

// Options of Build. The zero value is the boot test's base.
type Options struct {
	inputs    []archInput // per architecture, what Build found
	extDebs   []string    // with Extensions: the packages Build found
	imageDebs []string    // with Images: the packages Build found
	// Arches are the architectures of the base (default x86_64 alone):
	// a kernel, an init and systemd-boot for each, from Debian's
	// packages of that architecture (scripts/fetch-test-kernel.sh caches
	// the arm64 ones for aarch64).
	Arches []string
	// KernelDeb is the Debian x86_64 kernel package to wrap. Default:
	// $NODEFORGE_TEST_KERNEL_DEB, else the newest
	// CacheDir/linux-image-6.1.0-*-amd64_*.deb (not cloud or rt), else
	// DebianKernelPackage downloaded there with apt-get download.
	KernelDeb string
	// CacheDir holds kernel .debs and finished bases (default
	// DefaultCacheDir). When it cannot be written, Build builds without
	// caching.
	CacheDir string
	// NoCache builds into dir without reading or writing a cached base.
	NoCache bool
	// ModuleTrees of lib/modules/<kver>/ to package (default
	// DefaultModuleTrees).
	ModuleTrees []string
	// BootModules, Cmdline and InitramfsCompression (zstd or xz, default
	// zstd) go into the spec's image section.
	BootModules          []string
	Cmdline              []string
	InitramfsCompression string
	// Payload is rpmbuild's _binary_payload (default w19.zstdio).
	Payload string
	// Extensions adds the cri and btrfs extensions made from Debian's
	// containerd, runc, containernetworking-plugins and btrfs-progs
	// (CacheDir/ExtDebDir; with aarch64 among Arches, their arm64 builds
	// from CacheDir/ExtDebDir-arm64 too), the libraries they load in the
	// root, and the container image HelloImage beside the spec (an image
	// index of every architecture's when there are several).
	Extensions bool
	// Images adds Debian's XorrisoDebs and ImageDebs (CacheDir/ImageDebDir;
	// x86_64 only), wrapped with the shared-library provides and requires
	// rpm's elfdeps writes: the packages of the container images' test.
	Images bool
	// Log receives progress lines.
	Log func(format string, args ...any)
}

func (o Options) withDefaults() Options {
	if o.Arches == nil {
		o.Arches = []string{"x86_64"}
	}
	if o.CacheDir == "" {
		o.CacheDir = DefaultCacheDir
	}
	if o.ModuleTrees == nil {
		o.ModuleTrees = DefaultModuleTrees
	}
	if o.BootModules == nil {
		o.BootModules = DefaultBootModules
	}
	if o.Cmdline == nil {
		o.Cmdline = DefaultCmdline
	}
	if o.InitramfsCompression == "" {
		o.InitramfsCompression = "zstd"
	}
	if o.Payload == "" {
		o.Payload = "w19.zstdio"
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	return o
}

// Info describes a built base (InfoFile beside the spec): its first
// architecture's kernel at the top, every architecture's in Kernels.
type Info struct {
	Key string `json:"key"`
	KernelInfo
	Kernels    map[string]KernelInfo `json:"kernels"` // by architecture
	InitSHA256 string                `json:"initSHA256"`
	// Fingerprint is the key that signs the packages and repomd.xml
	// (its public half at KeyFile).
	Fingerprint string           `json:"fingerprint"`
	PrettyName  string           `json:"prettyName"`
	RPMs        map[string]int64 `json:"rpms"` // file name -> size
	// BuildSeconds is the only field (and testbase.json the only file)
	// that differs between two builds of the same key.
	BuildSeconds float64 `json:"buildSeconds"`
}

// KernelInfo describes the kernel of one architecture.
type KernelInfo struct {
	KernelDeb     string   `json:"kernelDeb"` // base name
	DebPackage    string   `json:"debPackage"`
	DebVersion    string   `json:"debVersion"`
	DebSize       int64    `json:"debSize"`
	KernelVersion string   `json:"kernelVersion"` // the modules directory, e.g. 6.1.0-57-amd64
	Modules       []string `json:"modules"`       // names of the modules in the kernel RPM
	Builtin       []string `json:"builtin"`       // names in the kernel's modules.builtin
}

// archInput is what a base is built from for one architecture.
type archInput struct {
	arch                target.Arch
	kernelDeb, bootDeb  string
	initBin             string
	kernelSize, initSum string
}

// ReadInfo reads the Info beside a spec Build returned.
func ReadInfo(specPath string) (*Info, error) {
	b, err := os.ReadFile(filepath.Join(filepath.Dir(specPath), InfoFile))
	if err != nil {
		return nil, err
	}
	var in Info
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// Build makes the test package base in dir (created if missing; files of
// the same names are replaced) and returns the path of its release spec.
// Tools: dpkg-deb, rpmbuild, createrepo_c and go (apt-get to download the
// kernel when it is not cached).
func Build(dir string, opts Options) (string, error) {
	opts = opts.withDefaults()
	stage, err := os.MkdirTemp("", "nodeforge-testbase-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(stage)
	for _, name := range opts.Arches {
		in, err := findInputs(name, stage, opts)
		if err != nil {
			return "", err
		}
		opts.inputs = append(opts.inputs, in)
	}
	if opts.Extensions {
		if opts.extDebs, err = findExtDebs(opts); err != nil {
			return "", err
		}
	}
	if opts.Images {
		if len(opts.Arches) != 1 || opts.Arches[0] != "x86_64" {
			return "", fmt.Errorf("testbase: the images' packages are x86_64 alone, not %v", opts.Arches)
		}
		if opts.imageDebs, err = findImageDebs(opts); err != nil {
			return "", err
		}
	}
	key := cacheKey(opts)

	if !opts.NoCache {
		entry := filepath.Join(opts.CacheDir, "testbase-"+key)
		if _, err := os.Stat(filepath.Join(entry, InfoFile)); err == nil {
			opts.Log("testbase: using the cached base %s", entry)
			now := time.Now()
			os.Chtimes(entry, now, now)
			return finish(entry, dir, opts)
		}
		os.MkdirAll(opts.CacheDir, 0o755)
		// One build of a base at a time: tests in several packages (make
		// test runs cmd/builder beside the rest) wait for the first
		// instead of building the same base again.
		unlock := lockKey(opts.CacheDir, key)
		defer unlock()
		if _, err := os.Stat(filepath.Join(entry, InfoFile)); err == nil {
			opts.Log("testbase: using the base %s another run built meanwhile", entry)
			return finish(entry, dir, opts)
		}
		work, err := os.MkdirTemp(opts.CacheDir, ".testbase-"+key+".tmp-")
		if err == nil {
			err = write(work, key, opts)
			if err == nil {
				os.Chmod(work, 0o755)
				if err = os.Rename(work, entry); err != nil {
					if _, serr := os.Stat(filepath.Join(entry, InfoFile)); serr == nil {
						err = nil // another run finished the same base first
					}
				}
			}
			os.RemoveAll(work)
			if err != nil {
				return "", err
			}
			prune(opts.CacheDir, entry, opts.Log)
			return finish(entry, dir, opts)
		}
		opts.Log("testbase: not caching (%v)", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := write(dir, key, opts); err != nil {
		return "", err
	}
	return finish(dir, dir, opts)
}

// lockKey takes an exclusive lock on the base of key in the cache
// directory and returns its release; where the lock cannot be taken it
// goes without (the rename keeps the cache whole either way).
func lockKey(cacheDir, key string) func() {
	f, err := os.OpenFile(filepath.Join(cacheDir, ".testbase-"+key+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return func() {}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return func() {}
	}
	return func() { f.Close() }
}

// finish copies a built base from src into dir (unless they are the same)
// and writes its release spec there.
func finish(src, dir string, opts Options) (string, error) {
	if src != dir {
		if err := copyBase(src, dir); err != nil {
			return "", err
		}
	}
	info, err := ReadInfo(filepath.Join(dir, SpecFile))
	if err != nil {
		return "", err
	}
	spec, err := specYAML(info, opts)
	if err != nil {
		return "", err
	}
	if err := writeExtensionDef(dir, opts); err != nil {
		return "", err
	}
	p := filepath.Join(dir, SpecFile)
	return p, os.WriteFile(p, spec, 0o644)
}

// findInputs finds the Debian packages of an architecture and builds its
// init.
func findInputs(name, stage string, opts Options) (archInput, error) {
	a, err := target.Lookup(name)
	if err != nil {
		return archInput{}, err
	}
	in := archInput{arch: a, initBin: filepath.Join(stage, "init-"+a.RPM)}
	if a.RPM == "x86_64" {
		in.kernelDeb, err = findKernelDeb(opts)
	} else if in.kernelDeb = debpkg.NewestKernel(opts.CacheDir, a.OCI); in.kernelDeb == "" {
		err = fmt.Errorf("%w for %s: no linux-image-6.1.0-*-%s_*.deb in %s (scripts/fetch-test-kernel.sh fetches it)", ErrNoKernel, a.RPM, a.OCI, opts.CacheDir)
	}
	if err != nil {
		return archInput{}, err
	}
	if in.bootDeb, err = findBootDeb(opts, a.OCI); err != nil {
		return archInput{}, err
	}
	st, err := os.Stat(in.kernelDeb)
	if err != nil {
		return archInput{}, err
	}
	in.kernelSize = fmt.Sprint(st.Size())
	if err := buildInit(in.initBin, a.OCI); err != nil {
		return archInput{}, err
	}
	initBin, err := os.ReadFile(in.initBin)
	if err != nil {
		return archInput{}, err
	}
	in.initSum = digest.SHA256Hex(initBin)
	return in, nil
}

// findBootDeb finds Debian's systemd-boot-efi package of a Debian
// architecture (amd64, arm64) in the cache directory
// (scripts/fetch-test-kernel.sh puts it there).
func findBootDeb(opts Options, debArch string) (string, error) {
	if p := debpkg.Newest(opts.CacheDir, "systemd-boot-efi_*_"+debArch+".deb"); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("%w: no systemd-boot-efi_*_%s.deb in %s (scripts/fetch-test-kernel.sh fetches it)", ErrNoKernel, debArch, opts.CacheDir)
}

// writeExtensionDef writes dir/extensions/testext.yaml, the definition of
// the base's extension (and, with Options.Extensions, cri's and btrfs's).
func writeExtensionDef(dir string, opts Options) error {
	if err := os.MkdirAll(filepath.Join(dir, "extensions"), 0o755); err != nil {
		return err
	}
	if opts.Extensions {
		if err := writeExtDefs(filepath.Join(dir, "extensions")); err != nil {
			return err
		}
	}
	def := fmt.Sprintf("# The boot test's extension: one file the init prints.\nname: testext\ndescription: boot test extension\nauthor: Nodeforge tests\ncompatibility: \">= v1.8.0\"\npackages: [%s]\n", ExtPackage)
	return os.WriteFile(filepath.Join(dir, "extensions", "testext.yaml"), []byte(def), 0o644)
}

// findKernelDeb finds (or downloads) the Debian kernel package.
func findKernelDeb(opts Options) (string, error) {
	for _, p := range []string{opts.KernelDeb, os.Getenv("NODEFORGE_TEST_KERNEL_DEB")} {
		if p != "" {
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("%w: %v", ErrNoKernel, err)
			}
			return p, nil
		}
	}
	if p := debpkg.NewestKernel(opts.CacheDir, "amd64"); p != "" {
		return p, nil
	}
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return "", fmt.Errorf("%w in %s, and no apt-get to download %s", ErrNoKernel, opts.CacheDir, DebianKernelPackage)
	}
	if err := os.MkdirAll(opts.CacheDir, 0o755); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoKernel, err)
	}
	// Download into a temporary directory and rename: a broken download
	// never looks like a cached package.
	tmp, err := os.MkdirTemp(opts.CacheDir, ".download-")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoKernel, err)
	}
	defer os.RemoveAll(tmp)
	os.Chmod(tmp, 0o755) // apt's sandbox user writes here when not root
	names := []string{DebianKernelPackage}
	if cur := currentKernelPackage(); cur != "" && cur != DebianKernelPackage {
		names = append(names, cur) // when the archive dropped ours
	}
	var msgs []string
	for _, name := range names {
		opts.Log("testbase: apt-get download %s into %s", name, opts.CacheDir)
		cmd := exec.Command(apt, "download", name)
		cmd.Dir = tmp
		out, err := cmd.CombinedOutput()
		if err != nil {
			msgs = append(msgs, fmt.Sprintf("apt-get download %s: %v: %s", name, err, strings.TrimSpace(string(out))))
			continue
		}
		debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
		if len(debs) != 1 {
			msgs = append(msgs, fmt.Sprintf("apt-get download %s left %d .deb files", name, len(debs)))
			continue
		}
		dst := filepath.Join(opts.CacheDir, filepath.Base(debs[0]))
		if err := os.Rename(debs[0], dst); err != nil {
			return "", err
		}
		return dst, nil
	}
	return "", fmt.Errorf("%w in %s: %s", ErrNoKernel, opts.CacheDir, strings.Join(msgs, "; "))
}

// currentKernelPackage asks apt which linux-image-*-amd64 the metapackage
// pulls in today ("" when apt cannot say).
func currentKernelPackage() string {
	out, err := exec.Command("apt-cache", "depends", "linux-image-amd64").Output()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-") && strings.HasSuffix(f[1], "-amd64") {
			return f[1]
		}
	}
	return ""
}

// srcDir is this package's source directory ("" when unknown).
func srcDir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	return filepath.Dir(file)
}

// buildInit builds cmd/nodeforge-init (the node init) as a static binary for linux/goarch.
func buildInit(out, goarch string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("testbase: the go tool builds the test init: %w", err)
	}
	src := filepath.Join(srcDir(), "..", "..", "cmd", "nodeforge-init")
	cmd := exec.Command(gobin, "build", "-o", out, "-trimpath", "-buildvcs=false", "-ldflags=-s -w", ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testbase: go build %s: %v\n%s", src, err, b)
	}
	return nil
}

// cacheKey names a base by everything that shapes it.
func cacheKey(opts Options) string {
	h := sha256.New()
	fmt.Fprintf(h, "testbase 4\n")
	for _, in := range opts.inputs {
		fmt.Fprintf(h, "arch %s\ndeb %s %s\ninit %s\nboot %s\n", in.arch.RPM, filepath.Base(in.kernelDeb), in.kernelSize, in.initSum, filepath.Base(in.bootDeb))
	}
	fmt.Fprintf(h, "trees %q\npayload %s\n", opts.ModuleTrees, opts.Payload)
	for _, d := range append(slices.Clone(opts.extDebs), opts.imageDebs...) {
		st, _ := os.Stat(d)
		var size int64
		if st != nil {
			size = st.Size()
		}
		fmt.Fprintf(h, "extension deb %s %d\n", filepath.Base(d), size)
	}
	// The recipe itself: this package's source.
	srcs, _ := filepath.Glob(filepath.Join(srcDir(), "*.go"))
	sort.Strings(srcs)
	for _, s := range srcs {
		if strings.HasSuffix(s, "_test.go") {
			continue
		}
		if b, err := os.ReadFile(s); err == nil {
			fmt.Fprintf(h, "src %s %x\n", filepath.Base(s), sha256.Sum256(b))
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// prune removes cached bases not used for two weeks.
func prune(cacheDir, keep string, logf func(string, ...any)) {
	old, _ := filepath.Glob(filepath.Join(cacheDir, "testbase-*"))
	locks, _ := filepath.Glob(filepath.Join(cacheDir, ".testbase-*.lock"))
	for _, p := range append(old, locks...) {
		st, err := os.Stat(p)
		if err != nil || p == keep || time.Since(st.ModTime()) < 14*24*time.Hour {
			continue
		}
		logf("testbase: removing the stale base %s", p)
		os.RemoveAll(p)
	}
}

// copyBase copies a finished base into dir.
func copyBase(src, dir string) error {
	return filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		dst := filepath.Join(dir, rel)
		if fi.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		return copyFile(p, dst, fi.Mode().Perm())
	})
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// BootEFI reads an EFI binary of the base's systemd-boot-efi package
// (name: systemd-bootx64.efi, linuxx64.efi.stub): what a Secure Boot test
// signs or builds a UKI on.
func BootEFI(opts Options, name string) ([]byte, error) {
	opts = opts.withDefaults()
	deb, err := findBootDeb(opts, "amd64")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nodeforge-bootefi-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := debpkg.Extract(deb, dir); err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(dir, "usr/lib/systemd/boot/efi", name))
}
