package repo

// The parsed-index cache: what Load read from a repository's indexes,
// kept on disk under the digest of the release file they were verified
// against (repodata/repomd.xml, base/release), as libsolv keeps .solv
// files. A repository whose release is unchanged is then read from one
// file in one pass instead of decompressing and parsing its indexes.
//
// An entry is written atomically (internal/atomicfile) and carries a
// CRC-32C of its content: a damaged, truncated or foreign entry is a miss,
// never an error, and so is any failure to read or write the cache.
// Entries hold no URL (a package whose Repo is the repository's own URL is
// marked so), so one entry serves every location of the same repository.
//
// The encoding is a flat run of varints and length-prefixed strings,
// written as it is encoded. Reading maps the entry into memory (Linux) or
// reads it whole, and every string field slices it where it lies: no copy,
// and packages, dependencies and file lists take one slab each, so a
// 20,000-package index costs a handful of allocations. (Fresh memory is
// what a large read costs most: on the VMs this runs on, a page touched
// for the first time costs some 15-25 µs.)

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/internal/hugepage"
	"github.com/nodeforge/builder/pkgbase/evr"
)

// indexCacheVersion changes whenever the encoding or what the readers
// produce changes: entries of other versions are never read.
const indexCacheVersion = "nodeforge repo index v1"

const (
	indexCacheMagic  = "NFRIDX1\n"
	indexCacheSuffix = ".idx"
	// indexCacheMaxAge is how long an entry nobody reads is kept.
	indexCacheMaxAge = 30 * 24 * time.Hour
	// indexCacheMaxSize caps what is read back (a 20,000-package rpm-md
	// repository with its file lists makes some 25 MB).
	indexCacheMaxSize = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc32String is the CRC-32C of s, without copying it.
func crc32String(s string) uint32 {
	return crc32.Checksum(unsafe.Slice(unsafe.StringData(s), len(s)), castagnoli)
}

// cachedIndex is what an entry holds.
type cachedIndex struct {
	Packages  []*Package
	Indexes   []IndexInfo
	FullFiles bool
}

// indexCacheKey names the entry of a repository read from a release
// file with the given sha256, under parse parameters (format, components,
// filelists) that change what is read.
func indexCacheKey(format, releaseSHA256 string, params ...string) string {
	h := sha256.New()
	io.WriteString(h, indexCacheVersion)
	for _, s := range append([]string{format, releaseSHA256}, params...) {
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		io.WriteString(h, s)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func indexCachePath(dir, key string) string {
	return filepath.Join(dir, key+indexCacheSuffix)
}

// readIndexCache returns the entry for key with every package's Repo
// that was the repository's own set to repoURL; ok is false on a miss.
func readIndexCache(dir, key, repoURL string) (ci *cachedIndex, ok bool) {
	if dir == "" {
		return nil, false
	}
	path := indexCachePath(dir, key)
	data, release, err := mapIndexFile(path)
	if err != nil {
		return nil, false
	}
	if ci, ok = decodeMapped(data, release, repoURL); ok {
		// Mark it used, for the pruning of unused entries.
		now := time.Now()
		os.Chtimes(path, now, now)
	}
	return ci, ok
}

// decodeMapped decodes an entry that mapIndexFile gave; on a miss it
// releases it. A fault (the file truncated under its mapping) or any
// other failure to decode is a miss.
func decodeMapped(data string, release func(), repoURL string) (ci *cachedIndex, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			ci, ok = nil, false
		}
		if !ok {
			release()
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	ci, err := decodeIndex(data, repoURL)
	return ci, err == nil
}

// readIndexFile reads an entry of the given size whole; the strings of the
// decoded index slice the buffer, which is never written again.
func readIndexFile(f *os.File, size int64) (string, func(), error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return "", nil, err
	}
	return unsafe.String(&b[0], len(b)), func() {}, nil
}

var pendingIndexCache sync.WaitGroup

// storeIndexCache writes an entry, on a goroutine of its own when async.
func storeIndexCache(dir string, async bool, key, repoURL string, ci *cachedIndex) {
	if dir == "" {
		return
	}
	if !async {
		writeIndexCache(dir, key, repoURL, ci)
		return
	}
	pendingIndexCache.Go(func() { writeIndexCache(dir, key, repoURL, ci) })
}

// WaitIndexCache waits for the index cache entries that loads with
// IndexCacheAsync are writing.
func WaitIndexCache() { pendingIndexCache.Wait() }

// writeIndexCache stores an entry; failures are ignored (the cache is an
// optimisation). Entries unused for indexCacheMaxAge and temporary files
// of killed writers are removed on the way.
func writeIndexCache(dir, key, repoURL string, ci *cachedIndex) {
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	err := atomicfile.WriteFrom(indexCachePath(dir, key), 0o644, func(w io.Writer) error {
		return writeIndex(w, ci, repoURL)
	})
	if err != nil {
		return
	}
	pruneIndexCache(dir, time.Now().Add(-indexCacheMaxAge))
}

func pruneIndexCache(dir string, before time.Time) {
	atomicfile.Sweep(dir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), indexCacheSuffix) || !e.Type().IsRegular() {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(before) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return
			}
		}
	}
}

// Encoding: magic, the payload, then its length (u64) and CRC-32C (u32),
// little-endian: the trailer lets the encoder stream.

type encoder struct {
	w   io.Writer
	b   []byte // not yet written
	n   uint64 // payload bytes written
	crc uint32
	err error
}

const encoderFlush = 64 << 10

func (e *encoder) flush() {
	if e.err == nil && len(e.b) > 0 {
		e.crc = crc32.Update(e.crc, castagnoli, e.b)
		e.n += uint64(len(e.b))
		_, e.err = e.w.Write(e.b)
	}
	e.b = e.b[:0]
}

func (e *encoder) uvarint(v uint64) {
	e.b = binary.AppendUvarint(e.b, v)
	if len(e.b) >= encoderFlush {
		e.flush()
	}
}

func (e *encoder) varint(v int64) { e.uvarint(uint64(v<<1) ^ uint64(v>>63)) }

func (e *encoder) str(s string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	if len(e.b)+len(s) > cap(e.b) {
		e.flush()
		if len(s) > cap(e.b) {
			e.crc = crc32.Update(e.crc, castagnoli, []byte(s))
			e.n += uint64(len(s))
			if e.err == nil {
				_, e.err = io.WriteString(e.w, s)
			}
			return
		}
	}
	e.b = append(e.b, s...)
	if len(e.b) >= encoderFlush {
		e.flush()
	}
}

// count writes a list length with nil told from empty.
func (e *encoder) count(n int, isNil bool) {
	if isNil {
		e.uvarint(0)
		return
	}
	e.uvarint(uint64(n) + 1)
}

// writeIndex writes an entry to w.
func writeIndex(w io.Writer, ci *cachedIndex, repoURL string) error {
	if _, err := io.WriteString(w, indexCacheMagic); err != nil {
		return err
	}
	e := &encoder{w: w, b: make([]byte, 0, 2*encoderFlush)}

	fullFiles := uint64(0)
	if ci.FullFiles {
		fullFiles = 1
	}
	e.uvarint(fullFiles)
	e.count(len(ci.Indexes), ci.Indexes == nil)
	for _, x := range ci.Indexes {
		e.str(x.Path)
		e.str(x.Algorithm)
		e.str(x.Hash)
		e.varint(x.Size)
	}
	ndeps, nfiles := 0, 0
	for _, p := range ci.Packages {
		if p == nil {
			continue
		}
		ndeps += len(p.Provides) + len(p.Requires) + len(p.Conflicts) + len(p.Obsoletes)
		nfiles += len(p.Files)
	}
	e.count(len(ci.Packages), ci.Packages == nil)
	e.uvarint(uint64(ndeps))
	e.uvarint(uint64(nfiles))
	for _, p := range ci.Packages {
		if p == nil {
			e.uvarint(0)
			continue
		}
		e.uvarint(1)
		e.str(p.Name)
		e.varint(int64(p.EVR.Epoch))
		hasEpoch := uint64(0)
		if p.EVR.HasEpoch {
			hasEpoch = 1
		}
		e.uvarint(hasEpoch)
		e.str(p.EVR.Version)
		e.str(p.EVR.Release)
		e.str(p.EVR.Disttag)
		e.str(p.Arch)
		e.varint(p.BuildTime)
		e.str(p.SourceRPM)
		e.str(p.License)
		e.varint(p.Size)
		for _, deps := range [4][]Dep{p.Provides, p.Requires, p.Conflicts, p.Obsoletes} {
			e.count(len(deps), deps == nil)
			for _, d := range deps {
				e.str(d.Name)
				e.uvarint(uint64(d.Flags))
				e.str(d.Version)
			}
		}
		e.count(len(p.Files), p.Files == nil)
		for _, f := range p.Files {
			e.str(f)
		}
		e.varint(int64(p.Semantics))
		if p.Repo == repoURL {
			e.uvarint(0)
		} else {
			e.uvarint(1)
			e.str(p.Repo)
		}
		e.str(p.Location)
		e.varint(p.FileSize)
		e.str(p.SHA256)
		e.str(p.BLAKE2b)
		e.str(p.MD5)
		e.str(p.SHA1)
	}
	e.flush()
	if e.err != nil {
		return e.err
	}
	var tr [12]byte
	binary.LittleEndian.PutUint64(tr[:], e.n)
	binary.LittleEndian.PutUint32(tr[8:], e.crc)
	_, err := w.Write(tr[:])
	return err
}

var errBadIndexCache = errors.New("damaged index cache entry")

type decoder struct {
	s   string // the payload
	pos int
	err bool
}

func (d *decoder) uvarint() uint64 {
	if d.err {
		return 0
	}
	// The common one-byte case first.
	if d.pos < len(d.s) && d.s[d.pos] < 0x80 {
		v := uint64(d.s[d.pos])
		d.pos++
		return v
	}
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if d.pos >= len(d.s) || shift >= 64 {
			d.err = true
			return 0
		}
		c := d.s[d.pos]
		d.pos++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
}

func (d *decoder) varint() int64 {
	u := d.uvarint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err || n > uint64(len(d.s)-d.pos) {
		d.err = true
		return ""
	}
	s := d.s[d.pos : d.pos+int(n)]
	d.pos += int(n)
	return s
}

// count reads a list length: -1 for nil. It fails when the rest of the
// payload could not hold n items of at least min bytes.
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if n == 0 {
		return -1
	}
	n--
	if d.err || n > uint64(len(d.s)-d.pos)/uint64(min) {
		d.err = true
		return 0
	}
	return int(n)
}

// decodeIndex decodes an entry; every string of the result slices data.
func decodeIndex(data, repoURL string) (*cachedIndex, error) {
	const hdr, tr = len(indexCacheMagic), 12
	if len(data) < hdr+tr || data[:hdr] != indexCacheMagic {
		return nil, errBadIndexCache
	}
	payload := data[hdr : len(data)-tr]
	t := data[len(data)-tr:]
	n := binary.LittleEndian.Uint64([]byte(t[:8]))
	sum := binary.LittleEndian.Uint32([]byte(t[8:]))
	if n != uint64(len(payload)) || crc32String(payload) != sum {
		return nil, errBadIndexCache
	}
	d := &decoder{s: payload}
	ci := &cachedIndex{FullFiles: d.uvarint() == 1}
	if k := d.count(4); k >= 0 {
		ci.Indexes = make([]IndexInfo, 0, k)
		for range k {
			ci.Indexes = append(ci.Indexes, IndexInfo{Path: d.str(), Algorithm: d.str(), Hash: d.str(), Size: d.varint()})
		}
	}
	np := d.count(1)
	ndeps, nfiles := d.uvarint(), d.uvarint()
	if d.err || ndeps > uint64(len(d.s)) || nfiles > uint64(len(d.s)) {
		return nil, errBadIndexCache
	}
	if np >= 0 {
		ci.Packages = make([]*Package, np)
		slab := make([]Package, np)
		depSlab := make([]Dep, ndeps)
		fileSlab := make([]string, nfiles)
		if np > 0 {
			hugepage.Advise(unsafe.Pointer(&slab[0]), uintptr(np)*unsafe.Sizeof(slab[0]))
		}
		if ndeps > 0 {
			hugepage.Advise(unsafe.Pointer(&depSlab[0]), uintptr(ndeps)*unsafe.Sizeof(depSlab[0]))
		}
		if nfiles > 0 {
			hugepage.Advise(unsafe.Pointer(&fileSlab[0]), uintptr(nfiles)*unsafe.Sizeof(fileSlab[0]))
		}
		for i := range np {
			if d.uvarint() == 0 {
				continue // a nil package
			}
			p := &slab[i]
			p.Name = d.str()
			p.EVR.Epoch = int(d.varint())
			p.EVR.HasEpoch = d.uvarint() == 1
			p.EVR.Version = d.str()
			p.EVR.Release = d.str()
			p.EVR.Disttag = d.str()
			p.Arch = d.str()
			p.BuildTime = d.varint()
			p.SourceRPM = d.str()
			p.License = d.str()
			p.Size = d.varint()
			for _, dst := range [4]*[]Dep{&p.Provides, &p.Requires, &p.Conflicts, &p.Obsoletes} {
				k := d.count(2)
				if k < 0 {
					continue
				}
				if k > len(depSlab) {
					return nil, errBadIndexCache
				}
				deps := depSlab[:k:k]
				depSlab = depSlab[k:]
				for j := range deps {
					deps[j] = Dep{Name: d.str(), Flags: uint32(d.uvarint()), Version: d.str()}
				}
				*dst = deps
			}
			if k := d.count(1); k >= 0 {
				if k > len(fileSlab) {
					return nil, errBadIndexCache
				}
				files := fileSlab[:k:k]
				fileSlab = fileSlab[k:]
				for j := range files {
					files[j] = d.str()
				}
				p.Files = files
			}
			p.Semantics = evr.Semantics(d.varint())
			if d.uvarint() == 0 {
				p.Repo = repoURL
			} else {
				p.Repo = d.str()
			}
			p.Location = d.str()
			p.FileSize = d.varint()
			p.SHA256 = d.str()
			p.BLAKE2b = d.str()
			p.MD5 = d.str()
			p.SHA1 = d.str()
			if d.err {
				return nil, errBadIndexCache
			}
			ci.Packages[i] = p
		}
	}
	if d.err || d.pos != len(d.s) {
		return nil, errBadIndexCache
	}
	return ci, nil
}
