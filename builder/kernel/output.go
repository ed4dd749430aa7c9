package kernel

import (
	"bytes"
	"fmt"
	"strings"
)

// writeOutputs renders every file depmod writes, as depmod_output does.
// modules.builtin.bin and modules.builtin.alias.bin are empty when their
// inputs are absent: depmod creates and renames the file either way.
func writeOutputs(in Input, mods []*module, owner map[string]*module) (map[string][]byte, error) {
	out := make(map[string][]byte, len(OutputFiles))
	var b bytes.Buffer

	// modules.dep and modules.dep.bin
	depIdx := newIndex()
	for _, m := range mods {
		line := depLine(m)
		b.WriteString(line)
		b.WriteByte('\n')
		if err := depIdx.insert(m.name, line, uint32(m.idx)); err != nil {
			return nil, fmt.Errorf("kernel: depmod: %s: %w", m.relpath, err)
		}
	}
	out["modules.dep"] = clone(&b)

	// modules.alias and modules.alias.bin
	aliasIdx := newIndex()
	b.WriteString("# Aliases extracted from modules themselves.\n")
	for _, m := range mods {
		for _, f := range m.info.Fields {
			if f.Key != "alias" {
				continue
			}
			fmt.Fprintf(&b, "alias %s %s\n", f.Value, m.name)
			a, err := normalizeAlias(f.Value)
			if err != nil {
				continue // depmod warns and leaves it out of the index
			}
			if err := aliasIdx.insert(a, m.name, uint32(m.idx)); err != nil {
				return nil, fmt.Errorf("kernel: depmod: %s: %w", m.relpath, err)
			}
		}
	}
	out["modules.alias"] = clone(&b)

	b.WriteString("# Soft dependencies extracted from modules themselves.\n")
	for _, m := range mods {
		for _, f := range m.info.Fields {
			if f.Key == "softdep" {
				fmt.Fprintf(&b, "softdep %s %s\n", m.name, f.Value)
			}
		}
	}
	out["modules.softdep"] = clone(&b)

	// modules.symbols and modules.symbols.bin, in kmod's symbol hash order.
	syms := make([]string, 0, len(owner))
	for s := range owner {
		syms = append(syms, s)
	}
	kmodHashOrder(syms, 2048)
	symIdx := newIndex()
	b.WriteString("# Aliases for symbols, used by symbol_request().\n")
	for _, s := range syms {
		o := owner[s]
		fmt.Fprintf(&b, "alias symbol:%s %s\n", s, o.name)
		if err := symIdx.insert("symbol:"+s, o.name, uint32(o.idx)); err != nil {
			return nil, fmt.Errorf("kernel: depmod: %s: %w", o.relpath, err)
		}
	}
	out["modules.symbols"] = clone(&b)

	for name, idx := range map[string]*indexNode{
		"modules.dep.bin": depIdx, "modules.alias.bin": aliasIdx, "modules.symbols.bin": symIdx,
	} {
		data, err := idx.bytes()
		if err != nil {
			return nil, fmt.Errorf("kernel: depmod: %s: %w", name, err)
		}
		out[name] = data
	}

	out["modules.builtin.bin"] = []byte{}
	if in.Builtin != nil {
		data, err := builtinIndex(in.Builtin)
		if err != nil {
			return nil, err
		}
		out["modules.builtin.bin"] = data
	}
	out["modules.builtin.alias.bin"] = []byte{}
	if in.BuiltinModinfo != nil {
		data, err := builtinAliasIndex(in.BuiltinModinfo)
		if err != nil {
			return nil, err
		}
		out["modules.builtin.alias.bin"] = data
	}

	out["modules.devname"] = devnames(mods)
	return out, nil
}

// depLine is a module's modules.dep line without the newline.
func depLine(m *module) string {
	var s strings.Builder
	s.WriteString(m.relpath)
	s.WriteByte(':')
	for _, d := range m.all {
		s.WriteByte(' ')
		s.WriteString(d.relpath)
	}
	return s.String()
}

// devnames renders modules.devname: modules with a devname: alias and a
// char- or block-major alias, as depmod's output_devname reads them.
func devnames(mods []*module) []byte {
	var b bytes.Buffer
	for _, m := range mods {
		var devname string
		haveDev := false
		var typ byte
		var major, minor uint32
		for _, f := range m.info.Fields {
			if f.Key != "alias" {
				continue
			}
			if strings.HasPrefix(f.Value, "devname:") {
				devname, haveDev = f.Value[len("devname:"):], true
			} else if a, c, ok := scanMajorMinor(f.Value, "char-major-"); ok {
				typ, major, minor = 'c', a, c
			} else if a, c, ok := scanMajorMinor(f.Value, "block-major-"); ok {
				typ, major, minor = 'b', a, c
			}
			if typ != 0 && haveDev {
				break
			}
		}
		if !haveDev || typ == 0 {
			continue // depmod reports a devname without major:minor
		}
		if b.Len() == 0 {
			b.WriteString("# Device nodes to trigger on-demand module loading.\n")
		}
		fmt.Fprintf(&b, "%s %s %c%d:%d\n", m.name, devname, typ, major, minor)
	}
	return append([]byte{}, b.Bytes()...)
}

// clone takes the buffer's bytes and empties it for the next file.
func clone(b *bytes.Buffer) []byte {
	out := append([]byte{}, b.Bytes()...)
	b.Reset()
	return out
}
