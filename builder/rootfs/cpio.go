package rootfs

import (
	"fmt"
	"io"
	"sort"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/pkgbase/cpio"
)

// CpioEntry is one member of an initramfs archive.
type CpioEntry struct {
	Name   string // relative, no leading "/" ("init", "lib/modules/...")
	Mode   uint32 // type bits and permissions, as st_mode
	Data   []byte // file content or symlink target
	Rdev   uint32 // device number (major<<8 | minor) for device nodes
	Origin report.Origin
}

// WriteCpio writes a cpio newc archive the way an initramfs must be made
// reproducibly: entries sorted by name (C locale), owner 0:0, the given
// mtime, inode numbers assigned in order, then the trailer.
func WriteCpio(w io.Writer, entries []CpioEntry, mtime int64) error {
	es := append([]CpioEntry(nil), entries...)
	sort.Slice(es, func(i, j int) bool { return es[i].Name < es[j].Name })
	for i := 1; i < len(es); i++ {
		if es[i].Name == es[i-1].Name {
			return fmt.Errorf("initramfs: %s appears twice", es[i].Name)
		}
	}
	var off int64
	var zeros [4]byte
	put := func(b []byte) error {
		n, err := w.Write(b)
		off += int64(n)
		return err
	}
	pad := func() error { return put(zeros[:(4-off%4)%4]) }
	write := func(name string, ino, mode uint32, nlink uint32, data []byte, rdev uint32) error {
		hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
			ino, mode, 0, 0, nlink, uint32(mtime), len(data), 0, 0, rdev>>8, rdev&0xff, len(name)+1, 0)
		// The data is written as it is, not copied: rootfs.sqsh is large.
		for _, b := range [][]byte{append(append([]byte(hdr), name...), 0), data} {
			if err := put(b); err != nil {
				return err
			}
			if err := pad(); err != nil {
				return err
			}
		}
		return nil
	}
	for i, e := range es {
		nlink := uint32(1)
		if e.Mode&cpio.TypeMask == cpio.TypeDir {
			nlink = 2
		}
		if err := write(e.Name, uint32(i+1), e.Mode, nlink, e.Data, e.Rdev); err != nil {
			return err
		}
	}
	return write("TRAILER!!!", 0, 0, 1, nil, 0)
}
