package rpmfile

import (
	"fmt"

	"github.com/nodeforge/builder/pkgbase/cpio"
	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// strippedEntries answers the stripped payload entries (07070X) of a
// package from its header, as rpm reads them: the archive names a file by
// its index in the header's file list; name, mode, inode and mtime come
// from the header, and so does the size of the data that follows: a
// regular file's size (LONGFILESIZES: 64 bits), except for the members of
// a hard-link set other than its last, which carry none; a symlink's
// target length; nothing for other types. The header is read on the first
// stripped entry only.
func strippedEntries(h *rpmhdr.Header) func(int) (*cpio.Entry, error) {
	var (
		files []File
		links map[int][]int // file index -> its hard-link set, in index order
		err   error
		read  bool
	)
	return func(i int) (*cpio.Entry, error) {
		if !read {
			read = true
			if files, err = Files(h); err == nil {
				links = hardLinks(h, files)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("file list: %w", err)
		}
		if i < 0 || i >= len(files) {
			return nil, fmt.Errorf("names file index %d, the header lists %d files", i, len(files))
		}
		f := &files[i]
		if f.Ghost {
			return nil, fmt.Errorf("names %s (file index %d), a %%ghost file with no payload data", f.Path, i)
		}
		e := &cpio.Entry{Name: "." + f.Path, Ino: f.Inode, Mode: f.Mode, Nlink: 1, Mtime: f.Mtime,
			RdevMajor: f.Rdev >> 8 & 0xff, RdevMinor: f.Rdev & 0xff}
		switch f.Mode & cpio.TypeMask {
		case cpio.TypeReg:
			e.Size = f.Size
			if set := links[i]; len(set) > 1 {
				// The set is named by its first member, so inodes that
				// differ only by device cannot merge two sets.
				e.Nlink, e.Ino = uint32(len(set)), uint32(set[0])+1
				if set[len(set)-1] != i {
					e.Size = 0
				}
			}
		case cpio.TypeLink:
			e.Size = f.Size
		}
		return e, nil
	}
}

// hardLinks groups the regular, non-ghost files sharing a device and inode
// (FILEDEVICES, FILEINODES), as rpm does; files of no set are left out.
func hardLinks(h *rpmhdr.Header, files []File) map[int][]int {
	devs, inodes := h.Ints(rpmhdr.TagFileDevices), h.Ints(rpmhdr.TagFileInodes)
	if len(devs) != len(files) || len(inodes) != len(files) {
		return nil
	}
	type id struct{ dev, ino int64 }
	sets := map[id][]int{}
	for i, f := range files {
		if f.Mode&cpio.TypeMask != cpio.TypeReg || f.Ghost || inodes[i] <= 0 {
			continue
		}
		k := id{devs[i], inodes[i]}
		sets[k] = append(sets[k], i)
	}
	out := map[int][]int{}
	for _, set := range sets {
		if len(set) > 1 {
			for _, i := range set {
				out[i] = set
			}
		}
	}
	return out
}
