package sqfs

import (
	"maps"
	"math"
	"path"
	"slices"
	"strings"
)

// st_mode type bits.
const (
	sIFMT   = 0o170000
	sIFSOCK = 0o140000
	sIFLNK  = 0o120000
	sIFREG  = 0o100000
	sIFBLK  = 0o060000
	sIFDIR  = 0o040000
	sIFCHR  = 0o020000
	sIFIFO  = 0o010000
)

// Basic squashfs inode types; the extended type of each is this plus 7.
const (
	typeDir     = 1
	typeFile    = 2
	typeSymlink = 3
	typeBlock   = 4
	typeChar    = 5
	typeFifo    = 6
	typeSocket  = 7
)

const (
	maxNameLen    = 256  // SQUASHFS_NAME_LEN: the kernel refuses longer names
	maxSymlinkLen = 4095 // the kernel refuses symlink inodes larger than a page
)

// node is one name in the tree; hard links are several nodes sharing an
// inode.
type node struct {
	name     string
	path     string
	children []*node // directories only, sorted by name bytes as the kernel's lookup requires
	ino      *inode
	linkTo   string // HardlinkTo of the entry
}

// inode is one squashfs inode.
type inode struct {
	e      *Entry
	typ    uint16 // basic type
	num    uint32 // 1..count, assigned in write order
	nlink  uint32
	dir    *node  // directories: the node whose children are listed
	parent *inode // directories: the parent directory (nil for the root)

	// Filled while writing.
	file  *fileLayout
	xattr uint32
	ref   uint64 // inode table reference: block position << 16 | offset
	done  bool
}

type tree struct {
	root *node
	// inodes in write order: inodes[i].num == i+1. A directory comes after
	// everything below it, because its inode points at its listing, which
	// points at the inodes of its children.
	inodes []*inode
	// files are the regular file inodes in the same order: the order of
	// their data in the image.
	files []*inode
}

// buildTree validates the entries and arranges them as a tree.
func buildTree(entries []Entry) (*tree, error) {
	byPath := make(map[string]*node, len(entries))
	for i := range entries {
		e := &entries[i]
		if err := checkEntry(e); err != nil {
			return nil, err
		}
		if _, dup := byPath[e.Path]; dup {
			return nil, errf(e.Path, "listed twice")
		}
		n := &node{path: e.Path, name: path.Base(e.Path), linkTo: e.HardlinkTo}
		if e.HardlinkTo == "" {
			n.ino = &inode{e: e, typ: basicType(e.Mode), nlink: 1}
		}
		byPath[e.Path] = n
	}
	root, ok := byPath["/"]
	if !ok {
		return nil, errf("/", "the root directory is not among the entries")
	}
	if root.ino == nil || root.ino.typ != typeDir {
		return nil, errf("/", "the root is not a directory")
	}
	root.name = ""
	paths := slices.Sorted(maps.Keys(byPath))
	// Resolve hard links to the inode of the entry they name.
	for _, p := range paths {
		n := byPath[p]
		if n.ino != nil {
			continue
		}
		t := n
		for hops := 0; t.ino == nil; hops++ {
			next, ok := byPath[t.linkTo]
			if !ok {
				return nil, errf(p, "hard link to %s, which is not among the entries", t.linkTo)
			}
			if hops > len(byPath) {
				return nil, errf(p, "hard links form a cycle")
			}
			t = next
		}
		if t.ino.typ == typeDir {
			return nil, errf(p, "hard link to directory %s", t.path)
		}
		n.ino = t.ino
		n.ino.nlink++
	}
	// Attach every node to its parent. In sorted path order siblings
	// differ only in their last component, so children lists come out
	// sorted by name bytes, the order the kernel's lookup relies on.
	for _, p := range paths {
		if p == "/" {
			continue
		}
		n := byPath[p]
		pp := path.Dir(p)
		parent, ok := byPath[pp]
		if !ok {
			return nil, errf(p, "parent directory %s is not among the entries", pp)
		}
		if parent.ino.typ != typeDir {
			return nil, errf(p, "parent %s is not a directory", pp)
		}
		parent.children = append(parent.children, n)
		if n.ino.typ == typeDir {
			n.ino.dir = n
		}
	}
	root.ino.dir = root
	t := &tree{root: root}
	t.number(root, nil)
	if len(t.inodes) > math.MaxUint32-1 {
		return nil, errTooLarge
	}
	return t, nil
}

// number assigns inode numbers in write order (post-order) and records
// the order of file data.
func (t *tree) number(d *node, parent *inode) {
	for _, c := range d.children {
		if c.ino.typ == typeDir {
			t.number(c, d.ino)
			continue
		}
		if c.ino.num != 0 {
			continue // another name of a hard-linked inode, met before
		}
		t.inodes = append(t.inodes, c.ino)
		c.ino.num = uint32(len(t.inodes))
		if c.ino.typ == typeFile {
			t.files = append(t.files, c.ino)
		}
	}
	d.ino.parent = parent
	d.ino.nlink = 2
	for _, c := range d.children {
		if c.ino.typ == typeDir {
			d.ino.nlink++
		}
	}
	t.inodes = append(t.inodes, d.ino)
	d.ino.num = uint32(len(t.inodes))
}

func basicType(mode uint32) uint16 {
	switch mode & sIFMT {
	case sIFDIR:
		return typeDir
	case sIFREG:
		return typeFile
	case sIFLNK:
		return typeSymlink
	case sIFBLK:
		return typeBlock
	case sIFCHR:
		return typeChar
	case sIFIFO:
		return typeFifo
	case sIFSOCK:
		return typeSocket
	}
	return 0
}

// checkEntry refuses what the format or the kernel cannot represent.
func checkEntry(e *Entry) error {
	p := e.Path
	if p == "" || p[0] != '/' || path.Clean(p) != p {
		return errf(p, "path is not absolute and clean")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return errf(p, "path contains a NUL byte")
	}
	for _, c := range strings.Split(p[1:], "/") {
		if len(c) > maxNameLen {
			return errf(p, "name %.40q... is %d bytes, squashfs allows %d", c, len(c), maxNameLen)
		}
	}
	if e.HardlinkTo != "" {
		if e.HardlinkTo == p {
			return errf(p, "hard link to itself")
		}
		return nil
	}
	typ := basicType(e.Mode)
	if typ == 0 {
		return errf(p, "mode %o has no file type bits", e.Mode)
	}
	if e.Mtime < 0 || e.Mtime > math.MaxUint32 {
		return errf(p, "mtime %d does not fit in 32 unsigned bits", e.Mtime)
	}
	if typ != typeFile && len(e.Data) > 0 {
		return errf(p, "has data but is not a regular file")
	}
	if typ == typeSymlink {
		if e.Target == "" {
			return errf(p, "symlink with an empty target")
		}
		if len(e.Target) > maxSymlinkLen {
			return errf(p, "symlink target is %d bytes, the kernel reads at most %d", len(e.Target), maxSymlinkLen)
		}
	} else if e.Target != "" {
		return errf(p, "has a link target but is not a symlink")
	}
	for k, v := range e.Xattrs {
		if _, _, ok := xattrPrefix(k); !ok {
			return errf(p, "xattr %q: squashfs stores only user., trusted. and security. attributes", k)
		}
		if len(k) > xattrNameMax || len(v) > xattrSizeMax {
			return errf(p, "xattr %q: name or value longer than Linux allows", k)
		}
	}
	return nil
}
