package builder

import (
	"bytes"
	"crypto"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/google/rpmpack"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/pkgbase/cpio"
	"github.com/nodeforge/builder/pkgbase/demobase"
	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/pkgbase/rpmfile"
	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// kernelTree is a laid tree with the given files (path -> content; a path
// ending in "/" is a directory), each from its package.
func kernelTree(t *testing.T, files map[string]map[string]string) *rootfs.Tree {
	t.Helper()
	tr := rootfs.New()
	for pkg, fs := range files {
		for p, data := range fs {
			n := &rootfs.Node{Path: strings.TrimSuffix(p, "/"), Kind: rootfs.KindFile, Mode: 0o644, User: "root", Group: "root",
				Data: []byte(data), Digest: digest.SHA256Hex([]byte(data)), Origin: report.Origin{Package: pkg}}
			if strings.HasSuffix(p, "/") {
				n.Kind, n.Mode, n.Data, n.Digest = rootfs.KindDir, 0o755, nil, ""
			}
			if err := tr.Add(n); err != nil {
				t.Fatal(err)
			}
		}
	}
	return tr
}

// kernelSpec is a spec whose kernel component locks the given packages.
func kernelSpec(t *testing.T, image string, nevras ...string) (*specs.Spec, *lock.Arch) {
	t.Helper()
	s, err := specs.Parse([]byte("name: k\nversion: 1\narchitectures: [x86_64]\n"+
		"repositories: [{name: r, url: /r, format: rpm-md, insecure-skip-verify: true}]\n"+
		"components: {kernel: {kind: kernel, packages: [kernel]}}\nimage: {boot-modules: []"+image+"}\n"), "/", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &lock.Arch{Components: map[string][]string{"kernel": nevras}}
	for _, n := range nevras {
		name := n[:strings.Index(n, "-6.")]
		a.Packages = append(a.Packages, lock.Package{Name: name, NEVRA: n})
	}
	return s, a
}

func TestKernelChoice(t *testing.T) {
	const core, alt, fw = "kernel-core-6.9.1-1.x86_64", "kernel-image-std-def-6.9.1-alt1.x86_64", "linux-firmware-6.9.1-1.noarch"
	fedora := map[string]string{"/lib/modules/6.9.1/": "", "/lib/modules/6.9.1/vmlinuz": "fedora kernel", "/lib/modules/6.9.1/System.map": "map"}
	altKernel := map[string]string{"/boot/vmlinuz-6.9.1": "alt kernel", "/lib/modules/6.9.1/": ""}

	t.Run("Fedora's layout", func(t *testing.T) {
		s, a := kernelSpec(t, "", core, fw)
		tr := kernelTree(t, map[string]map[string]string{core: fedora, fw: {"/lib/firmware/x.bin": "fw"}})
		k, err := takeKernel(s, a, tr)
		if err != nil {
			t.Fatal(err)
		}
		if k.Package != core || k.Version != "6.9.1" || k.VmlinuzPath != "/lib/modules/6.9.1/vmlinuz" || string(k.vmlinuz) != "fedora kernel" {
			t.Errorf("kernel: %+v", k)
		}
		if tr.Get("/lib/modules/6.9.1/vmlinuz") != nil || tr.Get("/lib/modules/6.9.1/System.map") == nil {
			t.Error("the image beside the modules stays in the tree, or more left with it")
		}
	})
	t.Run("a copy in /boot", func(t *testing.T) {
		s, a := kernelSpec(t, "", core)
		tr := kernelTree(t, map[string]map[string]string{core: {"/boot/vmlinuz-6.9.1": "fedora kernel", "/lib/modules/6.9.1/": "", "/lib/modules/6.9.1/vmlinuz": "fedora kernel"}})
		k, err := takeKernel(s, a, tr)
		if err != nil {
			t.Fatal(err)
		}
		if k.VmlinuzPath != "/boot/vmlinuz-6.9.1" || tr.Get("/boot") != nil || tr.Get("/lib/modules/6.9.1/vmlinuz") != nil {
			t.Errorf("kernel %+v; /boot or the modules' copy left in the tree", k)
		}
	})
	for _, c := range []struct {
		name  string
		image string
		files map[string]map[string]string
		want  string // error, or the package chosen
	}{
		{"two candidates", "", map[string]map[string]string{core: fedora, alt: altKernel},
			"several packages shipping a kernel image: kernel-core and kernel-image-std-def; name one with image.kernel"},
		{"image.kernel chooses", ", kernel: kernel-image-std-def", map[string]map[string]string{core: fedora, alt: altKernel}, alt},
		{"image.kernel not in the component", ", kernel: kernel-rt", map[string]map[string]string{core: fedora}, "image.kernel kernel-rt is not a package of the kernel component"},
		{"image.kernel ships none", ", kernel: linux-firmware", map[string]map[string]string{core: fedora, fw: {"/lib/firmware/x.bin": "fw"}}, "linux-firmware-6.9.1-1.noarch ships no kernel image"},
		{"no image", "", map[string]map[string]string{fw: {"/lib/firmware/x.bin": "fw"}}, "no package of the kernel component ships a kernel image"},
		{"copies differ", "", map[string]map[string]string{core: {"/boot/vmlinuz-6.9.1": "a", "/lib/modules/6.9.1/": "", "/lib/modules/6.9.1/vmlinuz": "b"}},
			"ships two different kernel images: /boot/vmlinuz-6.9.1 and /lib/modules/6.9.1/vmlinuz"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var nevras []string
			for n := range c.files {
				nevras = append(nevras, n)
			}
			if !strings.Contains(c.want, " ") {
				nevras = []string{core, alt}
			}
			s, a := kernelSpec(t, c.image, nevras...)
			k, err := takeKernel(s, a, kernelTree(t, c.files))
			switch {
			case !strings.Contains(c.want, " "):
				if err != nil || k.Package != c.want {
					t.Fatalf("chose %v (%v), want %s", k, err, c.want)
				}
			case err == nil || !strings.Contains(err.Error(), c.want):
				t.Fatalf("want an error containing %q, got %v", c.want, err)
			}
		})
	}
}

// TestBuildFedoraKernel builds a release whose kernel is Fedora-shaped: a
// package named kernel-core (the demo kernel's files, repackaged) with the
// image at /lib/modules/<version>/vmlinuz and a %ghost /boot/vmlinuz-*.
// The kernel is found by what it ships and leaves the root filesystem.
func TestBuildFedoraKernel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "base")
	if err := demobase.Write(dir); err != nil {
		t.Fatal(err)
	}
	kver, image := writeKernelCore(t, dir)
	fp, err := demobase.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(dir, "fedora-kernel.yaml")
	spec := fmt.Sprintf(`name: fedora-kernel
branch: p11
version: 1.0.0
architectures: [x86_64]
repositories:
  - {name: demo, url: alt, format: alt, dists: ["{arch}", noarch, kcore], components: [classic], keyring: [%s], fingerprints: [%s]}
components:
  kernel: {kind: kernel, packages: [kernel-core]}
  rootfs: {kind: rootfs, packages: [glibc-core, kmod]}
  installer: {kind: installer, packages: [talos-installer, systemd-boot-efi]}
`, demobase.KeyFile, fp)
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	rep := lockSpec(t, specPath).build(t, out, 0)
	k := rep.Architectures["x86_64"].Kernel
	if k == nil || !strings.HasPrefix(k.Package, "kernel-core-") || k.VmlinuzPath != "/lib/modules/"+kver+"/vmlinuz" || k.Modules != 8 {
		t.Fatalf("kernel: %+v", k)
	}
	if got, err := os.ReadFile(filepath.Join(out, "x86_64", "vmlinuz")); err != nil || !bytes.Equal(got, image) {
		t.Errorf("vmlinuz: %q (%v), want the package's image", got, err)
	}
	for _, e := range rep.Architectures["x86_64"].Rootfs {
		if strings.HasSuffix(e.Path, "/vmlinuz") || strings.HasPrefix(e.Path, "/boot") {
			t.Errorf("%s stays in the root filesystem", e.Path)
		}
	}
}

// writeKernelCore repackages the demo's newest kernel as Fedora lays one
// out (kernel-core: the image beside the modules, a %ghost in /boot),
// signed by the demo key, into a third dist of the demo repository
// (alt/kcore). It returns the kernel version and the image's bytes.
func writeKernelCore(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	src, _ := filepath.Glob(filepath.Join(dir, demobase.RepoDir, "x86_64", "RPMS.classic", "kernel-image-std-def-6.12.40-*.rpm"))
	if len(src) != 1 {
		t.Fatalf("demo kernel: %v", src)
	}
	f, err := os.Open(src[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := rpmfile.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	built, _ := p.Header.Int(rpmhdr.TagBuildTime)
	at := time.Unix(built, 0)
	r, err := rpmpack.NewRPM(rpmpack.RPMMetaData{Name: "kernel-core", Version: "6.12.40", Release: "1", Arch: "x86_64", OS: "linux",
		Summary: "Fedora-shaped kernel for the builder's test", Description: "The demo kernel laid out as Fedora's kernel-core.",
		Licence: "GPL-2.0-only", BuildTime: at, Compressor: "xz"})
	if err != nil {
		t.Fatal(err)
	}
	var kver string
	var image []byte
	_, err = p.Verify(rpmfile.VerifyOptions{Entry: func(e *cpio.Entry, rd io.Reader) error {
		data, err := io.ReadAll(rd)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(e.Name, ".")
		if v, ok := strings.CutPrefix(name, "/boot/vmlinuz-"); ok {
			kver, image = v, data
			r.AddFile(rpmpack.RPMFile{Name: name, Mode: 0o100644, Owner: "root", Group: "root", MTime: e.Mtime, Type: rpmpack.GhostFile})
			name = "/lib/modules/" + v + "/vmlinuz"
		} else if strings.HasPrefix(name, "/boot/") {
			return nil // Fedora keeps System.map and config beside the modules, not needed here
		}
		if e.Mode&cpio.TypeMask == cpio.TypeDir {
			data = nil
		}
		r.AddFile(rpmpack.RPMFile{Name: name, Body: data, Mode: uint(e.Mode), Owner: "root", Group: "root", MTime: e.Mtime})
		return nil
	}})
	if err != nil || kver == "" {
		t.Fatalf("reading the demo kernel: %v (version %q)", err, kver)
	}
	key, err := demobase.Key()
	if err != nil {
		t.Fatal(err)
	}
	r.SetPGPSigner(func(b []byte) ([]byte, error) {
		var sig bytes.Buffer
		no := false
		err := openpgp.DetachSign(&sig, key, bytes.NewReader(b), &packet.Config{DefaultHash: crypto.SHA256,
			Time: func() time.Time { return at }, NonDeterministicSignaturesViaNotation: &no})
		return sig.Bytes(), err
	})
	var rpm bytes.Buffer
	if err := r.Write(&rpm); err != nil {
		t.Fatal(err)
	}
	dist := filepath.Join(dir, demobase.RepoDir, "kcore")
	file := filepath.Join(dist, "RPMS.classic", "kernel-core-6.12.40-1.x86_64.rpm")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, rpm.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	err = repo.WriteALTDist(repo.ALTDist{Dir: dist, Components: map[string][]string{"classic": {file}}, Archs: []string{"x86_64", "noarch"},
		Date: at.Add(time.Hour), Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	return kver, image
}
