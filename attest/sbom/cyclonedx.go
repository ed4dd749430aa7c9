package sbom

import (
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

type cdxBOM struct {
	BOMFormat    string          `json:"bomFormat"`
	SpecVersion  string          `json:"specVersion"`
	SerialNumber string          `json:"serialNumber"`
	Version      int             `json:"version"`
	Metadata     cdxMetadata     `json:"metadata"`
	Components   []cdxComponent  `json:"components"`
	Dependencies []cdxDependency `json:"dependencies"`
}

type cdxMetadata struct {
	Timestamp string       `json:"timestamp"`
	Tools     cdxTools     `json:"tools"`
	Component cdxComponent `json:"component"`
}

type cdxTools struct {
	Components []cdxComponent `json:"components"`
}

type cdxComponent struct {
	Type       string        `json:"type"`
	BOMRef     string        `json:"bom-ref,omitempty"`
	Supplier   *cdxEntity    `json:"supplier,omitempty"`
	Name       string        `json:"name"`
	Version    string        `json:"version,omitempty"`
	Hashes     []cdxHash     `json:"hashes,omitempty"`
	Licenses   []cdxLicense  `json:"licenses,omitempty"`
	Purl       string        `json:"purl,omitempty"`
	Properties []cdxProperty `json:"properties,omitempty"`
}

type cdxEntity struct {
	Name string `json:"name"`
}

type cdxHash struct {
	Alg     string `json:"alg"`
	Content string `json:"content"`
}

type cdxLicense struct {
	License cdxLicenseName `json:"license"`
}

type cdxLicenseName struct {
	Name string `json:"name"`
}

type cdxProperty struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type cdxDependency struct {
	Ref       string   `json:"ref"`
	DependsOn []string `json:"dependsOn"`
}

// serial is a version 5 UUID URN naming the document by its content's
// identity (the lock's digest and the artifact's name): stable across
// rebuilds, distinct across releases.
func serial(d Document) string {
	ns := [16]byte{0x6e, 0x6f, 0x64, 0x65, 0x66, 0x6f, 0x72, 0x67, 0x65, 0x2d, 0x73, 0x62, 0x6f, 0x6d, 0x00, 0x01}
	h := sha1.New()
	h.Write(ns[:])
	h.Write([]byte(d.Name + "\x00" + d.LockSHA256))
	u := h.Sum(nil)[:16]
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("urn:uuid:%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// CycloneDX renders the document as CycloneDX 1.5 JSON: the node OS as
// the metadata component, every package a library component referenced
// by its purl, with its RPM's sha256, license text and source RPM.
func CycloneDX(d Document) ([]byte, error) {
	pkgs := append([]Package(nil), d.Packages...)
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].NEVRA < pkgs[j].NEVRA })
	root := "artifact:" + d.Name
	bom := cdxBOM{
		BOMFormat: "CycloneDX", SpecVersion: "1.5", SerialNumber: serial(d), Version: 1,
		Metadata: cdxMetadata{
			Timestamp: time.Unix(d.SourceDateEpoch, 0).UTC().Format(time.RFC3339),
			Tools:     cdxTools{Components: []cdxComponent{{Type: "application", Name: d.Tool}}},
			Component: cdxComponent{Type: "operating-system", BOMRef: root, Name: d.Name, Version: d.Version},
		},
		Components: []cdxComponent{},
	}
	dep := cdxDependency{Ref: root, DependsOn: []string{}}
	for _, p := range pkgs {
		purl := Purl(d.Vendor, d.Branch, p)
		v := p.Version
		if p.Release != "" {
			v += "-" + p.Release
		}
		if p.Epoch != "" && p.Epoch != "0" {
			v = p.Epoch + ":" + v
		}
		c := cdxComponent{Type: "library", BOMRef: purl, Supplier: &cdxEntity{Name: d.Vendor}, Name: p.Name, Version: v, Purl: purl}
		if p.SHA256 != "" {
			c.Hashes = []cdxHash{{"SHA-256", p.SHA256}}
		}
		if p.License != "" {
			c.Licenses = []cdxLicense{{cdxLicenseName{p.License}}}
		}
		if p.SourceRPM != "" {
			c.Properties = append(c.Properties, cdxProperty{"nodeforge:sourcerpm", p.SourceRPM})
		}
		if p.Repository != "" {
			c.Properties = append(c.Properties, cdxProperty{"nodeforge:repository", p.Repository})
		}
		bom.Components = append(bom.Components, c)
		dep.DependsOn = append(dep.DependsOn, purl)
	}
	bom.Dependencies = []cdxDependency{dep}
	b, err := json.MarshalIndent(bom, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
