package kernel

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ModulePaths maps module names to their paths, for the paths of a
// modules.dep map. Names are kmod names ('-' read as '_'), so look them up
// through ModuleName.
func ModulePaths(deps map[string][]string) map[string]string {
	out := make(map[string]string, len(deps))
	for _, p := range sortedPaths(deps) {
		if _, dup := out[ModuleName(p)]; !dup {
			out[ModuleName(p)] = p
		}
	}
	return out
}

// ParseModulesDep reads a modules.dep file into the map Closure takes.
func ParseModulesDep(data []byte) (map[string][]string, error) {
	deps := make(map[string][]string)
	for n, line := range strings.Split(string(data), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		mod, rest, ok := strings.Cut(line, ":")
		if !ok || mod == "" {
			return nil, fmt.Errorf("kernel: modules.dep:%d: no module path before ':'", n+1)
		}
		deps[mod] = strings.Fields(rest)
	}
	return deps, nil
}

// Closure returns every module the wanted ones need, dependencies before
// their users. want holds module names ("virtio_blk", "dm-verity") or
// paths as in modules.dep. For a modules.dep map the order is the one
// `modprobe --show-depends` prints for each wanted module in turn (its
// dependency list reversed, then the module), without repeats; softdeps
// and aliases are not followed.
func Closure(deps map[string][]string, want []string) ([]string, error) {
	names := ModulePaths(deps)
	var out []string
	state := make(map[string]int) // 1: in progress, 2: done
	var visit func(p, from string) error
	visit = func(p, from string) error {
		switch state[p] {
		case 2:
			return nil
		case 1:
			return fmt.Errorf("kernel: closure: dependency cycle through %s", p)
		}
		list, ok := deps[p]
		if !ok {
			return fmt.Errorf("kernel: closure: %s needs %s, which is not in the module list", from, p)
		}
		state[p] = 1
		// modules.dep lists a module's users before what they use;
		// walking it backwards loads the deepest dependency first.
		for i := len(list) - 1; i >= 0; i-- {
			if err := visit(list[i], p); err != nil {
				return err
			}
		}
		state[p] = 2
		out = append(out, p)
		return nil
	}
	for _, w := range want {
		p, ok := w, false
		if _, ok = deps[w]; !ok {
			p, ok = names[ModuleName(w)]
		}
		if !ok || strings.Contains(w, "/") && p != w {
			return nil, fmt.Errorf("kernel: closure: module %q does not exist", w)
		}
		if err := visit(p, w); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func sortedPaths(deps map[string][]string) []string {
	paths := slices.Sorted(maps.Keys(deps))
	return paths
}
