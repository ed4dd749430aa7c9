package repo

import (
	"encoding/hex"

	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/rpmfile"
	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// PackageFromHeader converts an RPM header (from an .rpm file or an
// apt-rpm index entry) into index metadata. CRPMTAG_* fields, when present,
// fill the location and checksums of the .rpm file.
func PackageFromHeader(h *rpmhdr.Header, sem evr.Semantics) (*Package, error) {
	p := &Package{
		Name:      h.String(rpmhdr.TagName),
		Arch:      h.String(rpmhdr.TagArch),
		SourceRPM: h.String(rpmhdr.TagSourceRPM),
		License:   h.String(rpmhdr.TagLicense),
		Semantics: sem,
		EVR: evr.EVR{
			Version: h.String(rpmhdr.TagVersion),
			Release: h.String(rpmhdr.TagRelease),
			Disttag: h.String(rpmhdr.TagDistTag),
		},
	}
	if e, ok := h.Int(rpmhdr.TagEpoch); ok {
		p.EVR.Epoch, p.EVR.HasEpoch = int(e), true
	}
	p.BuildTime, _ = h.Int(rpmhdr.TagBuildTime)
	if s, ok := h.Int(rpmhdr.TagLongSize); ok {
		p.Size = s
	} else {
		p.Size, _ = h.Int(rpmhdr.TagSize)
	}
	var err error
	conv := func(name, flags, ver uint32) ([]Dep, error) {
		ds, err := rpmfile.Deps(h, name, flags, ver)
		if err != nil || len(ds) == 0 {
			return nil, err // none is nil, as the index readers give it
		}
		return ds, nil
	}
	if p.Provides, err = conv(rpmhdr.TagProvideName, rpmhdr.TagProvideFlags, rpmhdr.TagProvideVersion); err != nil {
		return nil, err
	}
	if p.Requires, err = conv(rpmhdr.TagRequireName, rpmhdr.TagRequireFlags, rpmhdr.TagRequireVersion); err != nil {
		return nil, err
	}
	if p.Conflicts, err = conv(rpmhdr.TagConflictName, rpmhdr.TagConflictFlags, rpmhdr.TagConflictVersion); err != nil {
		return nil, err
	}
	if p.Obsoletes, err = conv(rpmhdr.TagObsoleteName, rpmhdr.TagObsoleteFlags, rpmhdr.TagObsoleteVersion); err != nil {
		return nil, err
	}
	if p.Files, err = rpmfile.Paths(h); err != nil {
		return nil, err
	}
	if fn := h.String(rpmhdr.CRPMTagFilename); fn != "" {
		p.Location = fn
		if d := h.String(rpmhdr.CRPMTagDirectory); d != "" {
			p.Location = d + "/" + fn
		}
	}
	p.FileSize, _ = h.Int(rpmhdr.CRPMTagFileSize)
	p.BLAKE2b = hexString(h, rpmhdr.CRPMTagBLAKE2b)
	p.MD5 = hexString(h, rpmhdr.CRPMTagMD5)
	p.SHA1 = hexString(h, rpmhdr.CRPMTagSHA1)
	return p, nil
}

// hexString reads a checksum tag stored either as a hex string or as binary.
func hexString(h *rpmhdr.Header, tag uint32) string {
	if s := h.String(tag); s != "" {
		return s
	}
	if b := h.Bytes(tag); len(b) > 0 {
		return hex.EncodeToString(b)
	}
	return ""
}
