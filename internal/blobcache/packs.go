package blobcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/nodeforge/builder/internal/atomicfile"
)

// Packs is a store of many small blobs (compressed squashfs blocks) in
// pack files, as git keeps objects: what one build adds is written at the
// end as one file, not one file per blob (creating thousands of small
// files cost more CPU than the compression it saves on a fast disk).
//
// A pack is: the blobs back to back, then an index of 48-byte entries
// (key, offset, length, CRC-32C of the blob), then a 24-byte trailer
// (index offset, entry count, CRC-32C of the index, "NFPACK01"). Packs are
// written to a temporary name and renamed; one whose trailer or index
// fails its check is ignored, a blob that fails its CRC is a miss.
//
// Get, Has and Put are safe for concurrent use. Put keeps blobs in memory
// until Flush, or until more than 32 MiB are pending, when they are
// written as a pack at once: a build's compressed image is never held in
// memory whole. Nothing is evicted: remove the directory to reclaim space.
type Packs struct {
	dir string

	mu      sync.Mutex
	index   map[[32]byte]packLoc
	files   []*os.File
	pending map[[32]byte][]byte
	order   [][32]byte // pending keys in Put order, for a deterministic pack
	bytes   int        // of pending blobs
	flushed error      // of the last flush Put made, for the next Flush
}

// flushAt is how many pending bytes make Put write a pack (a variable for
// the tests).
var flushAt = 32 << 20

type packLoc struct {
	file int
	off  int64
	n    uint32
	crc  uint32
}

const (
	packEntry   = 48
	packTrailer = 24
	packMagic   = "NFPACK01"
)

// OpenPacks opens (creating it if needed) a pack directory and reads the
// index of every pack in it.
func OpenPacks(dir string) (*Packs, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("blob cache: %w", err)
	}
	if err := atomicfile.Sweep(dir); err != nil {
		return nil, fmt.Errorf("blob cache: %w", err)
	}
	p := &Packs{dir: dir, index: map[[32]byte]packLoc{}, pending: map[[32]byte][]byte{}}
	names, err := filepath.Glob(filepath.Join(dir, "*.pack"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		entries, err := readPackIndex(f)
		if err != nil {
			f.Close() // damaged: as if absent
			continue
		}
		fi := len(p.files)
		p.files = append(p.files, f)
		for _, e := range entries {
			if _, ok := p.index[e.key]; !ok {
				e.loc.file = fi
				p.index[e.key] = e.loc
			}
		}
	}
	return p, nil
}

type packIndexEntry struct {
	key [32]byte
	loc packLoc
}

func readPackIndex(f *os.File) ([]packIndexEntry, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if size < packTrailer {
		return nil, errors.New("short pack")
	}
	var tr [packTrailer]byte
	if _, err := f.ReadAt(tr[:], size-packTrailer); err != nil {
		return nil, err
	}
	if string(tr[16:]) != packMagic {
		return nil, errors.New("not a pack")
	}
	at := int64(binary.LittleEndian.Uint64(tr[0:]))
	count := int64(binary.LittleEndian.Uint32(tr[8:]))
	if at < 0 || count*packEntry != size-packTrailer-at {
		return nil, errors.New("bad pack index bounds")
	}
	idx := make([]byte, count*packEntry)
	if _, err := f.ReadAt(idx, at); err != nil {
		return nil, err
	}
	if crc32.Checksum(idx, castagnoli) != binary.LittleEndian.Uint32(tr[12:]) {
		return nil, errors.New("pack index CRC mismatch")
	}
	out := make([]packIndexEntry, count)
	for i := range out {
		b := idx[i*packEntry:]
		copy(out[i].key[:], b[:32])
		out[i].loc = packLoc{off: int64(binary.LittleEndian.Uint64(b[32:])), n: binary.LittleEndian.Uint32(b[40:]), crc: binary.LittleEndian.Uint32(b[44:])}
		if out[i].loc.off < 0 || out[i].loc.off+int64(out[i].loc.n) > at {
			return nil, errors.New("pack entry out of bounds")
		}
	}
	return out, nil
}

// Get returns the blob stored under key.
func (p *Packs) Get(key [32]byte) ([]byte, bool) {
	p.mu.Lock()
	if b, ok := p.pending[key]; ok {
		p.mu.Unlock()
		return b, true
	}
	loc, ok := p.index[key]
	var f *os.File
	if ok {
		f = p.files[loc.file]
	}
	p.mu.Unlock()
	if !ok {
		return nil, false
	}
	b := make([]byte, loc.n)
	if _, err := f.ReadAt(b, loc.off); err != nil || crc32.Checksum(b, castagnoli) != loc.crc {
		return nil, false
	}
	return b, true
}

// Has reports whether key is stored or pending (without checking the blob).
func (p *Packs) Has(key [32]byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.pending[key]; ok {
		return true
	}
	_, ok := p.index[key]
	return ok
}

// Put keeps blob for the next Flush; it must not be modified afterwards.
// A key already pending keeps its first blob; a stored key is put only
// after its blob failed (Get missed), so it is written again (a later Open
// may still find the damaged copy first: that costs a recompression, not
// a wrong blob).
func (p *Packs) Put(key [32]byte, blob []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.pending[key]; ok {
		return
	}
	p.pending[key] = blob
	p.order = append(p.order, key)
	p.bytes += len(blob)
	if p.bytes > flushAt {
		if err := p.flushLocked(); err != nil && p.flushed == nil {
			p.flushed = err
		}
	}
}

// Flush writes what was put since the last Flush as one new pack. Keys are
// written sorted, so the same blobs make the same pack, named by its
// digest.
// An error of a flush that Put made is reported here.
func (p *Packs) Flush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.flushLocked()
	if p.flushed != nil {
		err, p.flushed = errors.Join(p.flushed, err), nil
	}
	return err
}

// flushLocked writes the pending blobs as one pack; p.mu is held. On an
// error the blobs are dropped (they cost a recompression later, nothing
// more).
func (p *Packs) flushLocked() error {
	if len(p.order) == 0 {
		return nil
	}
	defer func() { p.pending, p.order, p.bytes = map[[32]byte][]byte{}, nil, 0 }()
	keys := append([][32]byte(nil), p.order...)
	sort.Slice(keys, func(i, j int) bool { return bytes.Compare(keys[i][:], keys[j][:]) < 0 })
	tmp, err := atomicfile.CreateTemp(p.dir, "pack")
	if err != nil {
		return fmt.Errorf("blob cache: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	h := sha256.New()
	w := io.MultiWriter(tmp, h)
	var off int64
	idx := make([]byte, 0, len(keys)*packEntry)
	locs := make([]packLoc, len(keys))
	for i, k := range keys {
		b := p.pending[k]
		if _, err := w.Write(b); err != nil {
			tmp.Close()
			return fmt.Errorf("blob cache: %w", err)
		}
		locs[i] = packLoc{off: off, n: uint32(len(b)), crc: crc32.Checksum(b, castagnoli)}
		idx = append(idx, k[:]...)
		idx = binary.LittleEndian.AppendUint64(idx, uint64(off))
		idx = binary.LittleEndian.AppendUint32(idx, locs[i].n)
		idx = binary.LittleEndian.AppendUint32(idx, locs[i].crc)
		off += int64(len(b))
	}
	tr := binary.LittleEndian.AppendUint64(nil, uint64(off))
	tr = binary.LittleEndian.AppendUint32(tr, uint32(len(keys)))
	tr = binary.LittleEndian.AppendUint32(tr, crc32.Checksum(idx, castagnoli))
	tr = append(tr, packMagic...)
	_, err1 := w.Write(idx)
	_, err2 := w.Write(tr)
	if err := errors.Join(err1, err2); err != nil {
		tmp.Close()
		return fmt.Errorf("blob cache: %w", err)
	}
	// Renamed while open, so still locked against a concurrent sweep.
	name := filepath.Join(p.dir, hex.EncodeToString(h.Sum(nil))+".pack")
	err = os.Rename(tmp.Name(), name)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("blob cache: %w", err)
	}
	f, err := os.Open(name)
	if err != nil {
		return fmt.Errorf("blob cache: %w", err)
	}
	fi := len(p.files)
	p.files = append(p.files, f)
	for i, k := range keys {
		locs[i].file = fi
		p.index[k] = locs[i]
	}
	return nil
}

// Close releases the pack files; pending blobs not flushed are dropped.
func (p *Packs) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, f := range p.files {
		errs = append(errs, f.Close())
	}
	p.files, p.index = nil, map[[32]byte]packLoc{}
	return errors.Join(errs...)
}

// Stats reports the stored blobs and packs (for progress and tests).
func (p *Packs) Stats() (blobs, packs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.index), len(p.files)
}
