package rootfs

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/nodeforge/builder/internal/blobcache"
	"github.com/nodeforge/builder/rootfs/sqfs"
)

// kindBits are the st_mode type bits of each kind.
var kindBits = map[Kind]uint32{
	KindFile: 0o100000, KindDir: 0o040000, KindSymlink: 0o120000, KindCharDev: 0o020000,
	KindBlockDev: 0o060000, KindFifo: 0o010000, KindSocket: 0o140000,
}

// SqfsEntries converts the tree into entries for the Go squashfs writer:
// numeric owners, one mtime, hard links pointing at the first remaining
// member of their group.
func (t *Tree) SqfsEntries(owners Owners, mtime int64) ([]sqfs.Entry, error) {
	groups := map[string][]string{}
	for _, n := range t.Nodes() {
		if n.Kind == KindFile && n.LinkGroup != "" {
			groups[n.LinkGroup] = append(groups[n.LinkGroup], n.Path)
		}
	}
	for _, g := range groups {
		sort.Strings(g)
	}
	var out []sqfs.Entry
	for _, n := range t.Nodes() {
		uid, gid, err := owners.IDs(n)
		if err != nil {
			return nil, err
		}
		e := sqfs.Entry{Path: n.Path, Mode: kindBits[n.Kind] | n.Mode, UID: uint32(uid), GID: uint32(gid), Mtime: mtime,
			Data: n.Data, Target: n.Target, Rdev: n.Rdev, Xattrs: n.Xattrs}
		if n.Kind == KindFile && len(n.Digest) == 64 {
			if d, err := hex.DecodeString(n.Digest); err == nil {
				e.Digest = [32]byte(d)
			}
		}
		if g := groups[n.LinkGroup]; len(g) > 1 && g[0] != n.Path {
			e = sqfs.Entry{Path: n.Path, HardlinkTo: g[0]}
		}
		out = append(out, e)
	}
	return out, nil
}

// WriteSquashfsGo writes the image with rootfs/sqfs, reusing compressed
// blocks from cacheDir (when not empty) across builds.
func (t *Tree) WriteSquashfsGo(dst string, owners Owners, mtime int64, opts SquashfsOptions, cacheDir string) error {
	es, err := t.SqfsEntries(owners, mtime)
	if err != nil {
		return err
	}
	o := sqfs.Options{Compressor: opts.Compressor, Level: opts.Level, BlockSize: opts.BlockSize, Workers: opts.Jobs, MkfsTime: mtime}
	if cacheDir != "" {
		c, err := blobcache.Open(cacheDir)
		if err != nil {
			return err
		}
		o.Cache = c
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = sqfs.Write(bw, es, o)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("squashfs: %w", err)
	}
	return os.Rename(tmp, dst)
}
