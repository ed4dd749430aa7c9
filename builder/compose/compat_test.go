package compose

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/builder/media/meta"
	"github.com/nodeforge/builder/builder/media/ova"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/testbase"
)

// Talos's contracts for a node's kernel command line, its platforms and
// META, one subtest per row of docs/talos-compatibility.md ("Kernel
// command line, platforms and META"). The vectors are Talos's imager's and
// the upstream factory's (their tests give the strings).

// compatMedia makes media of a schematic (YAML) for a platform and
// architecture from stand-in boot assets; the release's command line is
// Talos 1.11's default arguments.
func compatMedia(t *testing.T, sch, pl, arch string, stub []byte, o Options) *Result {
	t.Helper()
	if sch == "" {
		sch = "{}" // an empty body is not a schematic (upstream's EOF)
	}
	s, err := schematic.Parse([]byte(sch))
	if err != nil {
		t.Fatal(err)
	}
	bl, initrd := testBootFiles()
	b := Boot{Arch: arch, Vmlinuz: []byte("vmlinuz"), Initramfs: initrd, Bootloader: bl, KernelVersion: "6.1.0-57-amd64", Stub: stub,
		Cmdline: []string{"init_on_alloc=1", "slab_nomerge=", "pti=on", "consoleblank=0", "nvme_core.io_timeout=4294967295", "printk.devkmsg=on", "selinux=1"}}
	o.Schematic, o.Platform, o.InitramfsCompression, o.SourceDate, o.Work, o.PrettyName = s, pl, "zstd", 1700000000, t.TempDir(), "Nodeforge compat"
	if o.DiskFormats == nil {
		o.DiskFormats = []string{}
	}
	r, err := Media(context.Background(), b, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *Result) file(t *testing.T, name string) []byte {
	t.Helper()
	for _, f := range r.Files {
		if f.Name == name {
			b, err := f.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("no %s among the media", name)
	return nil
}

const (
	talos111 = " init_on_alloc=1 slab_nomerge pti=on consoleblank=0 nvme_core.io_timeout=4294967295 printk.devkmsg=on selinux=1"
	// The upstream factory's META schematic and its command line's value.
	metaSchematic = "customization:\n  meta:\n    - key: 0xa\n      value: '{\"externalIPs\":[\"1.2.3.4\"]}'\n"
	metaEnv       = " talos.environment=INSTALLER_META_BASE64=MHhhPXsiZXh0ZXJuYWxJUHMiOlsiMS4yLjMuNCJdfQ=="
)

func TestCompatKernelCommandLine(t *testing.T) {
	t.Run("talos.platform and the platform's consoles", func(t *testing.T) {
		for _, c := range []struct{ platform, arch, want string }{
			// pkg/imager TestImager cmdline-1.11-amd64 and -arm64.
			{"metal", "x86_64", "talos.platform=metal console=tty0" + talos111},
			{"metal", "aarch64", "talos.platform=metal console=ttyAMA0 console=tty0" + talos111},
			{"nocloud", "x86_64", "talos.platform=nocloud console=tty1 console=ttyS0 net.ifnames=0" + talos111},
			{"vmware", "x86_64", "talos.platform=vmware talos.config=guestinfo console=tty0 console=ttyS0 earlyprintk=ttyS0,115200 net.ifnames=0" + talos111},
		} {
			r := compatMedia(t, "", c.platform, c.arch, nil, Options{})
			if got := string(r.file(t, CmdlineName(c.platform, c.arch))); got != c.want {
				t.Errorf("%s %s:\n got %s\nwant %s", c.platform, c.arch, got, c.want)
			}
		}
	})
	t.Run("the schematic's arguments last, console= replacing", func(t *testing.T) {
		// image-factory download_test "extra metal": appended last.
		r := compatMedia(t, "customization:\n  extraKernelArgs: [nolapic, nomodeset]\n", "metal", "x86_64", nil, Options{})
		if got := string(r.file(t, "cmdline-metal-x86_64")); got != "talos.platform=metal console=tty0"+talos111+" nolapic nomodeset" {
			t.Errorf("got %s", got)
		}
		r = compatMedia(t, "customization:\n  extraKernelArgs: [console=ttyS1, -selinux, talos.platform=openstack]\n", "metal", "x86_64", nil, Options{})
		if got := string(r.file(t, "cmdline-metal-x86_64")); got != "talos.platform=openstack console=ttyS1"+strings.Replace(talos111, " selinux=1", "", 1) {
			t.Errorf("got %s", got)
		}
	})
	t.Run("META on the command line of PXE and ISO", func(t *testing.T) {
		// image-factory download_test "meta contents".
		testutil.NeedTool(t, "xorriso")
		r := compatMedia(t, metaSchematic, "metal", "x86_64", nil, Options{DiskFormats: []string{"iso"}})
		want := "talos.platform=metal console=tty0" + talos111 + metaEnv
		if got := string(r.file(t, "cmdline-metal-x86_64")); got != want {
			t.Errorf("cmdline:\n got %s\nwant %s", got, want)
		}
		if ipxe := string(r.file(t, "ipxe-metal-x86_64")); !strings.Contains(ipxe, " "+want+"\n") {
			t.Errorf("ipxe:\n%s", ipxe)
		}
		// The ISO's boot entry: Talos's ISO also halts a node installed.
		iso := r.file(t, "metal-x86_64.iso")
		if !bytes.Contains(iso, []byte("options talos.platform=metal console=tty0 talos.halt_if_installed=1"+talos111+metaEnv+"\n")) {
			t.Error("the ISO's boot entry lacks the ISO's command line with META")
		}
	})
	t.Run("META in the disk image's partition, not its command line", func(t *testing.T) {
		r := compatMedia(t, metaSchematic, "metal", "x86_64", nil, Options{DiskFormats: []string{"raw"}})
		raw := r.file(t, "metal-x86_64.raw")
		if !bytes.Contains(raw, []byte("options talos.platform=metal console=tty0"+talos111+"\n")) || bytes.Contains(raw, []byte("INSTALLER_META_BASE64")) {
			t.Error("the disk's boot entry is not the command line without META")
		}
		at := bytes.Index(raw, []byte{0x5a, 0x4b, 0x3c, 0x2d})
		if at < 0 {
			t.Fatal("no META partition")
		}
		got, err := meta.Decode(raw[at : at+meta.Size])
		if err != nil || string(got[0xa]) != `{"externalIPs":["1.2.3.4"]}` {
			t.Errorf("META partition: %v %q", err, got)
		}
		if strings.Contains(string(r.InstallerCmdline), "INSTALLER_META") {
			t.Errorf("an installer's command line with META: %s", r.InstallerCmdline)
		}
	})
	t.Run("the command line has no trailing newline", func(t *testing.T) {
		r := compatMedia(t, "", "aws", "x86_64", nil, Options{})
		if c := r.file(t, "cmdline-aws-x86_64"); bytes.HasSuffix(c, []byte("\n")) || bytes.HasSuffix(c, []byte(" ")) {
			t.Errorf("%q", c)
		}
	})
	t.Run("the prefix is a parameter, talos by default", func(t *testing.T) {
		tb, err := platform.Talos.Override("nodeforge", nil)
		if err != nil {
			t.Fatal(err)
		}
		r := compatMedia(t, metaSchematic, "vmware", "x86_64", nil, Options{Platforms: tb})
		got := string(r.file(t, "cmdline-vmware-x86_64"))
		if !strings.HasPrefix(got, "nodeforge.platform=vmware nodeforge.config=guestinfo console=tty0 ") || !strings.Contains(got, " nodeforge.environment=INSTALLER_META_BASE64=") || strings.Contains(got, "talos.") {
			t.Errorf("got %s", got)
		}
		// A release records its spec's changes; media from it use them.
		p := Params{KernelParamPrefix: "nodeforge", Platforms: []platform.Platform{{Name: "lab", Args: []string{"talos.config=http://10.0.0.1/c"}, Formats: []string{"iso"}}}}
		ann, err := p.Annotation()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseParams(ann)
		if err != nil {
			t.Fatal(err)
		}
		tb, err = back.PlatformTable()
		if err != nil {
			t.Fatal(err)
		}
		r = compatMedia(t, "", "lab", "x86_64", nil, Options{Platforms: tb})
		if got := string(r.file(t, "cmdline-lab-x86_64")); got != "nodeforge.platform=lab nodeforge.config=http://10.0.0.1/c"+talos111 {
			t.Errorf("a platform of the spec: %s", got)
		}
		if ann, _ := (Params{}).Annotation(); strings.Contains(ann, "platforms") || strings.Contains(ann, "kernelParamPrefix") {
			t.Errorf("a release without changes records them: %s", ann)
		}
	})
	t.Run("the plain UKI has the disk images' command line", func(t *testing.T) {
		stub := testbase.EFIForTest(t, "linuxx64.efi.stub")
		if stub == nil {
			return
		}
		r := compatMedia(t, metaSchematic, "metal", "x86_64", stub, Options{UKI: true})
		u := r.file(t, "metal-x86_64-uki.efi")
		if !bytes.Contains(u, []byte("talos.platform=metal console=tty0"+talos111)) || bytes.Contains(u, []byte("INSTALLER_META")) {
			t.Error("the UKI's .cmdline is not the disk images' command line")
		}
	})
	t.Run("vmware's OVA", func(t *testing.T) {
		tarTool := testutil.NeedTool(t, "tar")
		// vmware's default format, and any format compressed on request.
		vm, _ := platform.Lookup("vmware")
		r := compatMedia(t, "", "vmware", "x86_64", nil, Options{DiskFormats: vm.Formats, CompressedFormats: []string{"ova"}, Compressions: []string{"gz"}})
		b := r.file(t, "vmware-x86_64.ova")
		p := filepath.Join(t.TempDir(), "vmware-amd64.ova")
		os.WriteFile(p, b, 0o644)
		out, err := exec.Command(tarTool, "-tf", p).CombinedOutput()
		if err != nil || string(out) != "disk.ovf\ndisk.mf\ndisk.vmdk\n" {
			t.Errorf("tar -tf: %v\n%s", err, out)
		}
		tr := tar.NewReader(bytes.NewReader(b))
		tr.Next()
		ovf, _ := io.ReadAll(tr)
		if !bytes.Contains(ovf, []byte(`ovf:key="talos.config"`)) || !bytes.Contains(ovf, []byte(`vmw:key="firmware" vmw:value="efi"`)) {
			t.Errorf("descriptor:\n%s", ovf)
		}
		if _, err := ova.Descriptor(1, 1, ova.Options{}); err != nil {
			t.Error(err)
		}
		r.file(t, "vmware-x86_64.ova.gz")
	})
}
