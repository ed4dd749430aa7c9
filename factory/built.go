package factory

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/builder/compose"
)

// builtFile is an artifact just built, in a file of its build's scratch
// directory: the cache entry links it (a layout's blob) or uploads it,
// and the responses read it, so an artifact of hundreds of megabytes is
// not held in memory while slow clients download it.
type builtFile struct {
	path string
	desc v1.Descriptor // its size and sha256
}

// writeBuiltFile writes what write writes into a new file in dir, hashing
// it on the way; on an error nothing is left. Scratch, not kept: never
// synced to disk.
func writeBuiltFile(dir string, write func(io.Writer) error) (*builtFile, error) {
	f, err := os.CreateTemp(dir, "artifact-")
	if err != nil {
		return nil, err
	}
	bf, err := fillBuiltFile(f, write)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, err
	}
	return bf, nil
}

func fillBuiltFile(f *os.File, write func(io.Writer) error) (*builtFile, error) {
	// A layout links the file as a blob: a blob's mode, whatever the umask.
	if err := f.Chmod(0o644); err != nil {
		return nil, err
	}
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(f, h), 1<<20)
	if err := write(bw); err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return &builtFile{path: f.Name(), desc: v1.Descriptor{Size: fi.Size(), Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}}}, nil
}

// saveBuiltFile puts a file of compose's media in dir (compose.File.Save:
// the ISO, which xorriso wrote in compose's scratch directory, moved; the
// others written).
func saveBuiltFile(dir string, f compose.File) (*builtFile, error) {
	p := filepath.Join(dir, "artifact")
	info, err := f.Save(p)
	if err != nil {
		return nil, err
	}
	return &builtFile{path: p, desc: v1.Descriptor{Size: info.Size, Digest: v1.Hash{Algorithm: "sha256", Hex: info.SHA256}}}, nil
}

// served is the artifact to serve: the file kept open, so that it
// outlives its directory (removed when the build ends). The responses
// read it through their own section readers; the runtime closes it, and
// the system frees its blocks, once the last of them has let it go.
func (b *builtFile) served() (*CachedArtifact, error) {
	f, err := os.Open(b.path)
	if err != nil {
		return nil, err
	}
	return &CachedArtifact{desc: b.desc, file: f}, nil
}

// layer is the file as a cache entry's layer of media type mt: a
// layout links it (HashedFile), a registry gets it read from the file.
func (b *builtFile) layer(mt types.MediaType) v1.Layer { return builtLayer{b, mt} }

type builtLayer struct {
	f  *builtFile
	mt types.MediaType
}

func (l builtLayer) Digest() (v1.Hash, error)             { return l.f.desc.Digest, nil }
func (l builtLayer) DiffID() (v1.Hash, error)             { return l.f.desc.Digest, nil }
func (l builtLayer) Size() (int64, error)                 { return l.f.desc.Size, nil }
func (l builtLayer) MediaType() (types.MediaType, error)  { return l.mt, nil }
func (l builtLayer) Compressed() (io.ReadCloser, error)   { return os.Open(l.f.path) }
func (l builtLayer) Uncompressed() (io.ReadCloser, error) { return os.Open(l.f.path) }
func (l builtLayer) HashedFile() string                   { return l.f.path }
