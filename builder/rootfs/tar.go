package rootfs

import (
	"archive/tar"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodeforge/builder/internal/digest"
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
	return t.WriteTarBodies(w, owners, mtime, nil)
}

// Body is a file's content held out of its tree (*bytes.Reader is one;
// a UKI laid out, uki.Image, another): written once, by WriteTarBodies.
type Body interface {
	Size() int64
	WriteTo(w io.Writer) (int64, error)
}

// WriteTarBodies is WriteTar with the content of the files that bodies
// names (by path) taken from there instead of their nodes' Data: an
// installer's layer carries an initramfs and a UKI of 150 MB or more,
// which are written from where they are without a copy in a tree.
func (t *Tree) WriteTarBodies(w io.Writer, owners Owners, mtime int64, bodies map[string]Body) error {
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
			if b := bodies[n.Path]; b != nil {
				h.Size = b.Size()
			}
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
			var err error
			if b := bodies[n.Path]; b != nil {
				_, err = b.WriteTo(tw)
			} else {
				_, err = tw.Write(n.Data)
			}
			if err != nil {
				return fmt.Errorf("tar %s: %w", n.Path, err)
			}
			written[n.Path] = true
		}
	}
	return tw.Close()
}

// ReadTar reads a tar stream as WriteTar writes it (names relative to
// "./", numeric owners, hard links to their group's first path, xattrs as
// SCHILY.xattr PAX records) into a tree. Owners are kept as numbers
// (User "0"); NumericOwners maps them. Entries outside the tree (".."
// and absolute names are cleaned into it), unknown types and files over
// maxFile bytes are refused.
func ReadTar(r io.Reader, maxFile int64) (*Tree, error) {
	return ReadTarSkipping(r, maxFile, nil)
}

// ReadTarSkipping is ReadTar leaving out the data of the files skip
// names (skip nil: none): their nodes are in the tree, with no data, for
// the caller to replace or remove (an installer's layer has its
// initramfs and UKI replaced: reading the release's, 300 MB, would be
// for nothing). A hard link to a skipped file is refused.
func ReadTarSkipping(r io.Reader, maxFile int64, skip func(path string) bool) (*Tree, error) {
	return readTar(r, maxFile, skip, nil)
}

// ReadTarFeeding is ReadTar handing each file's node to onFile as soon as
// its data is read (a Precompressor's Add: its blocks are compressed
// while the rest of the tar is read).
func ReadTarFeeding(r io.Reader, maxFile int64, onFile func(*Node)) (*Tree, error) {
	return readTar(r, maxFile, nil, onFile)
}

func readTar(r io.Reader, maxFile int64, skip func(path string) bool, onFile func(*Node)) (*Tree, error) {
	t := New()
	skipped := map[string]bool{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return t, nil
		}
		if err != nil {
			return nil, fmt.Errorf("tar: %w", err)
		}
		p := path.Clean("/" + h.Name)
		n := &Node{Path: p, Mode: uint32(h.Mode) & 0o7777, User: strconv.Itoa(h.Uid), Group: strconv.Itoa(h.Gid)}
		switch h.Typeflag {
		case tar.TypeDir:
			n.Kind = KindDir
		case tar.TypeReg:
			if h.Size > maxFile {
				return nil, fmt.Errorf("tar: %s: %d bytes, more than %d", p, h.Size, maxFile)
			}
			n.Kind = KindFile
			if skip != nil && skip(p) {
				skipped[p] = true // tr.Next skips its data
				break
			}
			n.Data = make([]byte, h.Size)
			if _, err := io.ReadFull(tr, n.Data); err != nil {
				return nil, fmt.Errorf("tar: %s: %w", p, err)
			}
			n.Digest = digest.SHA256Hex(n.Data)
			if onFile != nil {
				onFile(n)
			}
		case tar.TypeLink:
			to := t.Get(path.Clean("/" + h.Linkname))
			if to == nil || to.Kind != KindFile {
				return nil, fmt.Errorf("tar: %s: hard link to %s, which is not a file before it", p, h.Linkname)
			}
			if skipped[to.Path] {
				return nil, fmt.Errorf("tar: %s: hard link to %s, whose data is left out", p, h.Linkname)
			}
			if to.LinkGroup == "" {
				to.LinkGroup = to.Path
			}
			n.Kind, n.Data, n.Digest, n.LinkGroup = KindFile, to.Data, to.Digest, to.LinkGroup
			n.Mode, n.User, n.Group, n.Xattrs = to.Mode, to.User, to.Group, to.Xattrs
		case tar.TypeSymlink:
			n.Kind, n.Target = KindSymlink, h.Linkname
		case tar.TypeChar, tar.TypeBlock:
			n.Kind = KindCharDev
			if h.Typeflag == tar.TypeBlock {
				n.Kind = KindBlockDev
			}
			n.Rdev = uint32(h.Devmajor)<<8 | uint32(h.Devminor)
		case tar.TypeFifo:
			n.Kind = KindFifo
		default:
			return nil, fmt.Errorf("tar: %s: entry type %q is not one a tree holds", p, h.Typeflag)
		}
		for k, v := range h.PAXRecords {
			if name, ok := strings.CutPrefix(k, "SCHILY.xattr."); ok && h.Typeflag != tar.TypeLink {
				if n.Xattrs == nil {
					n.Xattrs = map[string][]byte{}
				}
				n.Xattrs[name] = []byte(v)
			}
		}
		if p == "/" {
			root := t.Get("/")
			root.Mode, root.User, root.Group, root.Xattrs = n.Mode, n.User, n.Group, n.Xattrs
			continue
		}
		if err := t.Add(n); err != nil {
			return nil, fmt.Errorf("tar: %w", err)
		}
	}
}

// NumericOwners maps the owners of a tree read by ReadTar ("0", "1000")
// to their numbers, and root to 0.
func NumericOwners(trees ...*Tree) Owners {
	o := Owners{Users: map[string]int{"root": 0}, Groups: map[string]int{"root": 0}}
	for _, t := range trees {
		for _, n := range t.Nodes() {
			if id, err := strconv.Atoi(n.User); err == nil {
				o.Users[n.User] = id
			}
			if id, err := strconv.Atoi(n.Group); err == nil {
				o.Groups[n.Group] = id
			}
		}
	}
	return o
}
