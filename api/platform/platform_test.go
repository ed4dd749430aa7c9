package platform

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestPlatforms(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range All {
		if seen[p.Name] {
			t.Errorf("%s listed twice", p.Name)
		}
		seen[p.Name] = true
		if len(p.Formats) == 0 || p.Description == "" || !regexp.MustCompile(`^(`+NamePattern+`)$`).MatchString(p.Name) {
			t.Errorf("%s: formats %v, description %q", p.Name, p.Formats, p.Description)
		}
		if errs := p.check(); errs != nil {
			t.Errorf("%s: %v", p.Name, errs)
		}
	}
	if p, err := Lookup(""); err != nil || p.Name != "metal" {
		t.Errorf("default: %v %v", p, err)
	}
	if _, err := Lookup("vmware"); err != nil {
		t.Errorf("vmware: %v", err)
	}
	for _, s := range []string{"digital-ocean-amd64", "equinixMetal-arm64"} {
		p, arch, ok := SplitName(s)
		if _, err := Lookup(p); err != nil || !ok || (arch != "amd64" && arch != "arm64") {
			t.Errorf("%s: %q %q %v %v", s, p, arch, ok, err)
		}
	}
	if _, err := Lookup("digitalocean"); err == nil || !strings.Contains(err.Error(), "known: metal, nocloud, aws, azure, gcp, vmware, ") {
		t.Errorf("unknown platform: %v", err)
	}
	if err := CheckFormat("vmdk"); err == nil || !strings.Contains(err.Error(), "raw.tar.gz, ova") {
		t.Errorf("unknown format: %v", err)
	}
}

// Talos's default kernel arguments of the versions the vectors come
// from (pkg/machinery/kernel.DefaultArgs), as a release's image.cmdline.
var (
	talos111Defaults = []string{"init_on_alloc=1", "slab_nomerge=", "pti=on", "consoleblank=0", "nvme_core.io_timeout=4294967295", "printk.devkmsg=on", "selinux=1"}
	talos114Defaults = []string{"slab_nomerge=", "pti=on", "consoleblank=0", "printk.devkmsg=on", "selinux=1", "module.sig_enforce=1", "proc_mem.force_override=never"}
)

// TestKernelArgs holds the command line to the one Talos's imager makes
// (its TestImager and the upstream factory's download tests give the
// vectors): the platform first, its consoles per architecture, the
// defaults, META, then the schematic's arguments with console= and
// talos.platform= replacing and -name removing.
func TestKernelArgs(t *testing.T) {
	tal111 := " init_on_alloc=1 slab_nomerge pti=on consoleblank=0 nvme_core.io_timeout=4294967295 printk.devkmsg=on selinux=1"
	for _, c := range []struct {
		name, platform, arch string
		table                Table
		base                 []string
		meta                 string
		iso                  bool
		extra                []string
		want                 string
	}{
		// pkg/imager TestImager, cmdline-1.11-amd64 and -arm64.
		{name: "metal amd64", platform: "metal", arch: "amd64", base: talos111Defaults, want: "talos.platform=metal console=tty0" + tal111},
		{name: "metal arm64", platform: "metal", arch: "arm64", base: talos111Defaults, want: "talos.platform=metal console=ttyAMA0 console=tty0" + tal111},
		// The ISO's (Talos 1.8 and later): after the platform's arguments.
		{name: "iso", platform: "metal", arch: "amd64", base: talos111Defaults, iso: true, want: "talos.platform=metal console=tty0 talos.halt_if_installed=1" + tal111},
		// image-factory download_test: "extra metal", "meta contents".
		{name: "extra args", platform: "metal", arch: "amd64", base: talos111Defaults, extra: []string{"nolapic", "nomodeset"},
			want: "talos.platform=metal console=tty0" + tal111 + " nolapic nomodeset"},
		{name: "meta", platform: "metal", arch: "amd64", base: talos111Defaults, meta: "MHhhPXsiZXh0ZXJuYWxJUHMiOlsiMS4yLjMuNCJdfQ==",
			want: "talos.platform=metal console=tty0" + tal111 + " talos.environment=INSTALLER_META_BASE64=MHhhPXsiZXh0ZXJuYWxJUHMiOlsiMS4yLjMuNCJdfQ=="},
		// The current Talos: nvme_core.io_timeout is AWS's own.
		{name: "aws", platform: "aws", arch: "arm64", base: talos114Defaults,
			want: "talos.platform=aws console=tty1 console=ttyS0 net.ifnames=0 nvme_core.io_timeout=4294967295 slab_nomerge pti=on consoleblank=0 printk.devkmsg=on selinux=1 module.sig_enforce=1 proc_mem.force_override=never"},
		{name: "azure", platform: "azure", arch: "amd64",
			want: "talos.platform=azure console=ttyS0,115200n8 earlyprintk=ttyS0,115200 rootdelay=300 net.ifnames=0 talos.dashboard.disabled=1 sysctl.kernel.kexec_load_disabled=1"},
		{name: "vmware amd64", platform: "vmware", arch: "amd64",
			want: "talos.platform=vmware talos.config=guestinfo console=tty0 console=ttyS0 earlyprintk=ttyS0,115200 net.ifnames=0"},
		{name: "vmware arm64", platform: "vmware", arch: "arm64",
			want: "talos.platform=vmware talos.config=guestinfo console=tty0 console=ttyAMA0 net.ifnames=0"},
		// Talos's digitalocean and equinixmetal platforms' KernelArgs.
		{name: "digital-ocean", platform: "digital-ocean", arch: "amd64", want: "talos.platform=digital-ocean console=ttyS0 console=tty0 console=tty1"},
		{name: "equinixMetal", platform: "equinixMetal", arch: "amd64", want: "talos.platform=equinixMetal console=ttyS1,115200n8"},
		// A release's console goes beside the platform's, at its place.
		{name: "release console", platform: "metal", arch: "amd64", base: []string{"console=ttyS0", "panic=-1"},
			want: "talos.platform=metal console=tty0 console=ttyS0 panic=-1"},
		// The schematic's consoles and platform replace; its -name removes.
		{name: "console override", platform: "nocloud", arch: "amd64", base: []string{"quiet"}, extra: []string{"console=ttyS1,115200", "talos.platform=metal", "foo=1", "foo=2"},
			want: "talos.platform=metal console=ttyS1,115200 net.ifnames=0 quiet foo=1 foo=2"},
		{name: "negation", platform: "aws", arch: "amd64", base: talos111Defaults, extra: []string{"-console", "-nvme_core.io_timeout=4294967295", "-selinux=0", "-"},
			want: "talos.platform=aws net.ifnames=0 init_on_alloc=1 slab_nomerge pti=on consoleblank=0 printk.devkmsg=on selinux=1 -"},
		// Another prefix renames Talos's parameters, not others.
		{name: "prefix", platform: "vmware", arch: "amd64", table: Table{Prefix: "nodeforge", Platforms: Talos.Platforms}, meta: "MHhhPWE=",
			want: "nodeforge.platform=vmware nodeforge.config=guestinfo console=tty0 console=ttyS0 earlyprintk=ttyS0,115200 net.ifnames=0 nodeforge.environment=INSTALLER_META_BASE64=MHhhPWE="},
	} {
		tb := c.table
		if tb.Prefix == "" {
			tb = Talos
		}
		p, err := tb.Lookup(c.platform)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(tb.KernelArgs(p, c.arch, Args{Base: c.base, Meta: c.meta, ISO: c.iso, Extra: c.extra}), " "); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestOverride(t *testing.T) {
	tb, err := Talos.Override("nodeforge", []Platform{
		{Name: "metal", Args: []string{"console=ttyS0"}},
		{Name: "aws", Formats: []string{"raw", "vhd"}, Description: "EC2"},
		{Name: "lab", Args: []string{"talos.config=http://10.0.0.1/c"}, Formats: []string{"iso"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	metal, _ := tb.Lookup("metal")
	if got := tb.KernelArgs(metal, "arm64", Args{}); !slices.Equal(got, []string{"nodeforge.platform=metal", "console=ttyS0"}) {
		t.Errorf("metal: %v", got)
	}
	aws, _ := tb.Lookup("aws")
	if !slices.Equal(aws.Formats, []string{"raw", "vhd"}) || aws.Description != "EC2" || len(aws.Args) != 4 {
		t.Errorf("aws: %+v", aws)
	}
	lab, err := tb.Lookup("lab")
	if err != nil || !slices.Equal(tb.KernelArgs(lab, "amd64", Args{}), []string{"nodeforge.platform=lab", "nodeforge.config=http://10.0.0.1/c"}) {
		t.Errorf("lab: %+v %v", lab, err)
	}
	if t2, _ := Talos.Override("", nil); t2.Prefix != "talos" || len(t2.Platforms) != len(Talos.Platforms) {
		t.Errorf("no change: %+v", t2)
	}
	if metal, _ := Talos.Lookup("metal"); metal.ArchArgs == nil {
		t.Error("Override changed Talos's table")
	}
	_, err = Talos.Override("Bad.Prefix", []Platform{
		{Name: "digital-sea", Formats: []string{"raw"}},
		{Name: "equinixMetal", Args: []string{"console=ttyS0"}},
		{Name: "new"},
		{Name: "metal", Formats: []string{"vmdk"}, ArchArgs: map[string][]string{"x86_64": {"console=tty0"}}},
		{Name: "aws", Args: []string{"a b", "é"}},
		{Name: "aws"},
	})
	for _, want := range []string{`prefix "Bad.Prefix"`, `platform "digital-sea"`, "platform new is new: it needs its formats", `unknown disk format "vmdk"`,
		`arch-args for "x86_64"`, `kernel argument "a b"`, `kernel argument "é"`, "aws is listed twice"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Override: %v, want %q", err, want)
		}
	}
	// Errors of several architectures in one order, the same every time.
	many := map[string][]string{}
	for _, a := range []string{"x86_64", "i586", "aarch64", "riscv64", "ppc64le"} {
		many[a] = []string{"a=" + a}
	}
	_, err = Talos.Override("", []Platform{{Name: "metal", ArchArgs: many}})
	if want := `platform metal: arch-args for "aarch64": want amd64 or arm64; platform metal: arch-args for "i586": want amd64 or arm64; ` +
		`platform metal: arch-args for "ppc64le": want amd64 or arm64; platform metal: arch-args for "riscv64": want amd64 or arm64; ` +
		`platform metal: arch-args for "x86_64": want amd64 or arm64`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Override: %v\nwant %s", err, want)
	}
}
