package kernel

import "fmt"

// builtinIndex builds modules.builtin.bin from modules.builtin the way
// depmod's output_builtin_bin does: one key per line, the module name of
// the line's last path component, empty value, priority 0.
func builtinIndex(builtin []byte) ([]byte, error) {
	idx := newIndex()
	var modname string
	have := false
	for _, chunk := range fgetsChunks(builtin) {
		line := cString(chunk)
		if len(line) == 0 || !isAlpha(line[0]) {
			continue // depmod reports "Invalid modules.builtin line"
		}
		base := line
		for i := len(line) - 1; i >= 0; i-- {
			if line[i] == '/' {
				base = line[i+1:]
				break
			}
		}
		// depmod leaves its name buffer unchanged on an empty base name.
		if len(base) > 0 {
			modname, have = ModuleName(string(base)), true
		}
		if !have {
			continue
		}
		if err := idx.insert(modname, "", 0); err != nil {
			return nil, fmt.Errorf("kernel: modules.builtin: %w", err)
		}
	}
	return idx.bytes()
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// builtinAliasIndex builds modules.builtin.alias.bin from
// modules.builtin.modinfo (NUL-separated "module.key=value" entries) as
// depmod's output_builtin_alias_bin does, quirks included.
func builtinAliasIndex(modinfo []byte) ([]byte, error) {
	idx := newIndex()
	s := &cStream{b: modinfo}
	for !s.eof {
		modname := s.flushTo('.')
		if modname == "" {
			continue
		}
		if s.flushTo('=') != "alias" {
			s.flush(0)
			continue
		}
		value := s.flushTo(0)
		if value == "" {
			continue
		}
		alias, err := normalizeAlias(value)
		if err != nil {
			continue // depmod warns and skips
		}
		if err := idx.insert(alias, modname, 0); err != nil {
			return nil, fmt.Errorf("kernel: modules.builtin.modinfo: module %s: %w", modname, err)
		}
	}
	return idx.bytes()
}
