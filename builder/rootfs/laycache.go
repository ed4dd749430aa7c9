package rootfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"maps"
	"sync"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/internal/blobcache"
	"github.com/nodeforge/builder/pkgbase/rpmfile"
)

// LayCache keeps what laying a package produced, keyed by the RPM's
// sha256, so a rebuild does not decompress, check and hash the payloads of
// packages that did not change. One entry per package holds its manifest
// (nodes without content, scriptlets, ghosts) and the contents of its
// files, one after the other: one file to write and to read.
//
// An entry is written only after the package passed every check of
// AddRPM, from a file the download cache verified against the lock's
// sha256; it is trusted as that cache is. A damaged entry (CRC-32C) is a
// miss: the package is read again. Entries are written in the background;
// Wait before the process ends.
type LayCache struct {
	dir *blobcache.Dir
	wg  sync.WaitGroup
}

// OpenLayCache opens (creating it if needed) the cache in dir.
func OpenLayCache(dir string) (*LayCache, error) {
	d, err := blobcache.Open(dir)
	if err != nil {
		return nil, err
	}
	return &LayCache{dir: d}, nil
}

// Wait returns when every entry being written is written.
func (c *LayCache) Wait() { c.wg.Wait() }

// layManifest is the stored form of a laid package. Nodes carry no Data,
// Origin or Owners; a file's content is Sizes[i] bytes at Offsets[i] of
// the data that follows the manifest.
type layManifest struct {
	Nodes    []Node
	Offsets  []int64
	Sizes    []int64
	Total    int64
	Scripts  []rpmfile.Script
	Triggers []rpmfile.Trigger
	Files    int
	Bytes    int64
	Ghosts   []string
}

// layFormat changes whenever laying or the entry changes meaning, so old
// entries are not read as new ones.
const layFormat = "nodeforge laid package v2"

func (c *LayCache) key(origin report.Origin) [32]byte {
	return sha256.Sum256([]byte(layFormat + "\x00" + origin.RPMSHA256 + "\x00" + origin.Package))
}

// AddRPMCached is AddRPM through the cache c (nil: no cache). The package
// is looked up by origin.RPMSHA256, which must be the sha256 of the file
// at rpmPath; without it the cache is not used.
func (t *Tree) AddRPMCached(rpmPath string, origin report.Origin, opts LayOptions, c *LayCache) (*PackageResult, error) {
	if c == nil || origin.RPMSHA256 == "" {
		return t.AddRPM(rpmPath, origin, opts)
	}
	lp, err := readCached(context.Background(), rpmPath, origin, opts, c)
	if err != nil {
		return nil, err
	}
	if err := t.addLaid(lp, origin); err != nil {
		return nil, err
	}
	return lp.res, nil
}

// readCached reads a package through the cache c (nil: none).
func readCached(ctx context.Context, rpmPath string, origin report.Origin, opts LayOptions, c *LayCache) (*laidPackage, error) {
	if c == nil || origin.RPMSHA256 == "" {
		return readRPM(ctx, rpmPath, origin, opts)
	}
	if lp, ok := c.load(origin, opts); ok {
		return lp, nil
	}
	lp, err := readRPM(ctx, rpmPath, origin, opts)
	if err != nil {
		return nil, err
	}
	c.store(origin, lp)
	return lp, nil
}

func (c *LayCache) load(origin report.Origin, opts LayOptions) (*laidPackage, bool) {
	b, ok := c.dir.Get(c.key(origin))
	if !ok || len(b) < 8 {
		return nil, false
	}
	mlen := binary.LittleEndian.Uint64(b)
	if mlen > uint64(len(b)-8) {
		return nil, false
	}
	data := b[8+mlen:]
	var m layManifest
	if gob.NewDecoder(bytes.NewReader(b[8:8+mlen])).Decode(&m) != nil || len(m.Sizes) != len(m.Nodes) || len(m.Offsets) != len(m.Nodes) {
		return nil, false
	}
	if max := opts.MaxInstallSize; max > 0 && m.Total > max {
		return nil, false // read it again, to be refused with the reason
	}
	lp := &laidPackage{total: m.Total, res: &PackageResult{Scripts: m.Scripts, Triggers: m.Triggers, Files: m.Files, Bytes: m.Bytes, Ghosts: m.Ghosts}}
	for i := range m.Nodes {
		n := &m.Nodes[i]
		n.Origin = origin
		if n.Kind == KindFile {
			off, size := m.Offsets[i], m.Sizes[i]
			if off < 0 || size < 0 || off > int64(len(data)) || size > int64(len(data))-off {
				return nil, false
			}
			n.Data = data[off : off+size : off+size]
		}
		lp.nodes = append(lp.nodes, n)
	}
	return lp, true
}

// store records a package just read, in the background. The nodes are
// copied now: the tree may change them (policies) while the entry is
// written. Failures only cost time later.
func (c *LayCache) store(origin report.Origin, lp *laidPackage) {
	m := layManifest{Total: lp.total, Scripts: lp.res.Scripts, Triggers: lp.res.Triggers, Files: lp.res.Files, Bytes: lp.res.Bytes, Ghosts: lp.res.Ghosts}
	var contents [][]byte
	at := map[string]int64{} // content digest -> offset, for hard links and copies
	var end int64
	for _, n := range lp.nodes {
		cp := *n
		cp.Data, cp.Origin, cp.Owners = nil, report.Origin{}, nil
		cp.Xattrs = maps.Clone(n.Xattrs)
		off, ok := at[n.Digest]
		if n.Kind == KindFile && !ok {
			off, at[n.Digest] = end, end
			contents = append(contents, n.Data)
			end += int64(len(n.Data))
		}
		m.Nodes = append(m.Nodes, cp)
		m.Offsets = append(m.Offsets, off)
		m.Sizes = append(m.Sizes, int64(len(n.Data)))
	}
	key := c.key(origin)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		var buf bytes.Buffer
		buf.Write(make([]byte, 8))
		if gob.NewEncoder(&buf).Encode(&m) != nil {
			return
		}
		head := buf.Bytes()
		binary.LittleEndian.PutUint64(head, uint64(len(head)-8))
		c.dir.PutParts(key, append([][]byte{head}, contents...)...)
	}()
}
