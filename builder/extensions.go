package builder

import (
	"bytes"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/nodeforge/builder/extensions"
	"github.com/nodeforge/builder/pkgbase/lock"
	"github.com/nodeforge/builder/rootfs"
	"github.com/nodeforge/builder/specs"
)

// ExtensionReport describes one extension of an architecture.
type ExtensionReport struct {
	Version  string      `json:"version"`
	Packages []string    `json:"packages"`           // laid into the extension (not already in the root filesystem)
	Excluded []string    `json:"excluded,omitempty"` // dependencies left out by the definition
	Modules  bool        `json:"kernelModules"`
	Layer    string      `json:"layer"` // digest of the image layer (manifest.yaml and rootfs/)
	Files    []FileEntry `json:"files"` // below rootfs/, as relocated
}

// extensionBuild is one extension of one architecture.
type extensionBuild struct {
	name     string
	version  string
	metadata extensions.Metadata
	manifest []byte
	tree     *rootfs.Tree // the extension's root filesystem, relocated
	layer    []byte       // tar: manifest.yaml and rootfs/
	report   *ExtensionReport
}

var modulesDirRE = regexp.MustCompile(`^/(?:usr/)?lib/modules/([^/]+)(/|$)`)

// buildExtensions makes every extension component of the spec from its
// locked packages (less those the root filesystem already has), relocated,
// validated and packed as an image layer.
func buildExtensions(s *specs.Spec, a *lock.Arch, paths map[string]string, lc *rootfs.LayCache, as *assembly, owners rootfs.Owners, sde int64) ([]*extensionBuild, error) {
	inRoot := map[string]bool{}
	for _, n := range as.packages {
		inRoot[n] = true
	}
	byNEVRA := map[string]*lock.Package{}
	for i := range a.Packages {
		byNEVRA[a.Packages[i].NEVRA] = &a.Packages[i]
	}
	var kernelPkg *lock.Package
	if as.kernel != nil {
		kernelPkg = byNEVRA[as.kernel.Package]
	}
	var out []*extensionBuild
	for _, name := range s.ComponentNames() {
		if s.Components[name].Kind != "extension" {
			continue
		}
		def := s.Extensions[name]
		if def == nil {
			return nil, fmt.Errorf("extension %s: no definition", name)
		}
		eb, err := buildExtension(def, a.Components[name], inRoot, byNEVRA, paths, lc, as.kernel, kernelPkg, s.KernelFlavour(), owners, sde)
		if err != nil {
			return nil, fmt.Errorf("extension %s: %w", name, err)
		}
		out = append(out, eb)
	}
	return out, nil
}

func buildExtension(def *extensions.Definition, component []string, inRoot map[string]bool, byNEVRA map[string]*lock.Package,
	paths map[string]string, lc *rootfs.LayCache, k *kernelInfo, kernelPkg *lock.Package, flavour string, owners rootfs.Owners, sde int64) (*extensionBuild, error) {
	eb := &extensionBuild{name: def.Name, report: &ExtensionReport{}}
	laid := rootfs.New()
	for _, nevra := range component {
		if inRoot[nevra] {
			continue
		}
		lp := byNEVRA[nevra]
		if lp == nil {
			return nil, fmt.Errorf("component lists %s, which the lock does not pin", nevra)
		}
		if def.Excluded(lp.Name) {
			eb.report.Excluded = append(eb.report.Excluded, nevra)
			continue
		}
		if _, err := laid.AddRPMCached(paths[nevra], rootfs.Origin{Package: nevra, RPMSHA256: lp.SHA256}, rootfs.LayOptions{}, lc); err != nil {
			return nil, err
		}
		eb.report.Packages = append(eb.report.Packages, nevra)
	}
	if len(eb.report.Packages) == 0 {
		return nil, fmt.Errorf("all its packages are in the root filesystem already: nothing to ship")
	}

	// Modules must be built for the locked kernel: signed by its key, for
	// its symbols. The modules directory names the kernel they are for.
	for _, n := range laid.Nodes() {
		m := modulesDirRE.FindStringSubmatch(n.Path)
		if m == nil || n.Kind == rootfs.KindDir {
			continue
		}
		if k == nil {
			return nil, fmt.Errorf("%s ships kernel modules (%s) but the release has no kernel", n.Origin.Package, n.Path)
		}
		if m[1] != k.Version {
			return nil, fmt.Errorf("%s is built for kernel %s, the locked kernel is %s (%s)", n.Origin.Package, m[1], k.Version, k.Package)
		}
		if n.Kind == rootfs.KindFile && isModule(n.Path) {
			eb.report.Modules = true
		}
	}

	drops, err := dropRules([]specs.DropRule{{Name: "extension", Paths: def.Drop}})
	if err != nil {
		return nil, err
	}
	dropped := func(p string) bool {
		for _, re := range drops[0].Patterns {
			if re.MatchString(p) {
				return true
			}
		}
		return false
	}
	// Non-directories move by the relocation rules; directories come along
	// only where something kept lies below them.
	keepDir := map[string]bool{}
	var keep []*rootfs.Node
	for _, n := range laid.Nodes() {
		if n.Kind == rootfs.KindDir || dropped(n.Path) {
			continue
		}
		cp := *n
		cp.Path = def.Relocated(n.Path)
		if cp.LinkGroup != "" {
			cp.LinkGroup = def.Relocated(cp.LinkGroup)
		}
		if cp.Kind == rootfs.KindSymlink && path.IsAbs(cp.Target) {
			cp.Target = def.Relocated(cp.Target)
		}
		keep = append(keep, &cp)
		for d := path.Dir(cp.Path); d != "/"; d = path.Dir(d) {
			keepDir[d] = true
		}
	}
	tree := rootfs.New()
	for _, n := range laid.Nodes() {
		if n.Kind != rootfs.KindDir || dropped(n.Path) {
			continue
		}
		if p := def.Relocated(n.Path); keepDir[p] {
			cp := *n
			cp.Path = p
			if err := tree.Add(&cp); err != nil {
				return nil, err
			}
		}
	}
	for _, n := range keep {
		if err := tree.Add(n); err != nil {
			return nil, err
		}
	}
	for _, f := range def.Files {
		data := []byte(f.Content)
		if err := tree.Replace(&rootfs.Node{Path: f.Path, Kind: rootfs.KindFile, Mode: f.FileMode(), User: "root", Group: "root",
			Data: data, Digest: digest(data), Origin: generated("extension-file")}); err != nil {
			return nil, err
		}
	}

	// The version: the named package's, and the kernel's with modules.
	from := def.VersionFrom
	if from == "" {
		from = def.Packages[0]
	}
	from = strings.ReplaceAll(from, "{flavour}", flavour)
	for _, nevra := range component {
		if p := byNEVRA[nevra]; p != nil && p.Name == from {
			eb.version = p.Version
			break
		}
	}
	if eb.version == "" {
		return nil, fmt.Errorf("version-from %s: no such package among the locked ones", from)
	}
	if eb.report.Modules && kernelPkg != nil {
		eb.version += "-" + kernelPkg.Version
	}
	eb.report.Version = eb.version
	man := extensions.Manifest{Version: extensions.ManifestVersion, Metadata: extensions.Metadata{
		Name: def.Name, Version: eb.version, Author: def.Author, Description: def.Description,
		Compatibility: extensions.Compatibility{Talos: extensions.VersionConstraint{Version: def.Compatibility}},
	}}
	eb.metadata = man.Metadata
	if eb.manifest, err = man.Marshal(); err != nil {
		return nil, err
	}

	// The image tree: manifest.yaml beside rootfs/.
	img := rootfs.New()
	if err := img.Add(&rootfs.Node{Path: "/manifest.yaml", Kind: rootfs.KindFile, Mode: 0o644, User: "root", Group: "root",
		Data: eb.manifest, Digest: digest(eb.manifest), Origin: generated("extension-manifest")}); err != nil {
		return nil, err
	}
	if err := img.Add(&rootfs.Node{Path: "/rootfs", Kind: rootfs.KindDir, Mode: 0o755, User: "root", Group: "root", Origin: generated("implicit-directory")}); err != nil {
		return nil, err
	}
	for _, n := range tree.Nodes() {
		if n.Path == "/" {
			continue
		}
		cp := *n
		cp.Path = "/rootfs" + n.Path
		if cp.LinkGroup != "" {
			cp.LinkGroup = "/rootfs" + cp.LinkGroup
		}
		if err := img.Add(&cp); err != nil {
			return nil, err
		}
	}
	if v := extensions.Validate(imageEntries(img), eb.manifest); len(v) > 0 {
		return nil, fmt.Errorf("the extension is not valid:\n  %s", strings.Join(v, "\n  "))
	}
	var layer bytes.Buffer
	if err := img.WriteTar(&layer, owners, sde); err != nil {
		return nil, err
	}
	eb.layer, eb.tree = layer.Bytes(), tree
	if eb.report.Files, err = treeEntries(tree, owners); err != nil {
		return nil, err
	}
	sort.Strings(eb.report.Packages)
	return eb, nil
}

// imageEntries lists a tree for extensions.Validate.
func imageEntries(t *rootfs.Tree) []extensions.Entry {
	var out []extensions.Entry
	for _, n := range t.Nodes() {
		if n.Path == "/" {
			continue
		}
		typ := map[rootfs.Kind]extensions.EntryType{
			rootfs.KindFile: extensions.TypeFile, rootfs.KindDir: extensions.TypeDir, rootfs.KindSymlink: extensions.TypeSymlink,
			rootfs.KindCharDev: extensions.TypeCharDev, rootfs.KindBlockDev: extensions.TypeBlockDev,
			rootfs.KindFifo: extensions.TypeFifo, rootfs.KindSocket: extensions.TypeSocket,
		}[n.Kind]
		out = append(out, extensions.Entry{Path: strings.TrimPrefix(n.Path, "/"), Type: typ, Mode: n.Mode})
	}
	return out
}
