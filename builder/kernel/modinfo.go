// Package kernel reads Linux kernel modules and computes what depmod
// would write for them, without running any outside tool: the node OS is
// assembled from RPMs whose scriptlets never run, so the module indexes
// must be made declaratively and be byte-identical to kmod's.
package kernel

import (
	"fmt"
	"strings"
)

// Field is one key=value entry of a module's .modinfo section.
type Field struct {
	Key, Value string
}

// Softdep is one softdep= entry: modules to load before and after.
type Softdep struct {
	Raw       string // the value as written, e.g. "pre: crc32c post: foo"
	Pre, Post []string
}

// Modinfo is what a module says about itself.
type Modinfo struct {
	Name     string   // name= (empty on kernels that do not record it)
	Vermagic string   // vermagic=
	License  string   // first license=
	Depends  []string // depends=, split on commas
	Aliases  []string // every alias=, in file order
	Softdeps []Softdep
	Weakdeps []string // weakdep= (kernels 6.9 and later)
	Firmware []string
	// Fields holds every .modinfo entry in file order, split as libkmod
	// splits them (an entry without '=' has the whole text as key and
	// value). depmod's text outputs follow this order.
	Fields []Field
	// Exports are the symbols the module provides, found as depmod finds
	// them: __crc_* symbol names, else the strings of __ksymtab_strings.
	Exports []string
	// Undefined are the symbols the module needs, in symbol table order,
	// then __versions entries nothing referred to (module_layout). depmod
	// derives every dependency from these, never from depends=.
	Undefined []string
}

// ReadModinfo parses a module file. name is its file name or path; its
// suffix (.ko, .ko.gz, .ko.xz, .ko.zst) selects the decompressor, and it
// names the module in errors.
func ReadModinfo(name string, data []byte) (*Modinfo, error) {
	img, err := decompress(name, data)
	if err != nil {
		return nil, err
	}
	m, err := openELF(name, img)
	if err != nil {
		return nil, err
	}
	info, ok := m.section(".modinfo")
	if !ok {
		return nil, fmt.Errorf("kernel: %s: no .modinfo section", name)
	}
	mi := &Modinfo{}
	for _, s := range nulStrings(info) {
		f := Field{Key: s, Value: s}
		if i := strings.IndexByte(s, '='); i >= 0 {
			f = Field{Key: s[:i], Value: s[i+1:]}
		}
		mi.Fields = append(mi.Fields, f)
		mi.addField(f)
	}
	mi.Exports = m.exports()
	mi.Undefined = m.undefined()
	return mi, nil
}

func (mi *Modinfo) addField(f Field) {
	switch f.Key {
	case "name":
		mi.Name = f.Value
	case "vermagic":
		mi.Vermagic = f.Value
	case "license":
		if mi.License == "" {
			mi.License = f.Value
		}
	case "depends":
		for _, d := range strings.Split(f.Value, ",") {
			if d != "" {
				mi.Depends = append(mi.Depends, d)
			}
		}
	case "alias":
		mi.Aliases = append(mi.Aliases, f.Value)
	case "softdep":
		mi.Softdeps = append(mi.Softdeps, parseSoftdep(f.Value))
	case "weakdep":
		mi.Weakdeps = append(mi.Weakdeps, strings.Fields(f.Value)...)
	case "firmware":
		mi.Firmware = append(mi.Firmware, f.Value)
	}
}

// parseSoftdep reads "pre: a b post: c" as modprobe.d does; names before
// any pre:/post: are ignored.
func parseSoftdep(v string) Softdep {
	sd := Softdep{Raw: v}
	var cur *[]string
	for _, t := range strings.Fields(v) {
		switch t {
		case "pre:":
			cur = &sd.Pre
		case "post:":
			cur = &sd.Post
		default:
			if cur != nil {
				*cur = append(*cur, t)
			}
		}
	}
	return sd
}
