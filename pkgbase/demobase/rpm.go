package demobase

import (
	"fmt"
	"strconv"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/google/rpmpack"

	"github.com/nodeforge/builder/pkgbase/rpmwrite"
)

// Payload compression of every demo package. rpmpack offers gzip, lzma, xz
// and zstd; xz is what current ALT branches use (ALT's rpm 4.0.4 cannot
// read zstd), and ulikunitz/xz output is deterministic.
const payloadCompressor = "xz"

const (
	demoVendor    = "NodeForge demo package base"
	demoPackager  = "NodeForge demo <demo@nodeforge.invalid>"
	demoBuildHost = "demo-build.nodeforge.invalid"
)

// fileName is the package's file name under RPMS.<comp>/, as girar names it.
func (p *pkgDef) fileName() string {
	return fmt.Sprintf("%s-%s-%s.%s.rpm", p.name, p.version, p.release, p.arch)
}

// evr is [E:]V-R, the version of exact dependencies on the package.
func (p *pkgDef) evr() string {
	s := p.version + "-" + p.release
	if p.epoch > 0 {
		s = strconv.Itoa(p.epoch) + ":" + s
	}
	return s
}

// buildRPM writes one signed package.
func buildRPM(p *pkgDef, key *openpgp.Entity, sigTime time.Time) ([]byte, error) {
	// The package's own changelog entry above those of earlier versions
	// (an update's).
	var log []rpmwrite.Change
	for _, c := range append([]change{{p.built, p.evr(), p.note}}, p.history...) {
		text := c.text
		if text == "" {
			text = "- Demo build for the NodeForge demo package base (not the real " + p.name + ")."
		}
		log = append(log, rpmwrite.Change{Time: c.built, Name: demoPackager + " " + c.evr, Text: text})
	}
	w := &rpmwrite.Package{
		Name: p.name, Version: p.version, Release: p.release, Epoch: p.epoch, Arch: p.arch,
		Disttag: p.disttag, SourceRPM: fmt.Sprintf("%s-%s-%s.src.rpm", p.src, p.version, p.release),
		Summary: p.summary, Description: p.description(), Group: p.group, License: p.license, URL: p.url,
		Vendor: demoVendor, Packager: demoPackager, BuildHost: demoBuildHost, Built: p.built,
		Compressor: p.payload(), Pre: p.pre, Post: p.post,
		Provides:  deps(append([]dep{{p.name, fEqual, p.evr() + ":" + p.disttag}}, p.provides...)),
		Requires:  deps(p.allRequires()),
		Conflicts: deps(p.conflicts),
		Obsoletes: deps(p.obsoletes),
		Changelog: log,
	}
	for _, f := range p.files {
		w.Files = append(w.Files, f.rpmFile(p.built))
	}
	return rpmwrite.Write(w, rpmwrite.OpenPGPSigner(key, sigTime))
}

func deps(in []dep) []rpmwrite.Dep {
	out := make([]rpmwrite.Dep, len(in))
	for i, d := range in {
		out[i] = rpmwrite.Dep{Name: d.name, Flags: d.flags, Version: d.ver}
	}
	return out
}

// rpmFile converts a file definition; every mtime is the build time.
func (f file) rpmFile(built time.Time) rpmpack.RPMFile {
	rf := rpmpack.RPMFile{
		Name:  f.path,
		Body:  []byte(f.body),
		Mode:  f.mode,
		Owner: "root",
		Group: "root",
		MTime: uint32(built.Unix()),
	}
	if f.owner != "" {
		rf.Owner = f.owner
	}
	if f.group != "" {
		rf.Group = f.group
	}
	switch f.kind {
	case kindDir:
		rf.Mode |= 0o040000
		rf.Body = nil
	case kindLink:
		rf.Mode = 0o120777
	}
	if f.config {
		rf.Type = rpmpack.ConfigFile | rpmpack.NoReplaceFile
	}
	return rf
}
