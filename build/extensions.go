package build

import (
	"bytes"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/build/kernel"
	"github.com/nodeforge/builder/build/rootfs"
	"github.com/nodeforge/builder/internal/digest"
)

// extensionBuild is one extension of one architecture.
type extensionBuild struct {
	name         string
	version      string
	descriptions map[string]string // by language: the image's annotations
	metadata     extensions.Metadata
	manifest     []byte
	tree         *rootfs.Tree // the extension's root filesystem, relocated
	layer        []byte       // tar: manifest.yaml and rootfs/
	report       *report.ExtensionReport
}

// buildExtensions makes every extension component of the spec from its
// locked packages (less those the root filesystem already has), relocated,
// validated and packed as an image layer.
func (b *archBuild) buildExtensions() ([]*extensionBuild, error) {
	s, a, as := b.spec, b.locked, b.as
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
		eb, err := b.buildExtension(def, a.Components[name], inRoot, byNEVRA, kernelPkg)
		if err != nil {
			return nil, fmt.Errorf("extension %s: %w", name, err)
		}
		out = append(out, eb)
	}
	return out, nil
}

// buildExtension makes one extension: its packages that the root
// filesystem lacks, laid, checked against the kernel, relocated and packed
// with its manifest.
func (b *archBuild) buildExtension(def *extensions.Definition, component []string, inRoot map[string]bool, byNEVRA map[string]*lock.Package, kernelPkg *lock.Package) (*extensionBuild, error) {
	eb := &extensionBuild{name: def.Name, descriptions: def.Descriptions, report: &report.ExtensionReport{}}
	laid, err := b.layExtension(eb, def, component, inRoot, byNEVRA)
	if err != nil {
		return nil, err
	}
	tree, err := relocate(def, laid)
	if err != nil {
		return nil, err
	}
	if err := eb.setVersion(def, component, byNEVRA, b.spec.KernelFlavour(), kernelPkg); err != nil {
		return nil, err
	}
	if err := eb.pack(tree, b.owners, b.sde); err != nil {
		return nil, err
	}
	sort.Strings(eb.report.Packages)
	return eb, nil
}

// layExtension lays the extension's packages that the root filesystem
// lacks, and checks that its kernel modules are for the locked kernel.
func (b *archBuild) layExtension(eb *extensionBuild, def *extensions.Definition, component []string, inRoot map[string]bool, byNEVRA map[string]*lock.Package) (*rootfs.Tree, error) {
	laid := rootfs.New()
	k := b.as.kernel
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
		if _, err := laid.AddRPMCached(b.paths[nevra], report.Origin{Package: nevra, RPMSHA256: lp.SHA256}, rootfs.LayOptions{}, b.layCache); err != nil {
			return nil, err
		}
		eb.report.Packages = append(eb.report.Packages, nevra)
	}
	if len(eb.report.Packages) == 0 {
		return nil, fmt.Errorf("all its packages are in the root filesystem already: nothing to ship")
	}
	if err := laid.CheckMachines(b.target.Machines()); err != nil {
		return nil, err
	}

	// Modules must be built for the locked kernel: signed by its key, for
	// its symbols. The modules directory names the kernel they are for.
	for _, n := range laid.Nodes() {
		ver := kernel.ModuleDirVersion(n.Path)
		if ver == "" || n.Kind == rootfs.KindDir {
			continue
		}
		if k == nil {
			return nil, fmt.Errorf("%s ships kernel modules (%s) but the release has no kernel", n.Origin.Package, n.Path)
		}
		if ver != k.Version {
			return nil, fmt.Errorf("%s is built for kernel %s, the locked kernel is %s (%s)", n.Origin.Package, ver, k.Version, k.Package)
		}
		if n.Kind == rootfs.KindFile && kernel.IsModule(n.Path) {
			eb.report.Modules = true
		}
	}
	return laid, nil
}

// relocate moves the laid files by the definition's relocation rules,
// leaves out what its drop rules name, and adds its own files.
func relocate(def *extensions.Definition, laid *rootfs.Tree) (*rootfs.Tree, error) {
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
			Data: data, Digest: digest.SHA256Hex(data), Origin: generated("extension-file")}); err != nil {
			return nil, err
		}
	}
	return tree, nil
}

// setVersion gives the extension the version of the package its
// definition names, and the kernel's with modules, and writes its
// manifest.
func (eb *extensionBuild) setVersion(def *extensions.Definition, component []string, byNEVRA map[string]*lock.Package, flavour string, kernelPkg *lock.Package) error {
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
		return fmt.Errorf("version-from %s: no such package among the locked ones", from)
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
	var err error
	eb.manifest, err = man.Marshal()
	return err
}

// pack makes the extension's image layer: manifest.yaml beside rootfs/,
// validated as the node will check it.
func (eb *extensionBuild) pack(tree *rootfs.Tree, owners rootfs.Owners, sde int64) error {
	img := rootfs.New()
	if err := img.Add(&rootfs.Node{Path: "/manifest.yaml", Kind: rootfs.KindFile, Mode: 0o644, User: "root", Group: "root",
		Data: eb.manifest, Digest: digest.SHA256Hex(eb.manifest), Origin: generated("extension-manifest")}); err != nil {
		return err
	}
	if err := img.Add(&rootfs.Node{Path: "/rootfs", Kind: rootfs.KindDir, Mode: 0o755, User: "root", Group: "root", Origin: generated("implicit-directory")}); err != nil {
		return err
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
			return err
		}
	}
	if v := extensions.Validate(imageEntries(img), eb.manifest); len(v) > 0 {
		return fmt.Errorf("the extension is not valid:\n  %s", strings.Join(append(v, extensions.Hints(v)...), "\n  "))
	}
	var layer bytes.Buffer
	if err := img.WriteTar(&layer, owners, sde); err != nil {
		return err
	}
	eb.layer, eb.tree = layer.Bytes(), tree
	var err error
	eb.report.Files, err = treeEntries(tree, owners)
	return err
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
