// Package rpmwrite writes signed RPM packages as ALT's girar does: rpm's
// header tags written by rpmpack, with ALT's dependency flags, disttag and
// changelog as custom tags, signed by an OpenPGP signer. Two writes of one
// Package give the same bytes: every time in it is the package's own.
package rpmwrite

import (
	"bytes"
	"crypto"
	"fmt"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/google/rpmpack"

	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// rpm's dependency flags (RPMSENSE_*).
const (
	Less     = 0x2
	Greater  = 0x4
	Equal    = 0x8
	Prereq   = 0x40
	FindReq  = 0x4000 // set by ALT's automatic dependency finder
	RPMLib   = 0x1000000
	PreInst  = 0x100 // RPMSENSE_SCRIPT_PRE
	PostInst = 0x200 // RPMSENSE_SCRIPT_POST
)

// Dep is one dependency: a name, rpm's flags and a version ([E:]V-R).
type Dep struct {
	Name    string
	Flags   uint32
	Version string
}

// Change is one changelog entry: its date (written as noon of that day,
// as rpmbuild does), who and which version ("NAME <MAIL> EVR"), and text.
type Change struct {
	Time       time.Time
	Name, Text string
}

// Package is what one RPM holds.
type Package struct {
	Name, Version, Release string
	Epoch                  int    // 0: no epoch tag
	Arch                   string // "x86_64", "aarch64" or "noarch"
	Disttag                string
	SourceRPM              string // the source package's file name
	Summary, Description   string
	Group, License, URL    string
	Vendor, Packager       string
	BuildHost              string
	Built                  time.Time // BUILDTIME
	// Compressor of the payload: "xz" (ALT's, which rpm 4.0.4 reads),
	// "zstd", "gzip".
	Compressor string
	Files      []rpmpack.RPMFile
	Pre, Post  string // scriptlets

	Provides, Requires, Conflicts, Obsoletes []Dep
	Changelog                                []Change // newest first
}

// EVR is [E:]V-R, the version of exact dependencies on the package.
func (p *Package) EVR() string {
	s := p.Version + "-" + p.Release
	if p.Epoch > 0 {
		s = fmt.Sprint(p.Epoch) + ":" + s
	}
	return s
}

// FileName is the package's file name, as girar names it.
func (p *Package) FileName() string {
	return fmt.Sprintf("%s-%s-%s.%s.rpm", p.Name, p.Version, p.Release, p.Arch)
}

// Signer signs bytes with a detached OpenPGP signature.
type Signer func([]byte) ([]byte, error)

// Write returns the package, its header and header+payload signed by sign.
func Write(p *Package, sign Signer) ([]byte, error) {
	epoch := rpmpack.NoEpoch
	if p.Epoch > 0 {
		epoch = uint32(p.Epoch)
	}
	r, err := rpmpack.NewRPM(rpmpack.RPMMetaData{
		Name: p.Name, Summary: p.Summary, Description: p.Description,
		Version: p.Version, Release: p.Release, Epoch: epoch, Arch: p.Arch, OS: "linux",
		Vendor: p.Vendor, URL: p.URL, Packager: p.Packager, Group: p.Group, Licence: p.License,
		BuildHost: p.BuildHost, BuildTime: p.Built, Compressor: p.Compressor,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Name, err)
	}
	for _, f := range p.Files {
		r.AddFile(f)
	}
	if p.Pre != "" {
		r.AddPrein(p.Pre)
	}
	if p.Post != "" {
		r.AddPostin(p.Post)
	}
	// Dependencies go in as custom tags, which rpmpack writes last: its own
	// Relation type cannot carry ALT's flags (PREREQ, SCRIPT_*, RPMLIB) and
	// its self-provide has neither epoch nor disttag.
	setDeps(r, p.Provides, rpmhdr.TagProvideName, rpmhdr.TagProvideFlags, rpmhdr.TagProvideVersion)
	setDeps(r, p.Requires, rpmhdr.TagRequireName, rpmhdr.TagRequireFlags, rpmhdr.TagRequireVersion)
	setDeps(r, p.Conflicts, rpmhdr.TagConflictName, rpmhdr.TagConflictFlags, rpmhdr.TagConflictVersion)
	setDeps(r, p.Obsoletes, rpmhdr.TagObsoleteName, rpmhdr.TagObsoleteFlags, rpmhdr.TagObsoleteVersion)
	r.AddCustomTag(rpmhdr.TagDistTag, rpmpack.EntryString(p.Disttag))
	r.AddCustomTag(rpmhdr.TagSourceRPM, rpmpack.EntryString(p.SourceRPM))
	if len(p.Changelog) > 0 {
		var times []int32
		var names, texts []string
		for _, c := range p.Changelog {
			day := c.Time.UTC().Truncate(24 * time.Hour).Add(12 * time.Hour)
			times, names, texts = append(times, int32(day.Unix())), append(names, c.Name), append(texts, c.Text)
		}
		r.AddCustomTag(rpmhdr.TagChangelogTime, rpmpack.EntryInt32(times))
		r.AddCustomTag(rpmhdr.TagChangelogName, rpmpack.EntryStringSlice(names))
		r.AddCustomTag(rpmhdr.TagChangelogText, rpmpack.EntryStringSlice(texts))
	}
	// The signer hook signs the header (RSAHEADER, what rpm -K checks
	// first) and header+payload (the legacy PGP tag).
	if sign != nil {
		r.SetPGPSigner(sign)
	}
	var buf bytes.Buffer
	if err := r.Write(&buf); err != nil {
		return nil, fmt.Errorf("%s: %w", p.FileName(), err)
	}
	return buf.Bytes(), nil
}

func setDeps(r *rpmpack.RPM, deps []Dep, nameTag, flagsTag, verTag uint32) {
	if len(deps) == 0 {
		return
	}
	names := make([]string, len(deps))
	flags := make([]uint32, len(deps))
	vers := make([]string, len(deps))
	for i, d := range deps {
		names[i], flags[i], vers[i] = d.Name, d.Flags, d.Version
	}
	r.AddCustomTag(int(nameTag), rpmpack.EntryStringSlice(names))
	r.AddCustomTag(int(flagsTag), rpmpack.EntryUint32(flags))
	r.AddCustomTag(int(verTag), rpmpack.EntryStringSlice(vers))
}

// OpenPGPSigner signs with e's private key as rpm's signature header
// stores it (binary, detached), dated at: the same bytes give the same
// signature (SHA-512, no random salt notation).
func OpenPGPSigner(e *openpgp.Entity, at time.Time) Signer {
	return func(data []byte) ([]byte, error) {
		no := false
		cfg := &packet.Config{DefaultHash: crypto.SHA512, Time: func() time.Time { return at }, NonDeterministicSignaturesViaNotation: &no}
		var b bytes.Buffer
		if err := openpgp.DetachSign(&b, e, bytes.NewReader(data), cfg); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
}
