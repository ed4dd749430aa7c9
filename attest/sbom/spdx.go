// Package sbom writes software bills of materials of what a build put into
// an artifact, from the lock (every package with its RPM digest, source
// RPM and license): SPDX 2.3 JSON, deterministic (the source date as the
// creation time, identifiers derived from the content).
package sbom

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"time"
)

// Package is one package of the artifact.
type Package struct {
	Name, Epoch, Version, Release, Arch string
	NEVRA, SourceRPM, License           string
	SHA256                              string // of the .rpm
	Repository                          string // the spec's repository name
}

// Document describes an artifact and the packages it holds.
type Document struct {
	Name            string // e.g. "nodeforge-1.11.0-x86_64"
	Version         string // release version
	Branch          string // package base branch, the purl's distro
	Vendor          string // purl namespace, "altlinux"
	Tool            string // "nodeforge-builder-<version>"
	LockSHA256      string // makes the namespace unique per release
	SourceDateEpoch int64
	Packages        []Package
}

type spdxDoc struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      creationInfo   `json:"creationInfo"`
	Packages          []spdxPackage  `json:"packages"`
	Relationships     []relationship `json:"relationships"`
}

type creationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID           string        `json:"SPDXID"`
	Name             string        `json:"name"`
	VersionInfo      string        `json:"versionInfo,omitempty"`
	Supplier         string        `json:"supplier,omitempty"`
	DownloadLocation string        `json:"downloadLocation"`
	FilesAnalyzed    bool          `json:"filesAnalyzed"`
	Checksums        []checksum    `json:"checksums,omitempty"`
	LicenseConcluded string        `json:"licenseConcluded"`
	LicenseDeclared  string        `json:"licenseDeclared"`
	LicenseComments  string        `json:"licenseComments,omitempty"`
	CopyrightText    string        `json:"copyrightText"`
	SourceInfo       string        `json:"sourceInfo,omitempty"`
	PrimaryPurpose   string        `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs     []externalRef `json:"externalRefs,omitempty"`
}

type checksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type externalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type relationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

var idUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// spdxID makes an SPDX identifier (letters, digits, '.', '-') from s.
func spdxID(prefix, s string) string {
	return "SPDXRef-" + prefix + "-" + idUnsafe.ReplaceAllString(s, "-")
}

// Purl is the package URL of a package: pkg:rpm/<vendor>/<name>@<version>
// with the epoch, arch and distro as qualifiers (sorted, as the purl
// specification wants).
func Purl(vendor, branch string, p Package) string {
	q := url.Values{}
	q.Set("arch", p.Arch)
	if branch != "" {
		q.Set("distro", branch)
	}
	if p.Epoch != "" && p.Epoch != "0" {
		q.Set("epoch", p.Epoch)
	}
	v := p.Version
	if p.Release != "" {
		v += "-" + p.Release
	}
	return fmt.Sprintf("pkg:rpm/%s/%s@%s?%s", url.PathEscape(vendor), url.PathEscape(p.Name), url.PathEscape(v), q.Encode())
}

// SPDX renders the document as SPDX 2.3 JSON.
func SPDX(d Document) ([]byte, error) {
	pkgs := append([]Package(nil), d.Packages...)
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].NEVRA < pkgs[j].NEVRA })
	rootID := spdxID("Artifact", d.Name)
	doc := spdxDoc{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT", Name: d.Name,
		DocumentNamespace: fmt.Sprintf("https://nodeforge.dev/spdx/%s/%s", url.PathEscape(d.Name), d.LockSHA256),
		CreationInfo: creationInfo{
			Created:  time.Unix(d.SourceDateEpoch, 0).UTC().Format(time.RFC3339),
			Creators: []string{"Tool: " + d.Tool},
		},
	}
	doc.Packages = append(doc.Packages, spdxPackage{
		SPDXID: rootID, Name: d.Name, VersionInfo: d.Version, DownloadLocation: "NOASSERTION",
		LicenseConcluded: "NOASSERTION", LicenseDeclared: "NOASSERTION", CopyrightText: "NOASSERTION",
		PrimaryPurpose: "OPERATING_SYSTEM",
	})
	doc.Relationships = append(doc.Relationships, relationship{"SPDXRef-DOCUMENT", "DESCRIBES", rootID})
	for _, p := range pkgs {
		id := spdxID("Package", p.NEVRA)
		v := p.Version
		if p.Release != "" {
			v += "-" + p.Release
		}
		if p.Epoch != "" && p.Epoch != "0" {
			v = p.Epoch + ":" + v
		}
		sp := spdxPackage{
			SPDXID: id, Name: p.Name, VersionInfo: v, Supplier: "Organization: " + d.Vendor,
			DownloadLocation: "NOASSERTION", LicenseConcluded: "NOASSERTION", LicenseDeclared: "NOASSERTION",
			CopyrightText: "NOASSERTION", PrimaryPurpose: "LIBRARY",
			ExternalRefs: []externalRef{{"PACKAGE-MANAGER", "purl", Purl(d.Vendor, d.Branch, p)}},
		}
		if p.License != "" {
			// RPM license tags are not always SPDX expressions: kept as
			// declared text, not asserted.
			sp.LicenseComments = "RPM License tag: " + p.License
		}
		if p.SHA256 != "" {
			sp.Checksums = []checksum{{"SHA256", p.SHA256}}
		}
		if p.SourceRPM != "" {
			sp.SourceInfo = "built from the source package " + p.SourceRPM
		}
		doc.Packages = append(doc.Packages, sp)
		doc.Relationships = append(doc.Relationships, relationship{rootID, "CONTAINS", id})
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
