// Package sqfs writes squashfs 4.0 images from an in-memory list of
// entries, without touching the host file system and without external
// tools.
//
// The image is a pure function of the entries and the options: entries may
// arrive in any order, data blocks are compressed in parallel but laid out
// in a fixed order, and no host state (time, user, umask) is read. Compressed
// data and fragment blocks can be reused across builds through a
// content-addressed BlockCache, so a rebuild after a small change only
// recompresses the blocks whose bytes changed.
//
// Layout, as the Linux kernel insists on it: superblock, data and fragment
// blocks, inode table, directory table, fragment table, id table, xattr
// table, padded to 4 KiB. Choices follow mksquashfs's defaults where the
// format leaves room: files of a block or more are stored as whole blocks
// (no tail-end packing), smaller files go into fragment blocks (packed as
// fragment.go explains, so that caching works), all-zero blocks are
// stored as holes, identical files share their data, and extended inodes
// are used only when needed (hard links, xattrs, 4 GiB offsets, directory
// listings over 8 KiB, which get an index).
//
// Not written: an export (NFS) table, a compressor options block, lz4,
// lzo and lzma compression, out-of-line xattr values, xattrs outside the
// user., trusted. and security. name spaces.
package sqfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
)

// Entry is one path of the image.
type Entry struct {
	// Path is absolute and clean; "/" is the root, which must be present.
	// Every parent directory must be present too.
	Path string
	// Mode is st_mode: type bits (S_IFREG, S_IFDIR, ...) and permissions
	// including setuid, setgid and sticky.
	Mode     uint32
	UID, GID uint32
	// Mtime is stored per inode as unsigned 32-bit seconds.
	Mtime int64
	// Data is the content of a regular file. It is read, never modified.
	Data []byte
	// Digest, when not zero, is the sha256 of Data, known to the caller
	// (from a package header, say): the writer then keys the cache by it
	// instead of hashing every block, and finds duplicates without
	// hashing. A wrong digest gives a wrong image.
	Digest [32]byte
	// Target is the target of a symbolic link.
	Target string
	// Rdev is the device number of a character or block device in the
	// Linux encoding (major<<8 | minor for small numbers; the kernel's
	// new_encode_dev in general), as the squashfs format stores it.
	Rdev uint32
	// Xattrs keys must start with "user.", "trusted." or "security.":
	// squashfs cannot store other name spaces.
	Xattrs map[string][]byte
	// HardlinkTo makes this entry a hard link to the entry at that path,
	// which must not be a directory. The link shares that entry's inode
	// (mode, owner, data, xattrs); its own fields other than Path are
	// ignored.
	HardlinkTo string
}

// Options pin the image format. The zero value is valid.
type Options struct {
	// Compressor is "zstd" (default), "xz" or "gzip" (zlib streams, as
	// squashfs calls them).
	Compressor string
	// Level 0 is the compressor's default as mksquashfs uses it: zstd 15,
	// gzip 9; xz has no levels here. zstd is libzstd in a cgo build; a build
	// without cgo maps levels onto the four of klauspost/compress/zstd (1-2
	// fastest, 3-5 default, 6-9 better, 10 and more best).
	Level int
	// BlockSize is a power of two from 4096 to 1048576; default 131072.
	BlockSize int
	// Workers compress blocks in parallel (default GOMAXPROCS). The image
	// does not depend on it.
	Workers int
	// Cache, when set, supplies compressed blocks by the hash of their
	// uncompressed bytes and receives the ones compressed anew.
	Cache BlockCache
	// MkfsTime is the superblock's creation time (seconds since 1970).
	MkfsTime int64
}

const (
	defaultBlockSize = 131072
	superblockSize   = 96
	devBlockSize     = 4096 // images are padded to this, as mksquashfs does
)

func (o Options) normalize() (Options, error) {
	if o.Compressor == "" {
		o.Compressor = "zstd"
	}
	if o.BlockSize == 0 {
		o.BlockSize = defaultBlockSize
	}
	if o.BlockSize < 4096 || o.BlockSize > 1<<20 || o.BlockSize&(o.BlockSize-1) != 0 {
		return o, fmt.Errorf("sqfs: block size %d is not a power of two from 4096 to 1048576", o.BlockSize)
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.MkfsTime < 0 || o.MkfsTime > math.MaxUint32 {
		return o, fmt.Errorf("sqfs: mkfs time %d does not fit in 32 unsigned bits", o.MkfsTime)
	}
	return o, nil
}

// Write writes the squashfs image of entries to w.
//
// The superblock at offset 0 holds the positions of tables that are only
// known at the end. When w can seek (a file), the data blocks go to it as
// they are compressed and the superblock is written last, so the
// compressed image is never whole in memory; otherwise the image is
// assembled in memory (compressed data is about a third of the input).
// The bytes are the same either way.
func Write(w io.Writer, entries []Entry, opts Options) error {
	o, err := opts.normalize()
	if err != nil {
		return err
	}
	c, err := newCodec(o.Compressor, o.Level, o.BlockSize)
	if err != nil {
		return err
	}
	t, err := buildTree(entries)
	if err != nil {
		return err
	}
	ws, seekable := w.(io.WriteSeeker)
	start := int64(0)
	if seekable {
		if start, err = ws.Seek(0, io.SeekCurrent); err != nil {
			seekable = false // a pipe, say
		}
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var sink func([]byte) error
	if seekable {
		// The superblock's place, filled in at the end.
		if _, err := bw.Write(make([]byte, superblockSize)); err != nil {
			return fmt.Errorf("sqfs: writing image: %w", err)
		}
		sink = func(b []byte) error {
			_, err := bw.Write(b)
			return err
		}
	}
	d, err := writeData(t, o, c, sink)
	if err != nil {
		return err
	}
	comp, err := c.newCompressor()
	if err != nil {
		return err
	}
	img, err := assemble(t, d, o, c, comp)
	if err != nil {
		return err
	}
	if !seekable {
		err = img.writeTo(bw)
	} else {
		err = img.writeTables(bw)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil && seekable {
		err = writeSuperblock(ws, start, img.sb[:])
	}
	if err != nil {
		return fmt.Errorf("sqfs: writing image: %w", err)
	}
	return nil
}

// writeSuperblock writes sb at start and leaves ws at its end.
func writeSuperblock(ws io.WriteSeeker, start int64, sb []byte) error {
	end, err := ws.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	if _, err := ws.Seek(start, io.SeekStart); err != nil {
		return err
	}
	if _, err := ws.Write(sb); err != nil {
		return err
	}
	_, err = ws.Seek(end, io.SeekStart)
	return err
}

// errf prefixes an error with the package and the path it concerns.
func errf(path, format string, args ...any) error {
	return fmt.Errorf("sqfs: %s: %s", path, fmt.Sprintf(format, args...))
}

var errTooLarge = errors.New("sqfs: image exceeds a format limit")
