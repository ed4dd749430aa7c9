package rootfs

import (
	"bytes"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"path/filepath"

	"github.com/nodeforge/builder/internal/blobcache"
	"github.com/nodeforge/builder/pkgbase/rpmfile"
)

// LayCache keeps what laying a package produced, keyed by the RPM's
// sha256, so a rebuild does not decompress, check and hash the payloads of
// packages that did not change: a manifest per package (its nodes without
// content, scriptlets, ghosts) and every file's content by its sha256.
//
// An entry is written only after the package passed every check of
// AddRPM, from a file the download cache verified against the lock's
// sha256; it is trusted as that cache is. Damaged entries (CRC-32C) and
// missing contents are misses: the package is read again.
type LayCache struct {
	manifests, files *blobcache.Dir
}

// OpenLayCache opens (creating them if needed) dir/laid and dir/files.
func OpenLayCache(dir string) (*LayCache, error) {
	m, err := blobcache.Open(filepath.Join(dir, "laid"))
	if err != nil {
		return nil, err
	}
	f, err := blobcache.Open(filepath.Join(dir, "files"))
	if err != nil {
		return nil, err
	}
	return &LayCache{manifests: m, files: f}, nil
}

// layManifest is the stored form of a laid package. Nodes carry no Data,
// Origin or Owners; Sizes holds each node's content size.
type layManifest struct {
	Nodes    []Node
	Sizes    []int64
	Total    int64
	Scripts  []rpmfile.Script
	Triggers []rpmfile.Trigger
	Files    int
	Bytes    int64
	Ghosts   []string
}

// layFormat changes whenever laying or the manifest changes meaning, so
// old entries are not read as new ones.
const layFormat = "nodeforge laid package v1"

func (c *LayCache) key(origin Origin) [32]byte {
	return sha256.Sum256([]byte(layFormat + "\x00" + origin.RPMSHA256 + "\x00" + origin.Package))
}

// AddRPMCached is AddRPM through the cache c (nil: no cache). The package
// is looked up by origin.RPMSHA256, which must be the sha256 of the file
// at rpmPath; without it the cache is not used.
func (t *Tree) AddRPMCached(rpmPath string, origin Origin, opts LayOptions, c *LayCache) (*PackageResult, error) {
	if c == nil || origin.RPMSHA256 == "" {
		return t.AddRPM(rpmPath, origin, opts)
	}
	lp, ok := c.load(origin, opts)
	if !ok {
		var err error
		if lp, err = readRPM(rpmPath, origin, opts); err != nil {
			return nil, err
		}
		c.store(origin, lp)
	}
	if err := t.addLaid(lp, origin); err != nil {
		return nil, err
	}
	return lp.res, nil
}

func (c *LayCache) load(origin Origin, opts LayOptions) (*laidPackage, bool) {
	b, ok := c.manifests.Get(c.key(origin))
	if !ok {
		return nil, false
	}
	var m layManifest
	if gob.NewDecoder(bytes.NewReader(b)).Decode(&m) != nil || len(m.Sizes) != len(m.Nodes) {
		return nil, false
	}
	if max := opts.MaxInstallSize; max > 0 && m.Total > max {
		return nil, false // read it again, to be refused with the reason
	}
	lp := &laidPackage{total: m.Total, res: &PackageResult{Scripts: m.Scripts, Triggers: m.Triggers, Files: m.Files, Bytes: m.Bytes, Ghosts: m.Ghosts}}
	byDigest := map[string][]byte{}
	for i := range m.Nodes {
		n := &m.Nodes[i]
		n.Origin = origin
		if n.Kind == KindFile {
			data, seen := byDigest[n.Digest]
			if !seen {
				key, err := hex.DecodeString(n.Digest)
				if err != nil || len(key) != 32 {
					return nil, false
				}
				if m.Sizes[i] == 0 {
					data = []byte{}
				} else if data, ok = c.files.Get([32]byte(key)); !ok {
					return nil, false
				}
				byDigest[n.Digest] = data
			}
			if int64(len(data)) != m.Sizes[i] {
				return nil, false
			}
			n.Data = data
		}
		lp.nodes = append(lp.nodes, n)
	}
	return lp, true
}

// store records a package just read. Failures only cost time later.
func (c *LayCache) store(origin Origin, lp *laidPackage) {
	m := layManifest{Total: lp.total, Scripts: lp.res.Scripts, Triggers: lp.res.Triggers, Files: lp.res.Files, Bytes: lp.res.Bytes, Ghosts: lp.res.Ghosts}
	stored := map[string]bool{}
	for _, n := range lp.nodes {
		cp := *n
		cp.Data, cp.Origin, cp.Owners = nil, Origin{}, nil
		m.Nodes = append(m.Nodes, cp)
		m.Sizes = append(m.Sizes, int64(len(n.Data)))
		if n.Kind == KindFile && len(n.Data) > 0 && !stored[n.Digest] {
			stored[n.Digest] = true
			key, err := hex.DecodeString(n.Digest)
			if err != nil || len(key) != 32 {
				return
			}
			c.files.Put([32]byte(key), n.Data)
		}
	}
	var buf bytes.Buffer
	if gob.NewEncoder(&buf).Encode(&m) != nil {
		return
	}
	c.manifests.Put(c.key(origin), buf.Bytes())
}
