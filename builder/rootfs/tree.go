// Package rootfs holds the node OS's root filesystem as an in-memory tree
// built from RPM payloads, with the package (or builder generator) every
// path came from, the image policies applied to it, and writers that turn
// it into squashfs, cpio and tar without writing the tree to the host.
package rootfs

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/nodeforge/builder/api/report"
)

// Kind is a node's file type.
type Kind uint8

// Node kinds.
const (
	KindFile Kind = iota
	KindDir
	KindSymlink
	KindCharDev
	KindBlockDev
	KindFifo
	KindSocket
)

func (k Kind) String() string {
	return [...]string{"file", "dir", "symlink", "chardev", "blockdev", "fifo", "socket"}[k]
}

// Node is one path of the tree.
type Node struct {
	Path   string // absolute and clean: "/usr/bin/x"; the root is "/"
	Kind   Kind
	Mode   uint32 // permission bits including setuid, setgid, sticky (07777)
	User   string // owner names as the package gave them
	Group  string
	Data   []byte // file content (shared between identical files)
	Digest string // sha256 of Data, hex (files only)
	Target string // symlink target
	Rdev   uint32 // device number (devices only)
	Xattrs map[string][]byte
	// LinkGroup is non-empty for hard-linked files: every member carries the
	// smallest path of the group.
	LinkGroup string
	// Flags from the package: config, doc, ghost.
	Config, Doc bool
	// Origin is the first package that shipped the path; Owners lists every
	// package that shipped it identically (shared directories, same files).
	Origin report.Origin
	Owners []report.Origin
	// FileDigest is the digest the package header recorded for the file,
	// with its algorithm, kept for traceability reports.
	FileDigest, FileDigestAlgo string
}

// Size is the content size of a file node.
func (n *Node) Size() int64 { return int64(len(n.Data)) }

// Tree is the root filesystem.
type Tree struct {
	nodes map[string]*Node
}

// New returns a tree holding only the root directory.
func New() *Tree {
	t := &Tree{nodes: map[string]*Node{}}
	t.nodes["/"] = &Node{Path: "/", Kind: KindDir, Mode: 0o755, User: "root", Group: "root", Origin: report.Origin{Generator: "implicit-directory"}}
	return t
}

// ConflictError reports two origins shipping one path differently.
type ConflictError struct {
	Path   string
	First  report.Origin
	Second report.Origin
	What   string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s: %s and %s both ship it, with different %s", e.Path, e.First, e.Second, e.What)
}

// ErrThroughSymlink marks a path whose parent is a symlink.
var ErrThroughSymlink = errors.New("would write through a symlink")

// CleanPath validates a path from a payload and returns it absolute and
// clean. It refuses empty names, absolute names (payload names are
// relative, "./usr/..."), and any ".." component.
func CleanPath(name string) (string, error) {
	if name == "" || name == "." || name == "./" {
		return "", fmt.Errorf("empty entry name %q", name)
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("absolute entry name %q", name)
	}
	if strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("entry name with a NUL byte %q", name)
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", fmt.Errorf("entry name %q climbs out with ..", name)
		}
	}
	p := path.Clean("/" + strings.TrimPrefix(name, "./"))
	if p == "/" {
		return "", fmt.Errorf("empty entry name %q", name)
	}
	return p, nil
}

// Get returns the node at p.
func (t *Tree) Get(p string) *Node { return t.nodes[p] }

// Resolve follows p inside the tree as the kernel would in the image:
// absolute link targets start at the tree's root. It returns the
// canonical path and node, or nil (missing, ENOTDIR, ELOOP).
func (t *Tree) Resolve(p string) (string, *Node) {
	cur, comps, hops := "/", strings.Split(p, "/"), 0
	for len(comps) > 0 {
		if n := t.Get(cur); n == nil || n.Kind != KindDir {
			return "", nil
		}
		c := comps[0]
		comps = comps[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		n := t.Get(next)
		if n == nil {
			return "", nil
		}
		if n.Kind == KindSymlink {
			if hops++; hops > 40 || n.Target == "" { // MAXSYMLINKS
				return "", nil
			}
			if strings.HasPrefix(n.Target, "/") {
				cur = "/"
			}
			comps = append(strings.Split(n.Target, "/"), comps...)
			continue
		}
		cur = next
	}
	return cur, t.Get(cur)
}

// Len is the number of nodes, the root included.
func (t *Tree) Len() int { return len(t.nodes) }

// Add inserts n. Missing parent directories are created (mode 0755,
// root:root, generator "implicit-directory"). A parent that is a symlink
// or a non-directory is refused. An existing node at the same path is
// fine when both are directories or both are identical (content, mode,
// owner, target); anything else is a *ConflictError.
func (t *Tree) Add(n *Node) error {
	if n.Path == "" || n.Path[0] != '/' || path.Clean(n.Path) != n.Path || n.Path == "/" {
		return fmt.Errorf("invalid path %q", n.Path)
	}
	if err := t.mkParents(path.Dir(n.Path), n.Origin); err != nil {
		return fmt.Errorf("%s: %w", n.Path, err)
	}
	old, ok := t.nodes[n.Path]
	if !ok {
		n.Owners = []report.Origin{n.Origin}
		t.nodes[n.Path] = n
		return nil
	}
	if old.Kind == KindDir && n.Kind == KindDir {
		if old.Origin.Generator == "implicit-directory" {
			// A package that ships the directory defines it.
			n.Owners = append([]report.Origin{n.Origin}, old.Owners[1:]...)
			t.nodes[n.Path] = n
			return nil
		}
		// Packages may ship a shared directory with different modes; the
		// package that sorts first defines it, whatever order they came in.
		if n.Origin.Package != "" && n.Origin.Package < old.Origin.Package {
			n.Owners = append([]report.Origin{n.Origin}, old.Owners...)
			t.nodes[n.Path] = n
			return nil
		}
		old.Owners = append(old.Owners, n.Origin)
		return nil
	}
	if what := differs(old, n); what != "" {
		return &ConflictError{Path: n.Path, First: old.Origin, Second: n.Origin, What: what}
	}
	old.Owners = append(old.Owners, n.Origin)
	return nil
}

// Replace puts n at its path whatever was there (generators use it).
func (t *Tree) Replace(n *Node) error {
	if err := t.mkParents(path.Dir(n.Path), n.Origin); err != nil {
		return fmt.Errorf("%s: %w", n.Path, err)
	}
	n.Owners = []report.Origin{n.Origin}
	t.nodes[n.Path] = n
	return nil
}

func differs(a, b *Node) string {
	switch {
	case a.Kind != b.Kind:
		return fmt.Sprintf("types (%s, %s)", a.Kind, b.Kind)
	case a.Kind == KindFile && !bytes.Equal(a.Data, b.Data):
		return "content"
	case a.Target != b.Target:
		return fmt.Sprintf("symlink targets (%s, %s)", a.Target, b.Target)
	case a.Mode != b.Mode:
		return fmt.Sprintf("modes (%04o, %04o)", a.Mode, b.Mode)
	case a.User != b.User || a.Group != b.Group:
		return fmt.Sprintf("owners (%s:%s, %s:%s)", a.User, a.Group, b.User, b.Group)
	case a.Rdev != b.Rdev:
		return "device numbers"
	case !xattrsEqual(a.Xattrs, b.Xattrs):
		return "extended attributes"
	}
	return ""
}

func xattrsEqual(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func (t *Tree) mkParents(dir string, o report.Origin) error {
	if dir == "/" {
		return nil
	}
	if n, ok := t.nodes[dir]; ok {
		switch n.Kind {
		case KindDir:
			return nil
		case KindSymlink:
			return fmt.Errorf("%w %s -> %s", ErrThroughSymlink, dir, n.Target)
		default:
			return fmt.Errorf("parent %s is a %s, not a directory", dir, n.Kind)
		}
	}
	if err := t.mkParents(path.Dir(dir), o); err != nil {
		return err
	}
	imp := report.Origin{Generator: "implicit-directory"}
	t.nodes[dir] = &Node{Path: dir, Kind: KindDir, Mode: 0o755, User: "root", Group: "root", Origin: imp, Owners: []report.Origin{imp}}
	return nil
}

// Remove deletes p and everything below it, returning the bytes of file
// content removed (hard-linked content counted once).
func (t *Tree) Remove(p string) int64 {
	var freed int64
	seen := map[string]bool{}
	for q, n := range t.nodes {
		if q == p || strings.HasPrefix(q, p+"/") {
			if n.Kind == KindFile && (n.LinkGroup == "" || !seen[n.LinkGroup]) {
				freed += n.Size()
				seen[n.LinkGroup] = n.LinkGroup != ""
			}
			delete(t.nodes, q)
		}
	}
	return freed
}

// Paths returns every path in C-locale (byte) order.
func (t *Tree) Paths() []string {
	out := slices.Sorted(maps.Keys(t.nodes))
	return out
}

// Nodes returns every node in path order.
func (t *Tree) Nodes() []*Node {
	ps := t.Paths()
	out := make([]*Node, len(ps))
	for i, p := range ps {
		out[i] = t.nodes[p]
	}
	return out
}
