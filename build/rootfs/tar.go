package rootfs

import (
	"archive/tar"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Owners maps owner names to numeric ids, from the image's own passwd and
// group files.
type Owners struct {
	Users  map[string]int
	Groups map[string]int
}

// IDs returns the uid and gid of n; unknown names are an error, since a
// file owned by a user the image does not know would be owned by whoever
// gets that number later.
func (o Owners) IDs(n *Node) (int, int, error) {
	uid, ok := o.Users[n.User]
	if !ok {
		if n.User == "root" {
			uid, ok = 0, true
		} else {
			return 0, 0, fmt.Errorf("%s: owner %q is not in the image's /etc/passwd", n.Path, n.User)
		}
	}
	gid, ok := o.Groups[n.Group]
	if !ok {
		if n.Group == "root" {
			gid = 0
		} else {
			return 0, 0, fmt.Errorf("%s: group %q is not in the image's /etc/group", n.Path, n.Group)
		}
	}
	return uid, gid, nil
}

// WriteTar writes the tree as a tar stream: entries in byte order of their
// paths ("./" first, names relative), the given mtime on everything,
// numeric owners only, hard links as links to their group's first path,
// xattrs as PAX SCHILY.xattr records. Nothing about the host reaches it.
func (t *Tree) WriteTar(w io.Writer, owners Owners, mtime int64) error {
	tw := tar.NewWriter(w)
	mt := time.Unix(mtime, 0).UTC()
	written := map[string]bool{}
	for _, n := range t.Nodes() {
		uid, gid, err := owners.IDs(n)
		if err != nil {
			return err
		}
		name := "." + n.Path
		if n.Path == "/" {
			name = "./"
		}
		h := &tar.Header{Name: name, Mode: int64(n.Mode), Uid: uid, Gid: gid, ModTime: mt, Format: tar.FormatPAX}
		switch n.Kind {
		case KindDir:
			h.Typeflag = tar.TypeDir
			if !strings.HasSuffix(h.Name, "/") {
				h.Name += "/"
			}
		case KindFile:
			h.Typeflag = tar.TypeReg
			h.Size = n.Size()
			if n.LinkGroup != "" && n.LinkGroup != n.Path && written[n.LinkGroup] {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, "."+n.LinkGroup, 0
			}
		case KindSymlink:
			h.Typeflag, h.Linkname = tar.TypeSymlink, n.Target
		case KindCharDev, KindBlockDev:
			h.Typeflag = tar.TypeChar
			if n.Kind == KindBlockDev {
				h.Typeflag = tar.TypeBlock
			}
			h.Devmajor, h.Devminor = int64(n.Rdev>>8), int64(n.Rdev&0xff)
		case KindFifo:
			h.Typeflag = tar.TypeFifo
		case KindSocket:
			continue // tar cannot carry sockets; nothing in a package should
		}
		if len(n.Xattrs) > 0 {
			h.PAXRecords = map[string]string{}
			keys := slices.Sorted(maps.Keys(n.Xattrs))
			for _, k := range keys {
				h.PAXRecords["SCHILY.xattr."+k] = string(n.Xattrs[k])
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("tar %s: %w", n.Path, err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(n.Data); err != nil {
				return err
			}
			written[n.Path] = true
		}
	}
	return tw.Close()
}
