// Package extensions holds the system extension definitions (one YAML file
// each in this directory, embedded: adding one needs no Go change), the
// extension manifest, and the validation of extension contents against the
// node OS's contract (allowed paths, no world-writable entries, no special
// files, a valid compatibility constraint).
package extensions

import (
	"embed"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Definition says how an extension is made from packages of the base.
type Definition struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// Descriptions are the description in other languages, by language
	// code ("ru"): the factory's UI shows the reader's. Published as the
	// extension image's DescriptionAnnotation+code annotations.
	Descriptions map[string]string `yaml:"descriptions"`
	Author       string            `yaml:"author"`
	// Compatibility is the node OS version constraint written into the
	// manifest (compatibility.talos.version), e.g. ">= v1.8.0".
	Compatibility string `yaml:"compatibility"`
	// Packages are the packages whose files the extension carries;
	// "{flavour}" is replaced by the kernel's flavour (kernel-image-std-def
	// gives std-def). Their dependencies already in the root filesystem are
	// left out.
	Packages []string `yaml:"packages"`
	// Exclude names (globs) dependencies whose files the extension does not
	// carry: tools only the packages' scriptlets use, which never run.
	Exclude []string `yaml:"exclude"`
	// VersionFrom names the package whose version is the extension's
	// (default: the first); extensions with kernel modules append the
	// kernel's version ("2.2.7-6.12.40").
	VersionFrom string `yaml:"version-from"`
	// Relocate moves files into the allowed prefixes: the first rule whose
	// From is a prefix of a path applies. Every rule's To lies inside the
	// contract's paths (AllowedPrefixes). Symbolic links follow: a link's
	// target, absolute or relative, is the relocated place of what it
	// named. The build refuses what cannot move safely (see "Extensions
	// from packages as distributions ship them" in docs/architecture.md).
	Relocate []Relocation `yaml:"relocate"`
	// Links are symbolic links the builder writes into the extension
	// (another name for a relocated program, say), inside the contract's
	// paths.
	Links []Link `yaml:"links"`
	// Drop removes paths by glob ("**" spans directories).
	Drop []string `yaml:"drop"`
	// Files are written by the builder (configuration, say).
	Files []File `yaml:"files"`
}

// Relocation moves the paths below From to below To.
type Relocation struct {
	From string `yaml:"from"`
	To   string `yaml:"to"`
}

// Link is a symbolic link the builder writes: Path, inside the contract's
// paths, names Target (relative to Path's directory, or absolute).
type Link struct {
	Path   string `yaml:"path"`
	Target string `yaml:"target"`
}

// File is a file the builder writes into the extension.
type File struct {
	Path    string `yaml:"path"`
	Mode    string `yaml:"mode"` // octal, default 0644
	Content string `yaml:"content"`
}

// FileMode is the file's permission bits.
func (f File) FileMode() uint32 {
	if f.Mode == "" {
		return 0o644
	}
	m, _ := strconv.ParseUint(f.Mode, 8, 32) // checked by Validate
	return uint32(m)
}

//go:embed *.yaml
var shipped embed.FS

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)

// langRE is a language code as the factory's UI names its languages
// (ISO 639-1 or -3, lower case).
var langRE = regexp.MustCompile(`^[a-z]{2,3}$`)

// DescriptionAnnotation prefixes the extension image's annotations that
// carry its description in other languages (…description.ru).
const DescriptionAnnotation = "dev.nodeforge.description."

// maxDescription bounds one description: a line of a table, not a manual.
const maxDescription = 1024

// Parse reads and checks one definition.
func Parse(data []byte, source string) (*Definition, error) {
	var d Definition
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("extension definition %s: %w", source, err)
	}
	if err := d.validate(); err != nil {
		return nil, fmt.Errorf("extension definition %s: %w", source, err)
	}
	return &d, nil
}

func (d *Definition) validate() error {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	if !nameRE.MatchString(d.Name) {
		bad("name %q: want lower-case letters, digits, '.', '_' or '-'", d.Name)
	}
	if len(d.Packages) == 0 {
		bad("no packages")
	}
	for _, lang := range slices.Sorted(maps.Keys(d.Descriptions)) {
		text := d.Descriptions[lang]
		switch {
		case !langRE.MatchString(lang):
			bad("descriptions: %q is not a language code (two or three lower-case letters, as ru)", lang)
		case strings.TrimSpace(text) == "" || strings.ContainsAny(text, "\n\r"):
			bad("descriptions.%s: want one line of text", lang)
		case len(text) > maxDescription:
			bad("descriptions.%s: %d bytes, at most %d", lang, len(text), maxDescription)
		}
	}
	if d.VersionFrom != "" && !slices.Contains(d.Packages, d.VersionFrom) {
		bad("version-from %s is not one of the packages", d.VersionFrom)
	}
	for _, e := range d.Exclude {
		if _, err := path.Match(e, ""); err != nil {
			bad("exclude %q: %v", e, err)
		}
	}
	if err := CheckConstraint(d.Compatibility); err != nil {
		bad("compatibility: %v", err)
	}
	errs = append(errs, d.checkRelocations()...)
	for _, f := range d.Files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path {
			bad("file %q: want an absolute, clean path", f.Path)
		}
		if f.Mode != "" {
			if m, err := strconv.ParseUint(f.Mode, 8, 32); err != nil || m&^0o777 != 0 {
				bad("file %s: mode %q is not octal permission bits", f.Path, f.Mode)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// checkRelocations checks the relocate and links rules: absolute
// directories, targets inside the contract's paths, no rule shadowed by an
// earlier one (the first whose From matches applies, so it would never
// apply), links with clean paths inside the contract and a target.
func (d *Definition) checkRelocations() []string {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	for i, r := range d.Relocate {
		if !dirRule(r.From) || !dirRule(r.To) {
			bad("relocate %s -> %s: both must be absolute, clean directories ending in /", r.From, r.To)
			continue
		}
		if !Allowed(r.To) {
			bad("relocate %s -> %s: the target is outside the extension contract's paths (%s)", r.From, r.To, strings.Join(AllowedPrefixes, ", "))
		}
		for _, e := range d.Relocate[:i] {
			if strings.HasPrefix(r.From, e.From) {
				bad("relocate %s -> %s: never applies, the earlier rule from %s takes its paths", r.From, r.To, e.From)
				break
			}
		}
	}
	seen := map[string]bool{}
	for _, l := range d.Links {
		switch {
		case !path.IsAbs(l.Path) || path.Clean(l.Path) != l.Path:
			bad("link %q: want an absolute, clean path", l.Path)
		case !Allowed(l.Path):
			bad("link %s: outside the extension contract's paths (%s)", l.Path, strings.Join(AllowedPrefixes, ", "))
		case l.Target == "" || path.Clean(l.Target) != l.Target || strings.ContainsRune(l.Target, 0):
			bad("link %s: target %q: want a clean path", l.Path, l.Target)
		case seen[l.Path]:
			bad("link %s: given twice", l.Path)
		}
		seen[l.Path] = true
	}
	return errs
}

// dirRule reports whether p is an absolute, clean directory ending in /.
func dirRule(p string) bool {
	return strings.HasPrefix(p, "/") && strings.HasSuffix(p, "/") && (p == "/" || path.Clean(p)+"/" == p)
}

// Set is the definitions known to a build, by name.
type Set map[string]*Definition

// Shipped are the definitions built into the builder
// (api/extensions/*.yaml).
func Shipped() (Set, error) {
	set := Set{}
	ents, err := shipped.ReadDir(".")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		b, err := shipped.ReadFile(e.Name())
		if err != nil {
			return nil, err
		}
		d, err := Parse(b, "extensions/"+e.Name())
		if err != nil {
			return nil, err
		}
		set[d.Name] = d
	}
	return set, nil
}

// ReadDefinitions reads the definitions (*.yaml) in dir.
func ReadDefinitions(dir string) (Set, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("extension definitions: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	set := Set{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		d, err := Parse(b, f)
		if err != nil {
			return nil, err
		}
		set[d.Name] = d
	}
	return set, nil
}

// Names lists the definitions, sorted.
func (s Set) Names() []string {
	out := slices.Sorted(maps.Keys(s))
	return out
}

// PackagesFor returns the package names with the kernel flavour filled in.
func (d *Definition) PackagesFor(flavour string) []string {
	out := make([]string, len(d.Packages))
	for i, p := range d.Packages {
		out[i] = strings.ReplaceAll(p, "{flavour}", flavour)
	}
	return out
}

// Excluded reports whether a package name matches an exclude glob.
func (d *Definition) Excluded(name string) bool {
	for _, e := range d.Exclude {
		if ok, _ := path.Match(e, name); ok {
			return true
		}
	}
	return false
}

// Relocated maps a path through the relocation rules.
func (d *Definition) Relocated(p string) string {
	for _, r := range d.Relocate {
		if strings.HasPrefix(p+"/", r.From) {
			if p+"/" == r.From {
				return strings.TrimSuffix(r.To, "/")
			}
			return r.To + strings.TrimPrefix(p, r.From)
		}
	}
	return p
}

var constraintRE = regexp.MustCompile(`^\s*(>=|<=|>|<|=|!=|~>)?\s*v?(\d+)\.(\d+)(\.\d+)?(-[0-9A-Za-z.-]+)?\s*$`)

// CheckConstraint accepts a version constraint as Talos writes them:
// comma-separated clauses of an operator and a version (">= v1.8.0",
// ">= v1.8.0, < v2.0.0").
func CheckConstraint(c string) error {
	if strings.TrimSpace(c) == "" {
		return fmt.Errorf("empty version constraint")
	}
	for _, clause := range strings.Split(c, ",") {
		if !constraintRE.MatchString(clause) {
			return fmt.Errorf("%q is not a version constraint (want e.g. \">= v1.8.0\")", strings.TrimSpace(clause))
		}
	}
	return nil
}
