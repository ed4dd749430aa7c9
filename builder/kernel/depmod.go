package kernel

import (
	"fmt"
	"maps"
	"path"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Input is a module tree as depmod would find it under
// /lib/modules/<KernelVersion>/.
type Input struct {
	KernelVersion string
	// Files maps paths relative to /lib/modules/<kver>/ (for example
	// "kernel/fs/squashfs/squashfs.ko.xz") to file contents. Paths that
	// are not modules are ignored, as depmod ignores them.
	Files          map[string][]byte
	Builtin        []byte // modules.builtin, optional
	BuiltinModinfo []byte // modules.builtin.modinfo, optional
	Order          []byte // modules.order, optional
}

// OutputFiles are the files Depmod returns, in the order depmod writes
// them (kmod 30; it writes no modules.weakdep).
var OutputFiles = []string{
	"modules.dep", "modules.dep.bin",
	"modules.alias", "modules.alias.bin",
	"modules.softdep",
	"modules.symbols", "modules.symbols.bin",
	"modules.builtin.bin", "modules.builtin.alias.bin",
	"modules.devname",
}

// module is one module in depmod's working set (struct mod in depmod.c).
type module struct {
	relpath    string
	name       string
	uncrelpath string // relpath with the compression suffix cut, for modules.order
	info       *Modinfo
	sortIdx    int
	depSortIdx int
	idx        int
	users      int
	deps       []*module // direct dependencies, in order of first use
	all        []*module // every dependency, sorted as modules.dep lists them
}

// Depmod computes the files kmod 30's `depmod -a` writes into
// /lib/modules/<kver>/ for the given tree, byte for byte. It returns an
// error where depmod would fail (a dependency cycle), where depmod's
// result would depend on directory read order (two modules of one name at
// equal priority), and for a module it cannot read (depmod would list it
// without dependencies).
func Depmod(in Input) (map[string][]byte, error) {
	mods, err := collectModules(in)
	if err != nil {
		return nil, err
	}
	if len(mods) >= 1<<16-1 {
		// depmod numbers modules in 16 bits.
		return nil, fmt.Errorf("kernel: depmod: %d modules, more than depmod supports", len(mods))
	}
	if err := readModules(in, mods); err != nil {
		return nil, err
	}
	sortModules(mods, in.Order)
	owner := symbolOwners(mods)
	if err := resolveDependencies(mods, owner); err != nil {
		return nil, err
	}
	return writeOutputs(in, mods, owner)
}

// collectModules picks the module files of the tree and settles duplicate
// names as depmod does with its default search list ("updates" first).
func collectModules(in Input) ([]*module, error) {
	paths := slices.Sorted(maps.Keys(in.Files))
	byName := make(map[string]*module)
	for _, p := range paths {
		if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") {
			return nil, fmt.Errorf("kernel: depmod: %q: want a clean path relative to /lib/modules/%s", p, in.KernelVersion)
		}
		dirs := strings.Split(p, "/")
		base := dirs[len(dirs)-1]
		if moduleExt(base) == "" || skippedDir(dirs[:len(dirs)-1]) {
			continue
		}
		name := ModuleName(base)
		if name == "" {
			return nil, fmt.Errorf("kernel: depmod: %s: file name gives an empty module name", p)
		}
		m := &module{relpath: p, name: name, sortIdx: 1, depSortIdx: 1<<31 - 1}
		// The path without compression suffix: directory, module name's
		// length of the base name, ".ko" (depmod_module_add).
		m.uncrelpath = p[:len(p)-len(base)+len(name)+len(".ko")]
		old := byName[name]
		if old == nil {
			byName[name] = m
			continue
		}
		switch oldUp, newUp := inUpdates(old.relpath), inUpdates(p); {
		case newUp && !oldUp:
			byName[name] = m
		case oldUp && !newUp:
		default:
			return nil, fmt.Errorf("kernel: depmod: module %s is both %s and %s; depmod would pick one by directory order", name, old.relpath, p)
		}
	}
	mods := make([]*module, 0, len(byName))
	for _, m := range byName {
		mods = append(mods, m)
	}
	// By path, so that the first error reported is always the same one.
	sort.Slice(mods, func(i, j int) bool { return mods[i].relpath < mods[j].relpath })
	return mods, nil
}

// skippedDir reports whether depmod's directory walk would not enter one
// of these directories.
func skippedDir(dirs []string) bool {
	for _, d := range dirs {
		if d == "build" || d == "source" {
			return true
		}
	}
	return false
}

func inUpdates(p string) bool { return strings.HasPrefix(p, "updates/") }

// readModules parses every module, in parallel: decompressing .ko.xz
// trees dominates the run time.
func readModules(in Input, mods []*module) error {
	errs := make([]error, len(mods))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(runtime.GOMAXPROCS(0), len(mods)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				mods[i].info, errs[i] = ReadModinfo(mods[i].relpath, in.Files[mods[i].relpath])
			}
		}()
	}
	for i := range mods {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// sortModules puts the modules in depmod's order: kmod's hash order of
// names, then a stable sort on modules.order position (unlisted modules
// keep hash order, after the listed ones). A modules.order whose last line
// lacks its newline is ignored, as depmod ignores it.
func sortModules(mods []*module, order []byte) {
	names := make([]string, len(mods))
	byName := make(map[string]*module, len(mods))
	for i, m := range mods {
		names[i] = m.name
		byName[m.name] = m
	}
	kmodHashOrder(names, 512)
	for i, n := range names {
		mods[i] = byName[n]
	}
	if order != nil {
		byUncrel := make(map[string]*module, len(mods))
		for _, m := range mods {
			byUncrel[m.uncrelpath] = m
		}
		chunks := fgetsChunks(order)
		ok := true
		for _, c := range chunks {
			if l := cString(c); len(l) > 0 && l[len(l)-1] != '\n' {
				ok = false // "corrupted line misses '\n'"
				break
			}
		}
		if ok {
			total := len(chunks) + 1
			for i, c := range chunks {
				l := cString(c)
				if len(l) == 0 {
					continue
				}
				if m := byUncrel[string(l[:len(l)-1])]; m != nil {
					m.sortIdx = i + 1 - total
				}
			}
			sort.SliceStable(mods, func(i, j int) bool { return mods[i].sortIdx < mods[j].sortIdx })
		}
	}
	for i, m := range mods {
		m.idx = i
	}
}

// symbolOwners maps each exported symbol to its module; a later module
// takes a symbol over, as with kmod's hash_add.
func symbolOwners(mods []*module) map[string]*module {
	owner := make(map[string]*module)
	for _, m := range mods {
		for _, s := range m.info.Exports {
			if s != "" {
				owner[s] = m
			}
		}
	}
	return owner
}

// resolveDependencies links each module to the owners of the symbols it
// needs, then numbers the modules in depmod's topological order.
func resolveDependencies(mods []*module, owner map[string]*module) error {
	for _, m := range mods {
		for _, s := range m.info.Undefined {
			s = strings.TrimPrefix(s, ".") // PPC64: .foo == foo
			o := owner[s]
			if o == nil || containsModule(m.deps, o) {
				continue
			}
			m.deps = append(m.deps, o)
			o.users++
		}
	}
	// depmod_calculate_dependencies: a stack of modules nobody uses yet.
	users := make([]int, len(mods))
	var roots []int
	for i, m := range mods {
		users[i] = m.users
		if users[i] == 0 {
			roots = append(roots, i)
		}
	}
	sorted := 0
	for len(roots) > 0 {
		src := mods[roots[len(roots)-1]]
		roots = roots[:len(roots)-1]
		src.depSortIdx = sorted
		sorted++
		for _, d := range src.deps {
			users[d.idx]--
			if users[d.idx] == 0 {
				roots = append(roots, d.idx)
			}
		}
	}
	if sorted < len(mods) {
		var cyc []string
		for i, m := range mods {
			if users[i] > 0 {
				cyc = append(cyc, m.relpath)
			}
		}
		sort.Strings(cyc)
		return fmt.Errorf("kernel: depmod: modules in dependency cycles: %s", strings.Join(cyc, ", "))
	}
	for _, m := range mods {
		seen := map[*module]bool{}
		var walk func(*module)
		walk = func(x *module) {
			for _, d := range x.deps {
				if !seen[d] {
					seen[d] = true
					m.all = append(m.all, d)
					walk(d)
				}
			}
		}
		walk(m)
		sort.Slice(m.all, func(i, j int) bool { return m.all[i].depSortIdx < m.all[j].depSortIdx })
	}
	return nil
}

func containsModule(list []*module, m *module) bool {
	for _, x := range list {
		if x == m {
			return true
		}
	}
	return false
}

// Indexes writes the module indexes of a module directory's files (by
// path below it: the modules, modules.builtin, modules.builtin.modinfo,
// modules.order) and returns them, with modules.dep parsed.
func Indexes(kver string, files map[string][]byte) (map[string][]byte, map[string][]string, error) {
	mods := map[string][]byte{}
	for rel, b := range files {
		if IsModule(rel) {
			mods[rel] = b
		}
	}
	idx, err := Depmod(Input{KernelVersion: kver, Files: mods,
		Builtin: files["modules.builtin"], BuiltinModinfo: files["modules.builtin.modinfo"], Order: files["modules.order"]})
	if err != nil {
		return nil, nil, fmt.Errorf("depmod for %s: %w", kver, err)
	}
	deps, err := ParseModulesDep(idx["modules.dep"])
	if err != nil {
		return nil, nil, err
	}
	return idx, deps, nil
}
