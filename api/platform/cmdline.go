package platform

import (
	"slices"
	"strings"
)

// MetaEnv is the variable of the encoded META values in PREFIX.environment:
// Talos's init passes it to the installer, which writes the values to the
// META partition of the disk it installs to.
const MetaEnv = "INSTALLER_META_BASE64"

// Args are what a command line is made of besides the platform.
type Args struct {
	// Base are the release's arguments (the spec's image.cmdline, Talos's
	// defaults).
	Base []string
	// Meta is the schematic's META values, encoded (see
	// builder/media/meta.Env), for media without a META partition; "" for
	// none.
	Meta string
	// ISO adds PREFIX.halt_if_installed=1: booted from the ISO, the node
	// stops when its disk already holds an installed system.
	ISO bool
	// Extra are the schematic's arguments.
	Extra []string
}

// KernelArgs is the command line of media made for p on goarch (amd64,
// arm64), assembled as Talos's imager assembles it:
//
//  1. PREFIX.platform=NAME and the platform's arguments;
//  2. for the ISO, PREFIX.halt_if_installed=1;
//  3. the release's (a.Base);
//  4. PREFIX.environment=INSTALLER_META_BASE64=<a.Meta> when there are META
//     values;
//  5. the schematic's (a.Extra), which replace the console= and
//     PREFIX.platform= values before them and remove what they negate
//     (-name removes every name=, -name=value that one).
//
// A parameter keeps the place where it first appears and its values stay
// together there, as Talos's go-procfs keeps them: console=tty0 from the
// platform and console=ttyS0 from the release give "console=tty0
// console=ttyS0" at the platform's place.
func (t Table) KernelArgs(p Platform, goarch string, a Args) []string {
	var c cmdline
	c.add(t.Param("platform"), p.Name)
	for _, q := range parseArgs(p.args(t.Prefix, goarch)) {
		c.set(q)
	}
	if a.ISO {
		c.add(t.Param("halt_if_installed"), "1")
	}
	for _, q := range parseArgs(a.Base) {
		c.addAll(q)
	}
	if a.Meta != "" {
		c.add(t.Param("environment"), MetaEnv+"="+a.Meta)
	}
	for _, q := range parseArgs(a.Extra) {
		switch {
		case len(q.key) > 1 && q.key[0] == '-':
			c.remove(q.key[1:], q.values)
		case q.key == "console" || q.key == t.Param("platform"):
			c.set(q)
		default:
			c.addAll(q)
		}
	}
	return c.strings()
}

// param is one kernel parameter and its values in order ("" for a bare
// word).
type param struct {
	key    string
	values []string
}

type cmdline struct{ params []*param }

func (c *cmdline) find(key string) *param {
	for _, p := range c.params {
		if p.key == key {
			return p
		}
	}
	return nil
}

// add appends a value to the parameter, at its place.
func (c *cmdline) add(key, value string) {
	if p := c.find(key); p != nil {
		p.values = append(p.values, value)
		return
	}
	c.params = append(c.params, &param{key: key, values: []string{value}})
}

func (c *cmdline) addAll(q *param) {
	for _, v := range q.values {
		c.add(q.key, v)
	}
}

// set replaces the parameter's values, at its place.
func (c *cmdline) set(q *param) {
	for i, p := range c.params {
		if p.key == q.key {
			c.params[i] = q
			return
		}
	}
	c.params = append(c.params, q)
}

// remove drops the parameter (-key: values [""]) or the values given
// (-key=value).
func (c *cmdline) remove(key string, values []string) {
	for i, p := range c.params {
		if p.key != key {
			continue
		}
		if values[0] == "" {
			c.params = slices.Delete(c.params, i, i+1)
		} else {
			p.values = slices.DeleteFunc(p.values, func(v string) bool { return slices.Contains(values, v) })
		}
		return
	}
}

func (c *cmdline) strings() []string {
	var out []string
	for _, p := range c.params {
		for _, v := range p.values {
			if v == "" {
				out = append(out, p.key)
			} else {
				out = append(out, p.key+"="+v)
			}
		}
	}
	return out
}

// parseArgs reads arguments as Talos does: joined by spaces and split at
// white space, each key=value at its first '=', the values of a key
// gathered at its first place.
func parseArgs(args []string) []*param {
	var c cmdline
	for _, f := range strings.Fields(strings.Join(args, " ")) {
		k, v, _ := strings.Cut(f, "=")
		c.add(k, v)
	}
	return c.params
}
