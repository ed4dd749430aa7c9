package extensions

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// ManifestVersion is the manifest format this node OS reads.
const ManifestVersion = "v1alpha1"

// Manifest is an extension's manifest.yaml.
type Manifest struct {
	Version  string   `yaml:"version"`
	Metadata Metadata `yaml:"metadata"`
}

// Metadata describes the extension.
type Metadata struct {
	Name          string        `yaml:"name"`
	Version       string        `yaml:"version"`
	Author        string        `yaml:"author,omitempty"`
	Description   string        `yaml:"description,omitempty"`
	Compatibility Compatibility `yaml:"compatibility"`
	// ExtraInfo is free text (the Image Factory's schematic extension
	// carries the schematic there).
	ExtraInfo string `yaml:"extraInfo,omitempty"`
}

// Compatibility constrains the node OS versions the extension runs on.
type Compatibility struct {
	Talos VersionConstraint `yaml:"talos"`
}

// VersionConstraint is a version constraint (">= v1.8.0").
type VersionConstraint struct {
	Version string `yaml:"version"`
}

// Marshal renders the manifest (yaml.v3, two-space indent, fixed order).
func (m *Manifest) Marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ParseManifest reads a manifest.yaml and lists what is wrong with it.
func ParseManifest(data []byte) (*Manifest, []string) {
	var m Manifest
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil {
		return nil, []string{fmt.Sprintf("manifest.yaml: %v", err)}
	}
	var errs []string
	if m.Version != ManifestVersion {
		errs = append(errs, fmt.Sprintf("manifest.yaml: version %q, want %s", m.Version, ManifestVersion))
	}
	if !nameRE.MatchString(m.Metadata.Name) {
		errs = append(errs, fmt.Sprintf("manifest.yaml: metadata.name %q is not a valid name", m.Metadata.Name))
	}
	if m.Metadata.Version == "" {
		errs = append(errs, "manifest.yaml: metadata.version is empty")
	}
	if err := CheckConstraint(m.Metadata.Compatibility.Talos.Version); err != nil {
		errs = append(errs, fmt.Sprintf("manifest.yaml: metadata.compatibility.talos.version: %v", err))
	}
	return &m, errs
}
