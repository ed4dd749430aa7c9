// Package specs holds release specs: which package base a release is built
// from (repositories, formats, components, keyrings) and which packages each
// part of the node OS draws from it. The shipped specs for ALT branches are
// embedded; every value in them can be overridden.
package specs

import (
	"bytes"
	"cmp"
	"embed"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/schematic"
)

// Spec is one release spec.
type Spec struct {
	// Name identifies the spec, usually the branch ("p11").
	Name string `yaml:"name" json:"name"`
	// Branch is the package base branch; ALT's best-candidate order prefers
	// packages whose disttag names it.
	Branch string `yaml:"branch" json:"branch"`
	// Version is the node OS release version.
	Version string `yaml:"version" json:"version"`
	// Architectures to build, e.g. [x86_64, aarch64].
	Architectures []string `yaml:"architectures" json:"architectures"`
	// Repositories of the package base.
	Repositories []Repository `yaml:"repositories" json:"repositories"`
	// Components: the package set of each part of the node OS.
	Components map[string]Component `yaml:"components" json:"components"`
	// Excludes are package name globs never chosen.
	Excludes []string `yaml:"excludes,omitempty" json:"excludes,omitempty"`
	// MultiVersion are regexps of names that may be installed side by side.
	MultiVersion []string `yaml:"multiversion,omitempty" json:"multiversion,omitempty"`
	// Image says how the node OS image is assembled.
	Image Image `yaml:"image,omitempty" json:"image"`
	// ExtensionsDir holds extension definitions (*.yaml) that add to or
	// replace the shipped ones (extensions/), relative to the spec.
	ExtensionsDir string `yaml:"extensions-dir,omitempty" json:"extensionsDir,omitempty"`
	// ExtensionsNamespace is how clients of the Image Factory name the
	// release's extensions: NAMESPACE/NAME (default "siderolabs", as Talos
	// names its own, so Talos clients work unchanged).
	ExtensionsNamespace string `yaml:"extensions-namespace,omitempty" json:"extensionsNamespace,omitempty"`
	// ExtensionAliases are other namespaces a schematic may name the
	// extensions in (e.g. siderolabs, for a release in its own namespace).
	ExtensionAliases []string `yaml:"extension-aliases,omitempty" json:"extensionAliases,omitempty"`
	// Images are container images built from the same base (see
	// ContainerImage), by name.
	Images map[string]ContainerImage `yaml:"images,omitempty" json:"images,omitempty"`
	// Channels say where releases are published (dev, prod); default: a
	// local OCI layout per channel beside the spec.
	Channels map[string]Channel `yaml:"channels,omitempty" json:"channels,omitempty"`

	// Extensions are the definitions, shipped and from ExtensionsDir; an
	// extension component without packages takes its definition's.
	Extensions extensions.Set `yaml:"-" json:"-"`

	// Dir is the directory of the spec file; relative paths resolve there.
	Dir string `yaml:"-" json:"-"`
	// Raw is the spec file's bytes as read.
	Raw []byte `yaml:"-" json:"-"`
}

// Repository is one repository of the base.
type Repository struct {
	Name string `yaml:"name" json:"name"`
	// URL is the repository root: for ALT the directory holding the dists
	// (".../p11/branch"), for rpm-md the directory holding repodata/.
	URL string `yaml:"url" json:"url"`
	// Format is "alt" (apt-rpm) or "rpm-md".
	Format string `yaml:"format" json:"format"`
	// Dists (ALT only) are the dist directories under URL; "{arch}" is
	// replaced by each architecture. Default ["{arch}", "noarch"].
	Dists []string `yaml:"dists,omitempty" json:"dists,omitempty"`
	// Components (ALT only) to read; empty means all the release lists.
	Components []string `yaml:"components,omitempty" json:"components,omitempty"`
	// Keyring files (armored or binary) that verify the repository.
	Keyring []string `yaml:"keyring,omitempty" json:"keyring,omitempty"`
	// Fingerprints, when set, pin which keys of the keyring may sign it.
	Fingerprints []string `yaml:"fingerprints,omitempty" json:"fingerprints,omitempty"`
	// SpecURL is URL as the spec wrote it (relative paths unresolved): the
	// lock records it, so a lock does not depend on where the spec lives.
	SpecURL string `yaml:"-" json:"-"`
	// OriginalURL is SpecURL before a command-line override moved the
	// repository; builds relocate the lock's package URLs from it.
	OriginalURL string `yaml:"-" json:"-"`
	// Verify is the trust mode: "all" (the default) verifies the index's
	// signature (base/release, repodata/repomd.xml.asc) and every package's;
	// "packages" (rpm-md only: Fedora's and Rocky's repositories sign their
	// packages, not repomd.xml) reads an unsigned repomd.xml but requires
	// every package signed, over its payload, by a key of the keyring.
	Verify string `yaml:"verify,omitempty" json:"verify,omitempty"`
	// InsecureSkipVerify accepts an unsigned repository (tests only).
	InsecureSkipVerify bool `yaml:"insecure-skip-verify,omitempty" json:"insecureSkipVerify,omitempty"`
}

// Trust modes of a repository (Repository.Verify).
const (
	VerifyAll      = "all"
	VerifyPackages = "packages"
)

// Component is the package set of one part (rootfs, kernel, installer, an extension).
type Component struct {
	// Kind is "rootfs", "kernel", "installer" or "extension".
	Kind string `yaml:"kind" json:"kind"`
	// Packages to install; an extension component may leave them to its
	// definition (extensions/<name>.yaml).
	Packages []string `yaml:"packages" json:"packages"`
}

//go:embed *.yaml
var shipped embed.FS

// Shipped lists the names of the embedded specs.
func Shipped() []string {
	ents, _ := shipped.ReadDir(".")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// LoadShipped returns an embedded spec by branch name.
func LoadShipped(name string) (*Spec, error) {
	b, err := shipped.ReadFile(name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no shipped spec for branch %q (have %s)", name, strings.Join(Shipped(), ", "))
	}
	return Parse(b, "", nil)
}

// Load reads and validates a spec file, with the extension definitions of
// its extensions-dir.
func Load(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	// The spec names its extension directory: read that much of it first.
	var head struct {
		ExtensionsDir string `yaml:"extensions-dir"`
	}
	yaml.Unmarshal(b, &head) // a broken spec is reported by Parse
	var defs extensions.Set
	if head.ExtensionsDir != "" {
		dir := head.ExtensionsDir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(abs, dir)
		}
		if defs, err = extensions.ReadDefinitions(dir); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	s, err := Parse(b, abs, defs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse parses and validates spec bytes; dir resolves relative paths, and
// defs are the definitions read from the spec's extensions-dir (Load reads
// them), besides the shipped ones. Parse reads nothing itself.
func Parse(b []byte, dir string, defs extensions.Set) (*Spec, error) {
	var s Spec
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errors.New("the spec is empty: a release spec names the release (name, version, architectures), its package base (repositories) and its components; see the shipped specs (builder lock --branch p11) or write an example with builder demo-base DIR")
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if s.ExtensionsDir != "" && defs == nil {
		return nil, fmt.Errorf("extensions-dir %s: the definitions there were not read (read the spec with specs.Load)", s.ExtensionsDir)
	}
	s.Dir, s.Raw = dir, b
	var err error
	if s.Extensions, err = extensions.Shipped(); err != nil {
		return nil, err
	}
	for name, d := range defs {
		s.Extensions[name] = d
	}
	if err := s.normalize(); err != nil {
		return nil, err
	}
	return &s, nil
}

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]*$`)

// namespaceRe is what an extension namespace may be: an OCI repository
// path component.
var namespaceRe = regexp.MustCompile(`^[a-z0-9]+(?:[._-][a-z0-9]+)*$`)

// checkNamespaces checks the extension namespace and its aliases.
func (s *Spec) checkNamespaces(bad func(string, ...any)) {
	for _, ns := range append([]string{s.ExtensionsNamespace}, s.ExtensionAliases...) {
		if ns != "" && !namespaceRe.MatchString(ns) {
			bad("extension namespace %q: want lower-case letters, digits, . _ -", ns)
		}
	}
	// The namespace a spec without one has is the default's.
	ns := cmp.Or(s.ExtensionsNamespace, schematic.DefaultNamespace)
	for i, a := range s.ExtensionAliases {
		switch {
		case a == "" || a == ns:
			bad("extension-aliases: %q is not another namespace", a)
		case slices.Contains(s.ExtensionAliases[:i], a):
			bad("extension-aliases: %q is listed twice", a)
		}
	}
}

func (s *Spec) normalize() error {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	if !nameRe.MatchString(s.Name) {
		bad("name %q: want letters, digits, . _ + -", s.Name)
	}
	if s.Branch == "" {
		s.Branch = s.Name
	}
	s.checkNamespaces(bad)
	if s.Version == "" {
		bad("version is required")
	}
	if len(s.Architectures) == 0 {
		bad("architectures: at least one is required")
	}
	for _, a := range s.Architectures {
		if !nameRe.MatchString(a) || a == "noarch" {
			bad("architecture %q is not valid", a)
		}
	}
	if len(s.Repositories) == 0 {
		bad("repositories: at least one is required")
	}
	seen := map[string]bool{}
	for i := range s.Repositories {
		r := &s.Repositories[i]
		if !nameRe.MatchString(r.Name) {
			bad("repository %d: name %q is not valid", i+1, r.Name)
		}
		if seen[r.Name] {
			bad("repository %q is listed twice", r.Name)
		}
		seen[r.Name] = true
		if r.URL == "" {
			bad("repository %q: url is required", r.Name)
		}
		switch r.Format {
		case "alt":
			if len(r.Dists) == 0 {
				r.Dists = []string{"{arch}", "noarch"}
			}
		case "rpm-md":
		default:
			bad("repository %q: format %q: want alt or rpm-md", r.Name, r.Format)
		}
		switch r.Verify {
		case "":
			r.Verify = VerifyAll
		case VerifyAll:
		case VerifyPackages:
			if r.Format != "rpm-md" {
				bad("repository %q: verify: packages is for rpm-md repositories (an ALT base/release is always signed)", r.Name)
			}
			if r.InsecureSkipVerify {
				bad("repository %q: verify: packages verifies every package; it cannot go with insecure-skip-verify", r.Name)
			}
		default:
			bad("repository %q: verify %q: want all or packages", r.Name, r.Verify)
		}
		if len(r.Keyring) == 0 && !r.InsecureSkipVerify {
			bad("repository %q: a keyring is required (or insecure-skip-verify: true)", r.Name)
		}
		for j, k := range r.Keyring {
			r.Keyring[j] = s.Path(k)
		}
		r.SpecURL = r.URL
		if !strings.Contains(r.URL, "://") {
			r.URL = s.Path(r.URL)
		}
		for j, f := range r.Fingerprints {
			r.Fingerprints[j] = normalFingerprint(f)
		}
	}
	if len(s.Components) == 0 {
		bad("components: at least one is required")
	}
	for name, c := range s.Components {
		if c.Kind == "extension" && s.Extensions != nil {
			def := s.Extensions[name]
			if def == nil {
				bad("component %q: no extension definition of that name (have %s)", name, strings.Join(s.Extensions.Names(), ", "))
			} else if len(c.Packages) == 0 {
				c.Packages = def.PackagesFor(s.KernelFlavour())
				s.Components[name] = c
			}
		}
		if !nameRe.MatchString(name) {
			bad("component %q: name is not valid", name)
		}
		switch c.Kind {
		case "rootfs", "kernel", "installer", "extension":
		default:
			bad("component %q: kind %q: want rootfs, kernel, installer or extension", name, c.Kind)
		}
		if len(c.Packages) == 0 {
			bad("component %q lists no packages", name)
		}
	}
	for _, m := range s.MultiVersion {
		if _, err := regexp.Compile(m); err != nil {
			bad("multiversion %q: %v", m, err)
		}
	}
	for _, e := range s.Excludes {
		if _, err := filepath.Match(e, ""); err != nil {
			bad("exclude %q: %v", e, err)
		}
	}
	s.Image.normalize(s, bad)
	s.normalizeImages(bad)
	s.normalizeChannels(bad)
	if len(errs) > 0 {
		return errors.New("spec: " + strings.Join(errs, "; "))
	}
	return nil
}

// KernelFlavour is the flavour of the kernel component's image package
// (kernel-image-std-def gives std-def; image.kernel first, when it names
// one), or "" without one.
func (s *Spec) KernelFlavour() string {
	if f, ok := strings.CutPrefix(s.Image.Kernel, "kernel-image-"); ok {
		return f
	}
	for _, name := range s.ComponentNames() {
		if c := s.Components[name]; c.Kind == "kernel" {
			for _, p := range c.Packages {
				if f, ok := strings.CutPrefix(p, "kernel-image-"); ok {
					return f
				}
			}
		}
	}
	return ""
}

// Path resolves p relative to the spec's directory.
func (s *Spec) Path(p string) string {
	if p == "" || filepath.IsAbs(p) || s.Dir == "" {
		return p
	}
	return filepath.Join(s.Dir, p)
}

// LockPath is where the spec's lock lives unless told otherwise:
// <spec dir>/<name>.lock.json (the working directory for a shipped spec).
func (s *Spec) LockPath() string { return filepath.Join(s.dirOrDot(), s.Name+".lock.json") }

// OutDir is where its build goes unless told otherwise: <spec dir>/out.
func (s *Spec) OutDir() string { return filepath.Join(s.dirOrDot(), "out") }

func (s *Spec) dirOrDot() string {
	if s.Dir == "" {
		return "."
	}
	return s.Dir
}

// ComponentNames returns the component names sorted.
func (s *Spec) ComponentNames() []string {
	out := slices.Sorted(maps.Keys(s.Components))
	return out
}

// DistURLs returns the dist URLs of an ALT repository for arch.
func (r *Repository) DistURLs(arch string) []string {
	var out []string
	for _, d := range r.DistNames(arch) {
		out = append(out, strings.TrimRight(r.URL, "/")+"/"+d)
	}
	return out
}

// DistNames returns the dist directories of an ALT repository for arch.
func (r *Repository) DistNames(arch string) []string {
	var out []string
	for _, d := range r.Dists {
		out = append(out, strings.ReplaceAll(d, "{arch}", arch))
	}
	return out
}

// Override applies NAME=URL and NAME=KEYRING overrides from the command
// line: a repository given keyrings verifies with those files only (all of
// them: a perimeter's subset needs its own key and the base's).
func (s *Spec) Override(urls map[string]string, keyrings map[string][]string) error {
	for name, u := range urls {
		r := s.repo(name)
		if r == nil {
			return fmt.Errorf("no repository %q in spec %s", name, s.Name)
		}
		if r.OriginalURL == "" {
			r.OriginalURL = r.SpecURL
		}
		r.URL, r.SpecURL = u, u
	}
	for name, k := range keyrings {
		r := s.repo(name)
		if r == nil {
			return fmt.Errorf("no repository %q in spec %s", name, s.Name)
		}
		r.Keyring = slices.Clone(k)
	}
	return nil
}

// normalFingerprint is a fingerprint as the keyring prints it: upper-case
// hex, the groups of its usual display joined.
func normalFingerprint(f string) string { return strings.ToUpper(strings.ReplaceAll(f, " ", "")) }

// fingerprintRE is an OpenPGP v4 (40 hex digits) or v5/v6 (64) fingerprint.
var fingerprintRE = regexp.MustCompile(`^([0-9A-F]{40}|[0-9A-F]{64})$`)

// Pin adds NAME=FINGERPRINT pins from the command line to the spec's: a
// key the spec does not pin may then sign the repository (a perimeter's
// key signing the indexes of a subset). A repository that pins nothing
// accepts any key of its keyring already, and a pin makes it pin.
func (s *Spec) Pin(fingerprints map[string][]string) error {
	for _, name := range slices.Sorted(maps.Keys(fingerprints)) {
		r := s.repo(name)
		if r == nil {
			return fmt.Errorf("no repository %q in spec %s", name, s.Name)
		}
		for _, f := range fingerprints[name] {
			f = normalFingerprint(f)
			if !fingerprintRE.MatchString(f) {
				return fmt.Errorf("repository %s: fingerprint %q: want 40 or 64 hex digits", name, f)
			}
			if !slices.Contains(r.Fingerprints, f) {
				r.Fingerprints = append(r.Fingerprints, f)
			}
		}
	}
	return nil
}

func (s *Spec) repo(name string) *Repository {
	for i := range s.Repositories {
		if s.Repositories[i].Name == name {
			return &s.Repositories[i]
		}
	}
	return nil
}
