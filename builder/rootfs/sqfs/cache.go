package sqfs

// BlockCache holds compressed blocks by key: sha256 over the compressor,
// its level and library version, the block size and the uncompressed
// block. The writer calls it from several goroutines at once.
//
// Get's result is used as the stored block: its length equals the
// uncompressed length when the block is stored uncompressed, and is
// smaller otherwise. Put is given the block as it is stored; it must not
// modify it.
type BlockCache interface {
	Get(key [32]byte) ([]byte, bool)
	Put(key [32]byte, compressed []byte)
}

// A build uses internal/blobcache.Dir: one file per block in a directory.
