// Package platform lists the platforms boot media are made for: where a
// node runs (bare metal, a virtual machine, a cloud), the kernel
// arguments it needs there, and the disk formats that platform's importer
// takes. It is data: Talos's platforms with Talos's names and kernel
// arguments (its machined reads them), which a release's spec may
// override or extend (Table.Override), so download URLs, scripts and the
// node's init carry over from Talos unchanged.
package platform

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Platform is one place a node runs.
type Platform struct {
	Name string `yaml:"name" json:"name"`
	// Args are the platform's kernel arguments (after PREFIX.platform=NAME,
	// which every platform has): its consoles and what its cloud needs,
	// on every architecture ArchArgs does not list. Talos's own parameters
	// are written with Talos's prefix (talos.config=guestinfo); a table
	// with another prefix renames them.
	Args []string `yaml:"args,omitempty" json:"args,omitempty"`
	// ArchArgs replace Args on an architecture, by its Go/OCI name
	// (amd64, arm64): the consoles differ between them.
	ArchArgs map[string][]string `yaml:"arch-args,omitempty" json:"archArgs,omitempty"`
	// Formats are the disk images made for it by default, as file name
	// suffixes (see Formats).
	Formats []string `yaml:"formats,omitempty" json:"formats,omitempty"`
	// Description says where it is used, for --help and the factory's UI.
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
}

// Formats every platform may be given, as file name suffixes.
var Formats = []string{"iso", "raw", "qcow2", "vhd", "raw.tar.gz", "ova"}

// TalosPrefix is the prefix of Talos's kernel parameters
// (talos.platform, talos.environment, talos.config, ...).
const TalosPrefix = "talos"

// Table is a release's platforms and the prefix of its init's kernel
// parameters.
type Table struct {
	Prefix    string
	Platforms []Platform
}

// Talos is Talos's table, as its machined's platforms give their kernel
// arguments (internal/app/machined/pkg/runtime/v1alpha1/platform/*:
// KernelArgs, for the current Talos): the defaults of every release.
// yandex is ours; Talos has no such platform.
var Talos = Table{Prefix: TalosPrefix, Platforms: []Platform{
	{Name: "metal", ArchArgs: map[string][]string{"amd64": {"console=tty0"}, "arm64": {"console=ttyAMA0", "console=tty0"}},
		Formats: []string{"iso", "raw", "qcow2"}, Description: "bare metal: a USB stick or CD (ISO), a disk written with dd (raw), PXE"},
	{Name: "nocloud", Args: []string{"console=tty1", "console=ttyS0", "net.ifnames=0"}, Formats: []string{"iso", "raw", "qcow2"},
		Description: "virtual machines configured by cloud-init's NoCloud source (Proxmox, libvirt, OpenStack without metadata)"},
	{Name: "aws", Args: []string{"console=tty1", "console=ttyS0", "net.ifnames=0", "nvme_core.io_timeout=4294967295"}, Formats: []string{"raw"},
		Description: "Amazon EC2: a raw disk imported as a snapshot"},
	{Name: "azure", Args: []string{"console=ttyS0,115200n8", "earlyprintk=ttyS0,115200", "rootdelay=300", "net.ifnames=0",
		"talos.dashboard.disabled=1", "sysctl.kernel.kexec_load_disabled=1"}, Formats: []string{"vhd"},
		Description: "Microsoft Azure: a fixed VHD uploaded as a page blob"},
	{Name: "gcp", Args: []string{"console=ttyS0", "net.ifnames=0", "talos.dashboard.disabled=1", "sysctl.kernel.kexec_load_disabled=1"},
		Formats: []string{"raw.tar.gz"}, Description: "Google Compute Engine: disk.raw in a gzipped tar, imported from a bucket"},
	{Name: "vmware", ArchArgs: map[string][]string{
		"amd64": {"talos.config=guestinfo", "console=tty0", "console=ttyS0", "earlyprintk=ttyS0,115200", "net.ifnames=0"},
		"arm64": {"talos.config=guestinfo", "console=tty0", "console=ttyAMA0", "net.ifnames=0"}},
		Formats: []string{"ova"}, Description: "VMware vSphere, ESXi, Workstation: an OVA (a streamOptimized VMDK and its OVF), configured through guestinfo"},
	{Name: "akamai", Args: []string{"console=ttyS0", "console=tty0", "console=tty1", "net.ifnames=0"}, Formats: []string{"raw"},
		Description: "Akamai (Linode): a raw disk uploaded as an image"},
	{Name: "alibabacloud", Args: []string{"console=tty1", "console=ttyS0", "net.ifnames=0"}, Formats: []string{"qcow2"},
		Description: "Alibaba Cloud ECS: a qcow2 image imported from OSS"},
	{Name: "cloudstack", Args: []string{"console=tty1", "console=ttyS0", "net.ifnames=0"}, Formats: []string{"raw"},
		Description: "Apache CloudStack: a raw disk registered as a template"},
	{Name: "exoscale", Args: []string{"console=tty1", "console=ttyS0", "net.ifnames=0"}, Formats: []string{"qcow2"},
		Description: "Exoscale: a qcow2 image registered as a custom template"},
	{Name: "hcloud", Args: []string{"console=tty1", "console=ttyS0", "net.ifnames=0"}, Formats: []string{"raw"},
		Description: "Hetzner Cloud: a raw disk written to a server's disk from the rescue system"},
	{Name: "opennebula", Args: []string{"console=tty1", "console=ttyS0", "net.ifnames=0"}, Formats: []string{"raw"},
		Description: "OpenNebula: a raw disk with contextualization"},
	{Name: "openstack", Args: []string{"console=tty1", "console=ttyS0", "net.ifnames=0"}, Formats: []string{"raw"},
		Description: "OpenStack: a raw disk uploaded to Glance, configured by its metadata service"},
	{Name: "oracle", Args: []string{"console=tty1", "console=ttyS0", "net.ifnames=0", "talos.dashboard.disabled=1"}, Formats: []string{"qcow2"},
		Description: "Oracle Cloud Infrastructure: a qcow2 image imported from Object Storage"},
	{Name: "scaleway", Args: []string{"console=tty1", "console=ttyS0", "net.ifnames=0", "talos.dashboard.disabled=1"}, Formats: []string{"raw"},
		Description: "Scaleway: a raw disk imported as a snapshot"},
	{Name: "upcloud", Args: []string{"net.ifnames=0"}, Formats: []string{"raw"},
		Description: "UpCloud: a raw disk imported as a storage"},
	{Name: "vultr", Args: []string{"net.ifnames=0"}, Formats: []string{"raw"},
		Description: "Vultr: a raw disk uploaded as a custom image"},
	{Name: "digital-ocean", Args: []string{"console=ttyS0", "console=tty0", "console=tty1"}, Formats: []string{"raw"},
		Description: "DigitalOcean droplets: a gzipped raw disk (digital-ocean-amd64.raw.gz) uploaded as a custom image"},
	{Name: "equinixMetal", Args: []string{"console=ttyS1,115200n8"}, Formats: []string{"raw"},
		Description: "Equinix Metal bare-metal servers: booted by iPXE from the factory's /pxe/ script"},
	{Name: "yandex", Args: []string{"console=ttyS0"}, Formats: []string{"qcow2"},
		Description: "Yandex Cloud: a qcow2 image uploaded to Object Storage"},
}}

// All are the known platforms, in the order they are presented.
var All = Talos.Platforms

// Default is the platform of media made without naming one.
const Default = "metal"

// Lookup returns the named platform of Talos's table ("" is Default), or
// an error listing the known ones.
func Lookup(name string) (Platform, error) { return Talos.Lookup(name) }

// Names are the names of Talos's table's platforms.
func Names() []string { return Talos.Names() }

// Lookup returns the named platform ("" is Default), or an error listing
// the known ones.
func (t Table) Lookup(name string) (Platform, error) {
	if name == "" {
		name = Default
	}
	for _, p := range t.Platforms {
		if p.Name == name {
			return p, nil
		}
	}
	return Platform{}, fmt.Errorf("unknown platform %q (known: %s)", name, strings.Join(t.Names(), ", "))
}

// Names are the table's platforms' names.
func (t Table) Names() []string {
	var n []string
	for _, p := range t.Platforms {
		n = append(n, p.Name)
	}
	return n
}

// CheckFormat returns an error unless f is a known disk format.
func CheckFormat(f string) error {
	if !slices.Contains(Formats, f) {
		return fmt.Errorf("unknown disk format %q (known: %s)", f, strings.Join(Formats, ", "))
	}
	return nil
}

// NamePattern matches a platform's name at the start of an artifact's
// name (PLATFORM-ARCH.FORMAT): one word, camel case allowed
// (equinixMetal), or digital-ocean, the one name with a dash, which
// upstream's parser special-cases too.
const NamePattern = `digital-ocean|[a-z][a-zA-Z0-9]*`

// SplitName splits PLATFORM-REST (metal-amd64, digital-ocean-amd64) as
// upstream's Image Factory does: at the first dash, except after
// digital-ocean.
func SplitName(s string) (platform, rest string, ok bool) {
	if rest, ok := strings.CutPrefix(s, "digital-ocean-"); ok {
		return "digital-ocean", rest, true
	}
	return strings.Cut(s, "-")
}

var (
	// A new platform's name is one lower-case word (a registry
	// repository name carries it: PLATFORM-installer); Talos's own names
	// (digital-ocean, equinixMetal) are kept as Talos spells them.
	nameRE = regexp.MustCompile(`^[a-z][a-z0-9]{0,31}$`)
	// The prefix names the init's parameters: PREFIX.platform=.
	prefixRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
)

// Override is t with a spec's changes: another prefix ("" keeps t's),
// and platforms that replace t's of the same name field by field (the
// fields a change sets) or, new, are added at the end. It refuses what
// would give a node a broken command line or an artifact no URL names.
func (t Table) Override(prefix string, changes []Platform) (Table, error) {
	out := Table{Prefix: t.Prefix, Platforms: slices.Clone(t.Platforms)}
	var errs []string
	if prefix != "" {
		if !prefixRE.MatchString(prefix) {
			errs = append(errs, fmt.Sprintf("kernel parameter prefix %q: want lower-case letters, digits, '_' or '-', starting with a letter", prefix))
		}
		out.Prefix = prefix
	}
	seen := map[string]bool{}
	for _, c := range changes {
		if !nameRE.MatchString(c.Name) && !slices.ContainsFunc(t.Platforms, func(p Platform) bool { return p.Name == c.Name }) {
			errs = append(errs, fmt.Sprintf("platform %q: a name is lower-case letters and digits, starting with a letter", c.Name))
			continue
		}
		if seen[c.Name] {
			errs = append(errs, fmt.Sprintf("platform %s is listed twice", c.Name))
			continue
		}
		seen[c.Name] = true
		errs = append(errs, c.check()...)
		i := slices.IndexFunc(out.Platforms, func(p Platform) bool { return p.Name == c.Name })
		if i < 0 {
			if len(c.Formats) == 0 {
				errs = append(errs, fmt.Sprintf("platform %s is new: it needs its formats", c.Name))
			}
			out.Platforms = append(out.Platforms, c)
			continue
		}
		p := out.Platforms[i]
		if c.Args != nil || c.ArchArgs != nil {
			p.Args, p.ArchArgs = c.Args, c.ArchArgs
		}
		if c.Formats != nil {
			p.Formats = c.Formats
		}
		if c.Description != "" {
			p.Description = c.Description
		}
		out.Platforms[i] = p
	}
	if len(errs) > 0 {
		return Table{}, fmt.Errorf("platforms: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// check lists what is wrong with a platform's own fields.
func (p Platform) check() []string {
	var errs []string
	for _, f := range p.Formats {
		if err := CheckFormat(f); err != nil {
			errs = append(errs, fmt.Sprintf("platform %s: %v", p.Name, err))
		}
	}
	lists := [][]string{p.Args}
	// In order: the same spec gives the same error.
	for _, arch := range slices.Sorted(maps.Keys(p.ArchArgs)) {
		if arch != "amd64" && arch != "arm64" {
			errs = append(errs, fmt.Sprintf("platform %s: arch-args for %q: want amd64 or arm64", p.Name, arch))
		}
		lists = append(lists, p.ArchArgs[arch])
	}
	for _, l := range lists {
		for _, a := range l {
			if a == "" || strings.ContainsFunc(a, func(r rune) bool { return r <= ' ' || r > '~' }) {
				errs = append(errs, fmt.Sprintf("platform %s: kernel argument %q: one printable ASCII word", p.Name, a))
			}
		}
	}
	return errs
}

// args are the platform's own kernel arguments on goarch, Talos's
// parameters renamed for prefix.
func (p Platform) args(prefix, goarch string) []string {
	list, ok := p.ArchArgs[goarch]
	if !ok {
		list = p.Args
	}
	out := make([]string, len(list))
	for i, a := range list {
		if rest, ok := strings.CutPrefix(a, TalosPrefix+"."); ok {
			a = prefix + "." + rest
		}
		out[i] = a
	}
	return out
}

// Param is the full name of one of Talos's kernel parameters with the
// table's prefix: Param("platform") is talos.platform.
func (t Table) Param(name string) string { return t.Prefix + "." + name }
