package builder

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/builder/kernel"
	"github.com/nodeforge/builder/builder/rootfs"
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
// leaves out what its drop rules name, adds its links and files, and
// refuses what cannot move safely: a file that stays outside the
// contract's paths, a link to a dropped file, a text file naming a path
// the relocation moved. Every moved node keeps its package and records
// the path it had there (report.Origin.Path).
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
	var refused []string
	for _, n := range laid.Nodes() {
		if n.Kind == rootfs.KindDir || dropped(n.Path) {
			continue
		}
		cp := *n
		cp.Path = def.Relocated(n.Path)
		if cp.Path != n.Path && n.Origin.Package != "" {
			cp.Origin.Path = n.Path
		}
		if cp.LinkGroup != "" {
			cp.LinkGroup = def.Relocated(cp.LinkGroup)
		}
		if cp.Kind == rootfs.KindSymlink {
			if err := relink(def, laid, dropped, n, &cp); err != nil {
				refused = append(refused, err.Error())
				continue
			}
		}
		if !extensions.Allowed(cp.Path) {
			refused = append(refused, fmt.Sprintf("%s (%s): outside the extension contract's paths and no relocate rule moves it: add a relocate rule, or a drop rule", n.Path, n.Origin))
			continue
		}
		keep = append(keep, &cp)
		for d := path.Dir(cp.Path); d != "/"; d = path.Dir(d) {
			keepDir[d] = true
		}
	}
	refused = append(refused, staleReferences(def, laid, keep)...)
	if len(refused) > 0 {
		return nil, fmt.Errorf("cannot be relocated safely:\n  %s", strings.Join(refused, "\n  "))
	}
	tree := rootfs.New()
	for _, n := range laid.Nodes() {
		if n.Kind != rootfs.KindDir || dropped(n.Path) {
			continue
		}
		if p := def.Relocated(n.Path); keepDir[p] {
			cp := *n
			cp.Path = p
			if p != n.Path && n.Origin.Package != "" {
				cp.Origin.Path = n.Path
			}
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
	return tree, addDefined(def, tree)
}

// addDefined adds the definition's links and files to the extension.
func addDefined(def *extensions.Definition, tree *rootfs.Tree) error {
	for _, l := range def.Links {
		if tree.Get(l.Path) != nil {
			return fmt.Errorf("link %s: the extension already has that path (from %s)", l.Path, tree.Get(l.Path).Origin)
		}
		if err := tree.Add(&rootfs.Node{Path: l.Path, Kind: rootfs.KindSymlink, Mode: 0o777, User: "root", Group: "root",
			Target: l.Target, Origin: generated("extension-link")}); err != nil {
			return err
		}
	}
	for _, f := range def.Files {
		data := []byte(f.Content)
		if err := tree.Replace(&rootfs.Node{Path: f.Path, Kind: rootfs.KindFile, Mode: f.FileMode(), User: "root", Group: "root",
			Data: data, Digest: digest.SHA256Hex(data), Origin: generated("extension-file")}); err != nil {
			return err
		}
	}
	return nil
}

// relink gives a moved symbolic link (cp, laid as n) the place of what it
// named: a target the extension ships goes where the rules move it, one
// it does not (the root's) stays; a relative target stays relative, from
// the link's new directory. A link to a file the drop rules remove would
// dangle: refused.
func relink(def *extensions.Definition, laid *rootfs.Tree, dropped func(string) bool, n, cp *rootfs.Node) error {
	abs := n.Target
	if !path.IsAbs(abs) {
		abs = path.Join(path.Dir(n.Path), abs)
	}
	dest := abs
	if t := laid.Get(abs); t != nil {
		if dropped(abs) {
			return fmt.Errorf("%s (%s): a link to %s, which a drop rule removes: drop the link too", n.Path, n.Origin, abs)
		}
		dest = def.Relocated(abs)
	}
	switch {
	case path.IsAbs(n.Target):
		cp.Target = dest
	case path.Join(path.Dir(cp.Path), n.Target) != dest:
		rel, err := filepath.Rel(path.Dir(cp.Path), dest)
		if err != nil {
			return fmt.Errorf("%s (%s): %w", n.Path, n.Origin, err)
		}
		cp.Target = filepath.ToSlash(rel)
	}
	return nil
}

// staleReferences lists the extension's text files (no NUL byte) that
// name, as an absolute path, something the relocation moved: a file, or a
// directory one of its packages owns. After the move the path names
// nothing; the file is the package's to mend, or the definition's to drop.
// Programs (ELF, NUL bytes) are not read: a path compiled in is a default
// the caller overrides (the node init gives containerd its configuration).
func staleReferences(def *extensions.Definition, laid *rootfs.Tree, keep []*rootfs.Node) []string {
	moved := map[string]string{}
	for _, n := range laid.Nodes() {
		if to := def.Relocated(n.Path); to != n.Path && (n.Kind != rootfs.KindDir || n.Origin.Package != "") {
			moved[n.Path] = to
		}
	}
	olds := slices.Sorted(maps.Keys(moved))
	var out []string
	for _, n := range keep {
		if n.Kind != rootfs.KindFile || bytes.IndexByte(n.Data, 0) >= 0 {
			continue
		}
		for _, old := range olds {
			// A file naming where it was itself (a usage line) names
			// nothing another program follows.
			if old != n.Origin.Path && namesPath(n.Data, old) {
				where := n.Path
				if n.Origin.Path != "" {
					where = n.Origin.Path + ", relocated to " + n.Path
				}
				out = append(out, fmt.Sprintf("%s (%s): names %s, which the relocation moves to %s: a path inside a file is the package's to change; drop the file, or mend the package", where, n.Origin, old, moved[old]))
				break
			}
		}
	}
	return out
}

// namesPath reports whether data holds p as a whole path: not inside a
// longer one, and followed by its end or a path below it.
func namesPath(data []byte, p string) bool {
	for i := 0; ; {
		j := bytes.Index(data[i:], []byte(p))
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(p)
		before := start == 0 || !pathByte(data[start-1]) && data[start-1] != '/'
		after := end == len(data) || !pathByte(data[end])
		if before && after {
			return true
		}
		i = start + 1
	}
}

// pathByte reports whether c continues a file name.
func pathByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._+-", c) >= 0
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
