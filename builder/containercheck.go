package builder

import (
	"bytes"
	"debug/elf"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/builder/rootfs"
)

// containerCheck checks one assembled container image for what matters
// when it runs; every failure names the file and the package it came from.
type containerCheck struct {
	tree     *rootfs.Tree
	machines []elf.Machine
	libs     map[string]string // soname -> path, from the image's ld.so.cache
	libPath  []string          // LD_LIBRARY_PATH of the image's env
	bad      []string
	seen     map[string]bool // programs and libraries checked
}

// checkContainer checks that the entrypoint (or cmd) exists and is
// executable for the image's architecture, that its interpreter and the
// libraries it needs (DT_NEEDED, and theirs) resolve inside the image as
// the dynamic loader would find them, that the declared user (and group)
// exist, and that every link's target exists. Setuid files were refused
// before (rootfs.Tree.Enforce).
func checkContainer(t *rootfs.Tree, acc *rootfs.Accounts, im specs.ContainerImage, libraries []string, machines []elf.Machine) error {
	c := &containerCheck{tree: t, machines: machines, libs: map[string]string{}, seen: map[string]bool{}}
	for _, l := range libraries {
		if soname, p, ok := strings.Cut(l, " => "); ok {
			if _, dup := c.libs[soname]; !dup {
				c.libs[soname] = p
			}
		}
	}
	if lp := im.Env["LD_LIBRARY_PATH"]; lp != "" {
		c.libPath = strings.Split(lp, ":")
	}
	what, argv := "entrypoint", im.Entrypoint
	if len(argv) == 0 {
		what, argv = "cmd", im.Cmd
	}
	c.program(what, argv[0], 0)
	if im.Healthcheck != nil {
		c.program("healthcheck", im.Healthcheck.Command[0], 0)
	}
	if im.User != "" { // a layout's config without one: the runtime's root
		c.user(acc, im.User)
	}
	for _, p := range slices.Sorted(maps.Keys(im.Links)) {
		target := im.Links[p]
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(p), target)
		}
		if _, n := t.Resolve(target); n == nil {
			c.fail("links: %s points to %s, which is not in the image", p, im.Links[p])
		}
	}
	if len(c.bad) > 0 {
		return fmt.Errorf("the image would not run: %s", strings.Join(c.bad, "; "))
	}
	return nil
}

func (c *containerCheck) fail(format string, a ...any) {
	c.bad = append(c.bad, fmt.Sprintf(format, a...))
}

// program checks an executable: an ELF file for the machine (with its
// interpreter and libraries), or a script whose #! interpreter is one.
func (c *containerCheck) program(what, p string, depth int) {
	real, n := c.tree.Resolve(p)
	switch {
	case n == nil:
		c.fail("%s %s is not in the image (no package of it ships it)", what, p)
		return
	case n.Kind != rootfs.KindFile:
		c.fail("%s %s is a %s from %s, not a file", what, p, n.Kind, n.Origin)
		return
	case n.Mode&0o111 == 0:
		c.fail("%s %s (mode %04o) from %s is not executable", what, p, n.Mode, n.Origin)
		return
	}
	if c.seen[real] {
		return
	}
	c.seen[real] = true
	if bytes.HasPrefix(n.Data, []byte("#!")) {
		interp := scriptInterpreter(n.Data)
		if interp == "" || depth > 4 {
			c.fail("%s %s from %s: no interpreter on its #! line", what, p, n.Origin)
			return
		}
		c.program(fmt.Sprintf("the interpreter of %s", p), interp, depth+1)
		return
	}
	c.elf(what, p, n)
}

// scriptInterpreter is the program of a script's #! line.
func scriptInterpreter(b []byte) string {
	line, _, _ := bytes.Cut(b[2:], []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// elf checks an ELF executable or library: its machine, its interpreter,
// and every DT_NEEDED library it names, with theirs.
func (c *containerCheck) elf(what, p string, n *rootfs.Node) {
	f, err := elf.NewFile(bytes.NewReader(n.Data))
	if err != nil {
		c.fail("%s %s from %s is neither an ELF file nor a script: %v", what, p, n.Origin, err)
		return
	}
	defer f.Close()
	if !slices.Contains(c.machines, f.Machine) {
		c.fail("%s %s from %s is code for %s, not for the image's architecture", what, p, n.Origin, f.Machine)
		return
	}
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			c.fail("%s %s from %s: its interpreter cannot be read: %v", what, p, n.Origin, err)
			return
		}
		interp := string(bytes.TrimRight(b, "\x00"))
		if _, in := c.tree.Resolve(interp); in == nil || in.Kind != rootfs.KindFile {
			c.fail("%s %s from %s: its ELF interpreter %s is not in the image", what, p, n.Origin, interp)
		}
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		c.fail("%s %s from %s: its dynamic section cannot be read: %v", what, p, n.Origin, err)
		return
	}
	runpath := c.runpath(f, p)
	for _, lib := range needed {
		lp, ln := c.findLibrary(lib, runpath)
		if ln == nil {
			c.fail("%s %s from %s needs %s, which no library directory of the image holds", what, p, n.Origin, lib)
			continue
		}
		if !c.seen[lp] {
			c.seen[lp] = true
			c.elf("library "+lib+" ("+lp+"), needed by "+p+",", lp, ln)
		}
	}
}

// runpath is the DT_RPATH and DT_RUNPATH directories of f, with $ORIGIN
// the directory of p.
func (c *containerCheck) runpath(f *elf.File, p string) []string {
	var out []string
	for _, tag := range []elf.DynTag{elf.DT_RPATH, elf.DT_RUNPATH} {
		vals, _ := f.DynString(tag)
		for _, v := range vals {
			for _, d := range strings.Split(v, ":") {
				d = strings.NewReplacer("${ORIGIN}", path.Dir(p), "$ORIGIN", path.Dir(p)).Replace(d)
				out = append(out, d)
			}
		}
	}
	return out
}

// defaultLibDirs are the dynamic loader's own directories after its
// cache.
var defaultLibDirs = []string{"/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// findLibrary finds a needed library as the dynamic loader does: a name
// with a slash as it is; else the run paths, LD_LIBRARY_PATH, the cache,
// then the default directories.
func (c *containerCheck) findLibrary(lib string, runpath []string) (string, *rootfs.Node) {
	if strings.Contains(lib, "/") {
		return c.file(lib)
	}
	dirs := append(append([]string(nil), runpath...), c.libPath...)
	if p, ok := c.libs[lib]; ok {
		dirs = append(dirs, path.Dir(p))
	}
	for _, d := range append(dirs, defaultLibDirs...) {
		if p, n := c.file(path.Join(d, lib)); n != nil {
			return p, n
		}
	}
	return "", nil
}

// file is the regular file p resolves to, or nil.
func (c *containerCheck) file(p string) (string, *rootfs.Node) {
	real, n := c.tree.Resolve(p)
	if n == nil || n.Kind != rootfs.KindFile {
		return "", nil
	}
	return real, n
}

// user checks the declared user: a name of /etc/passwd, or a UID it
// holds (and a GID /etc/group holds).
func (c *containerCheck) user(acc *rootfs.Accounts, user string) {
	uid, gid, numeric := strings.Cut(user, ":")
	if _, err := strconv.Atoi(uid); err != nil {
		if acc.Users[user] == nil {
			c.fail("user %s is not in the image's /etc/passwd (declare it under users, or install the package that adds it)", user)
		}
		return
	}
	if !slices.ContainsFunc(slices.Collect(maps.Values(acc.Users)), func(a *rootfs.Account) bool { return strconv.Itoa(a.UID) == uid }) {
		c.fail("user %s: no account of the image's /etc/passwd has UID %s (declare one under users)", user, uid)
	}
	if numeric && !slices.ContainsFunc(slices.Collect(maps.Values(acc.Groups)), func(g int) bool { return strconv.Itoa(g) == gid }) {
		c.fail("user %s: no group of the image's /etc/group has GID %s (declare one under groups)", user, gid)
	}
}
