package kernel

import (
	"fmt"
	"strings"
)

// pathMax is PATH_MAX, the size of the line and name buffers in depmod.
const pathMax = 4096

// ModuleName returns the kmod module name of a path or name: the base name
// up to its first '.', with '-' turned into '_' (kmod's
// modname_normalize), so "kernel/drivers/md/dm-verity.ko.xz" and
// "dm-verity" both give "dm_verity".
func ModuleName(path string) string {
	base := path[strings.LastIndexByte(path, '/')+1:]
	if i := strings.IndexByte(base, '.'); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// normalizeAlias is kmod's alias_normalize: '-' becomes '_' except inside
// a [...] range, and an unmatched bracket is an error. Like kmod it works
// in a PATH_MAX buffer, so a longer alias is cut to 4095 bytes.
func normalizeAlias(alias string) (string, error) {
	b := []byte(alias)
	i := 0
	for ; i < len(b) && i < pathMax-1; i++ {
		switch b[i] {
		case '-':
			b[i] = '_'
		case ']':
			return "", fmt.Errorf("unmatched bracket in alias %q", alias)
		case '[':
			j := strings.IndexByte(alias[i:], ']')
			if j < 0 {
				return "", fmt.Errorf("unmatched bracket in alias %q", alias)
			}
			i += j
			if i >= pathMax-1 {
				// kmod would write past its buffer here.
				return "", fmt.Errorf("alias with a bracket past byte %d", pathMax-1)
			}
		}
	}
	return string(b[:i]), nil
}
