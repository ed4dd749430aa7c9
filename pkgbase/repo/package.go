// Package repo reads package repositories (ALT apt-rpm and rpm-md) into a
// common index of package metadata.
package repo

import (
	"fmt"

	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/rpmfile"
)

// Dep is one dependency entry (require, provide, conflict or obsolete): an
// index says the same of a package as its header does.
type Dep = rpmfile.Dep

// Package is the metadata of one binary package as an index describes it.
type Package struct {
	Name      string
	EVR       evr.EVR
	Arch      string
	BuildTime int64
	SourceRPM string
	License   string // empty for ALT indexes (they do not carry it)
	Size      int64  // installed size

	Provides  []Dep
	Requires  []Dep
	Conflicts []Dep
	Obsoletes []Dep
	Files     []string // absolute paths; ALT indexes carry a stripped list

	Semantics evr.Semantics // the version rules of the repository it came from

	// Where the package lives.
	Repo     string // repository identifier (its base URL)
	Location string // path relative to Repo, e.g. "RPMS.classic/foo-1-alt1.x86_64.rpm"
	FileSize int64  // size of the .rpm file
	SHA256   string // hex; "" when the index does not carry it
	BLAKE2b  string // hex BLAKE2b-512; "" when absent
	MD5      string // hex; "" when absent
	SHA1     string // hex; "" when absent
}

// NEVRA returns name-[epoch:]version-release.arch.
func (p *Package) NEVRA() string {
	return fmt.Sprintf("%s-%s.%s", p.Name, p.VR(), p.Arch)
}

// VR returns [epoch:]version-release without the disttag.
func (p *Package) VR() string {
	s := p.EVR.Version
	if p.EVR.Release != "" {
		s += "-" + p.EVR.Release
	}
	if p.EVR.HasEpoch {
		s = fmt.Sprintf("%d:%s", p.EVR.Epoch, s)
	}
	return s
}
