// Package binrpm packages a program binary, the builder itself first, as a
// signed RPM a package base can carry: the binary under /usr/bin, its
// documents under /usr/share/doc, and the shared-library dependencies rpm's
// and ALT's dependency finders would write for it, read from its ELF
// dynamic section.
package binrpm

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/google/rpmpack"

	"github.com/nodeforge/builder/pkgbase/rpmwrite"
)

// Options describe the package.
type Options struct {
	Binary                                                                                 string   // the program to package
	Name                                                                                   string   // the package's name, e.g. nodeforge-builder
	Command                                                                                string   // its name under /usr/bin (default: Name)
	Docs                                                                                   []string // files for /usr/share/doc/NAME-VERSION/
	Version, Release, Disttag, Summary, Description, Group, License, URL, Packager, Vendor string
	// Built dates the package, its files and its signature: a source date
	// (the commit's), never the clock.
	Built  time.Time
	Signer rpmwrite.Signer
}

var versionChars = regexp.MustCompile(`^[A-Za-z0-9._+~]+$`)

// Package returns the RPM's file name and bytes.
func Package(o Options) (string, []byte, error) {
	if o.Name == "" || o.Version == "" || o.Release == "" {
		return "", nil, errors.New("a package needs a name, a version and a release")
	}
	for what, v := range map[string]string{"version": o.Version, "release": o.Release} {
		if !versionChars.MatchString(v) {
			return "", nil, fmt.Errorf("%s %q: rpm allows letters, digits and . _ + ~ (no hyphen, no space)", what, v)
		}
	}
	if o.Built.IsZero() {
		return "", nil, errors.New("a package needs its date (the source date, e.g. the commit's): none given")
	}
	if o.Signer == nil {
		return "", nil, errors.New("a package base carries signed packages only: no signing key given")
	}
	body, err := os.ReadFile(o.Binary)
	if err != nil {
		return "", nil, err
	}
	arch, requires, err := elfDeps(o.Binary)
	if err != nil {
		return "", nil, err
	}
	mtime := uint32(o.Built.Unix())
	command := o.Command
	if command == "" {
		command = o.Name
	}
	files := []rpmpack.RPMFile{{Name: "/usr/bin/" + command, Body: body, Mode: 0o100755, Owner: "root", Group: "root", MTime: mtime}}
	docDir := path.Join("/usr/share/doc", o.Name+"-"+o.Version)
	if len(o.Docs) > 0 {
		files = append(files, rpmpack.RPMFile{Name: docDir, Mode: 0o040755, Owner: "root", Group: "root", MTime: mtime})
	}
	for _, d := range o.Docs {
		b, err := os.ReadFile(d)
		if err != nil {
			return "", nil, err
		}
		files = append(files, rpmpack.RPMFile{Name: path.Join(docDir, filepath.Base(d)), Body: b, Mode: 0o100644, Owner: "root", Group: "root", MTime: mtime, Type: rpmpack.DocFile})
	}
	p := &rpmwrite.Package{
		Name: o.Name, Version: o.Version, Release: o.Release, Arch: arch, Disttag: o.Disttag,
		SourceRPM: fmt.Sprintf("%s-%s-%s.src.rpm", o.Name, o.Version, o.Release),
		Summary:   o.Summary, Description: o.Description, Group: o.Group, License: o.License, URL: o.URL,
		Vendor: o.Vendor, Packager: o.Packager, BuildHost: "nodeforge.invalid", Built: o.Built,
		Compressor: "xz", Files: files,
		Requires:  append(requires, rpmwrite.Dep{Name: "rpmlib(PayloadIsXz)", Flags: rpmwrite.RPMLib | rpmwrite.Prereq}),
		Changelog: []rpmwrite.Change{{Time: o.Built, Name: o.Packager + " " + o.Version + "-" + o.Release, Text: "- Built from source by make rpm."}},
	}
	evr := p.EVR()
	if o.Disttag != "" {
		evr += ":" + o.Disttag
	}
	p.Provides = []rpmwrite.Dep{{Name: o.Name, Flags: rpmwrite.Equal, Version: evr}}
	b, err := rpmwrite.Write(p, o.Signer)
	if err != nil {
		return "", nil, err
	}
	return p.FileName(), b, nil
}

// rpmArch is rpm's name of an ELF machine.
var rpmArch = map[elf.Machine]string{elf.EM_X86_64: "x86_64", elf.EM_AARCH64: "aarch64"}

// elfDeps reads the binary's architecture and what it needs: LIB()(64bit)
// for each DT_NEEDED library and LIB(VERSION)(64bit) for each symbol
// version it asks of one, as rpm's elfdeps and ALT's find-requires write
// them. A static binary needs nothing.
func elfDeps(bin string) (string, []rpmwrite.Dep, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return "", nil, fmt.Errorf("%s: not an ELF program: %w", bin, err)
	}
	defer f.Close()
	arch, ok := rpmArch[f.Machine]
	if !ok || f.Class != elf.ELFCLASS64 {
		return "", nil, fmt.Errorf("%s: %v %v: packages are made for x86_64 and aarch64", bin, f.Class, f.Machine)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", nil, fmt.Errorf("%s: an ELF %v, not a program", bin, f.Type)
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", bin, err)
	}
	var names []string
	for _, l := range libs {
		names = append(names, l+"()(64bit)")
	}
	needs, err := f.DynamicVersionNeeds()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) && len(libs) > 0 {
		return "", nil, fmt.Errorf("%s: its symbol versions: %w", bin, err)
	}
	for _, n := range needs {
		for _, v := range n.Needs {
			names = append(names, n.Name+"("+v.Dep+")(64bit)")
		}
	}
	slices.Sort(names)
	var deps []rpmwrite.Dep
	for _, n := range slices.Compact(names) {
		deps = append(deps, rpmwrite.Dep{Name: n, Flags: rpmwrite.FindReq})
	}
	return arch, deps, nil
}
