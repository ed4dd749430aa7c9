package rootfs

import (
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/nodeforge/builder/builder/rootfs/sqfs"
	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/pkgbase/cpio"
)

// kindBits are the st_mode type bits of each kind.
var kindBits = map[Kind]uint32{
	KindFile: cpio.TypeReg, KindDir: cpio.TypeDir, KindSymlink: cpio.TypeLink, KindCharDev: cpio.TypeChr,
	KindBlockDev: cpio.TypeBlk, KindFifo: cpio.TypeFifo, KindSocket: cpio.TypeSock,
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
// blocks from cache (when not nil) across builds.
func (t *Tree) WriteSquashfsGo(dst string, owners Owners, mtime int64, opts SquashfsOptions, cache sqfs.BlockCache) error {
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	// A file, not a buffer in front of one: the writer streams the data
	// blocks into it and seeks back for the superblock.
	err = t.WriteSquashfsTo(f, owners, mtime, opts, cache)
	if err == nil {
		atomicfile.StartWriteback(f) // a layout links it, synced
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}

// WriteSquashfsTo writes the image with rootfs/sqfs to w.
func (t *Tree) WriteSquashfsTo(w io.Writer, owners Owners, mtime int64, opts SquashfsOptions, cache sqfs.BlockCache) error {
	es, err := t.SqfsEntries(owners, mtime)
	if err != nil {
		return err
	}
	if err := sqfs.Write(w, es, opts.sqfsOptions(mtime, cache)); err != nil {
		return fmt.Errorf("squashfs: %w", err)
	}
	return nil
}

// SquashfsBytes is the image WriteSquashfsTo writes, in memory (small
// images: extension layers), its data blocks copied in as they are
// compressed (sqfs.Buffer).
func (t *Tree) SquashfsBytes(owners Owners, mtime int64, opts SquashfsOptions, cache sqfs.BlockCache) ([]byte, error) {
	var b sqfs.Buffer
	if err := t.WriteSquashfsTo(&b, owners, mtime, opts, cache); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// sqfsOptions are the Go writer's options; the same for the image and for
// blocks compressed ahead, so they share cache keys.
func (opts SquashfsOptions) sqfsOptions(mtime int64, cache sqfs.BlockCache) sqfs.Options {
	return sqfs.Options{Compressor: opts.Compressor, Level: opts.Level, BlockSize: opts.BlockSize, Workers: opts.Jobs, MkfsTime: mtime, Cache: cache}
}

// NewPrecompressor compresses the whole blocks of files handed to it into
// cache, ahead of WriteSquashfsGo with the same options and cache (see
// sqfs.Precompressor). Give it files with Add; Stop it before writing the
// image.
func NewPrecompressor(opts SquashfsOptions, cache sqfs.BlockCache, workers int) (*Precompressor, error) {
	p, err := sqfs.NewPrecompressor(opts.sqfsOptions(0, cache), workers)
	if err != nil {
		return nil, err
	}
	return &Precompressor{p}, nil
}

// NewHeldBlocks is a cache for a Precompressor whose blocks the images of
// one composition take (sqfs.Held: each block once, nothing kept once
// sealed).
func NewHeldBlocks() *sqfs.Held { return sqfs.NewHeld() }

// Precompressor takes the tree's file nodes.
type Precompressor struct{ p *sqfs.Precompressor }

// Add queues a file node's blocks.
func (p *Precompressor) Add(n *Node) {
	if n.Kind != KindFile || len(n.Digest) != 64 {
		return
	}
	if d, err := hex.DecodeString(n.Digest); err == nil {
		p.p.Add(n.Data, [32]byte(d))
	}
}

// Stop drops what is queued and waits for the blocks in progress.
func (p *Precompressor) Stop() { p.p.Stop() }
