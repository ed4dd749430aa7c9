package demobase

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/google/rpmpack"

	"github.com/nodeforge/builder/pkgbase/rpmhdr"
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

// buildRPM writes one signed package with rpmpack.
func buildRPM(p *pkgDef, key *openpgp.Entity, sigTime time.Time) ([]byte, error) {
	epoch := rpmpack.NoEpoch
	if p.epoch > 0 {
		epoch = uint32(p.epoch)
	}
	r, err := rpmpack.NewRPM(rpmpack.RPMMetaData{
		Name:        p.name,
		Summary:     p.summary,
		Description: p.description(),
		Version:     p.version,
		Release:     p.release,
		Epoch:       epoch,
		Arch:        p.arch,
		OS:          "linux",
		Vendor:      demoVendor,
		URL:         p.url,
		Packager:    demoPackager,
		Group:       p.group,
		Licence:     p.license,
		BuildHost:   demoBuildHost,
		BuildTime:   p.built,
		Compressor:  p.payload(),
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	for _, f := range p.files {
		r.AddFile(f.rpmFile(p.built))
	}
	if p.pre != "" {
		r.AddPrein(p.pre)
	}
	if p.post != "" {
		r.AddPostin(p.post)
	}

	// Dependencies go in as custom tags, which rpmpack writes last: its own
	// Relation type cannot carry ALT's flags (PREREQ, SCRIPT_*, RPMLIB) and
	// its self-provide has neither epoch nor disttag.
	provides := append([]dep{{p.name, fEqual, p.evr() + ":" + p.disttag}}, p.provides...)
	setDeps(r, provides, rpmhdr.TagProvideName, rpmhdr.TagProvideFlags, rpmhdr.TagProvideVersion)
	setDeps(r, p.allRequires(), rpmhdr.TagRequireName, rpmhdr.TagRequireFlags, rpmhdr.TagRequireVersion)
	setDeps(r, p.conflicts, rpmhdr.TagConflictName, rpmhdr.TagConflictFlags, rpmhdr.TagConflictVersion)
	setDeps(r, p.obsoletes, rpmhdr.TagObsoleteName, rpmhdr.TagObsoleteFlags, rpmhdr.TagObsoleteVersion)

	r.AddCustomTag(rpmhdr.TagDistTag, rpmpack.EntryString(p.disttag))
	r.AddCustomTag(rpmhdr.TagSourceRPM, rpmpack.EntryString(fmt.Sprintf("%s-%s-%s.src.rpm", p.src, p.version, p.release)))
	// The package's own entry, dated noon of the build day as rpmbuild
	// does, above those of earlier versions (an update's).
	var times []int32
	var names, texts []string
	for _, c := range append([]change{{p.built, p.evr(), p.note}}, p.history...) {
		day := c.built.UTC().Truncate(24 * time.Hour).Add(12 * time.Hour)
		text := c.text
		if text == "" {
			text = "- Demo build for the NodeForge demo package base (not the real " + p.name + ")."
		}
		times, names, texts = append(times, int32(day.Unix())), append(names, demoPackager+" "+c.evr), append(texts, text)
	}
	r.AddCustomTag(rpmhdr.TagChangelogTime, rpmpack.EntryInt32(times))
	r.AddCustomTag(rpmhdr.TagChangelogName, rpmpack.EntryStringSlice(names))
	r.AddCustomTag(rpmhdr.TagChangelogText, rpmpack.EntryStringSlice(texts))

	// The signer hook signs the header (RSAHEADER, what rpm -K checks
	// first) and header+payload (the legacy PGP tag).
	r.SetPGPSigner(func(b []byte) ([]byte, error) { return detachSign(key, b, sigTime) })

	var buf bytes.Buffer
	if err := r.Write(&buf); err != nil {
		return nil, fmt.Errorf("%s: %w", p.fileName(), err)
	}
	return buf.Bytes(), nil
}

func setDeps(r *rpmpack.RPM, deps []dep, nameTag, flagsTag, verTag uint32) {
	if len(deps) == 0 {
		return
	}
	names := make([]string, len(deps))
	flags := make([]uint32, len(deps))
	vers := make([]string, len(deps))
	for i, d := range deps {
		names[i], flags[i], vers[i] = d.name, d.flags, d.ver
	}
	r.AddCustomTag(int(nameTag), rpmpack.EntryStringSlice(names))
	r.AddCustomTag(int(flagsTag), rpmpack.EntryUint32(flags))
	r.AddCustomTag(int(verTag), rpmpack.EntryStringSlice(vers))
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
