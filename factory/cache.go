package factory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/builder/compressors"
	"github.com/nodeforge/builder/oci"
)

const (
	// RepoArtifacts is the cache store's repository of built artifacts,
	// one artifact image each, tagged with its key.
	RepoArtifacts = "artifacts"
	// MediaTypeArtifact is the layer holding an artifact's bytes.
	MediaTypeArtifact = "application/vnd.nodeforge.factory.artifact.v1"
	// cacheFormat changes whenever an entry changes meaning.
	cacheFormat = "nodeforge factory cache v3"
)

// Annotations of a cache entry's manifest: what it is for, all of its
// key, signed with it (the signature covers the manifest). A reader
// compares them with the request before serving a byte, and a transfer
// or a collection chooses entries by them (the key itself is a hash).
const (
	AnnotationEntryKey        = "dev.nodeforge.cache-key"
	AnnotationEntrySchematic  = "dev.nodeforge.schematic"
	AnnotationEntryVersion    = "dev.nodeforge.release"
	AnnotationEntryArtifact   = "org.opencontainers.image.title"
	AnnotationEntryArch       = "dev.nodeforge.arch"
	AnnotationEntryPlatform   = "dev.nodeforge.platform"
	AnnotationEntryBuilder    = "dev.nodeforge.builder"
	AnnotationEntrySecureBoot = "dev.nodeforge.secureboot"
)

// entryInfo says what a cache entry is for: its key and what the key is
// made of.
type entryInfo struct {
	Key, Schematic, Version, Name, Arch, Platform, Builder string
	// SecureBoot is the SHA-256 of the certificate that signed the
	// media, "" for the unsigned ones.
	SecureBoot string
}

func (e entryInfo) annotations() map[string]string {
	ann := map[string]string{AnnotationEntryKey: e.Key, AnnotationEntrySchematic: e.Schematic, AnnotationEntryVersion: e.Version,
		AnnotationEntryArtifact: e.Name, AnnotationEntryArch: e.Arch, AnnotationEntryPlatform: e.Platform,
		AnnotationEntryBuilder: e.Builder, AnnotationEntrySecureBoot: e.SecureBoot}
	maps.DeleteFunc(ann, func(_, v string) bool { return v == "" })
	return ann
}

// entryFrom reads what an entry's annotations say it is for.
func entryFrom(ann map[string]string) entryInfo {
	return entryInfo{Key: ann[AnnotationEntryKey], Schematic: ann[AnnotationEntrySchematic], Version: ann[AnnotationEntryVersion],
		Name: ann[AnnotationEntryArtifact], Arch: ann[AnnotationEntryArch], Platform: ann[AnnotationEntryPlatform],
		Builder: ann[AnnotationEntryBuilder], SecureBoot: ann[AnnotationEntrySecureBoot]}
}

func (e entryInfo) String() string {
	s := fmt.Sprintf("%s of schematic %s, release %s, builder %s", e.Name, e.Schematic, e.Version, e.Builder)
	if e.SecureBoot != "" {
		s += ", Secure Boot certificate " + e.SecureBoot
	}
	return s + " (key " + e.Key + ")"
}

// wrongEntryError: an entry signed by the factory, but for another
// request than the one it is tagged for (a tag moved by someone who can
// write to the cache store).
type wrongEntryError struct{ want, got entryInfo }

func (e *wrongEntryError) Error() string {
	return fmt.Sprintf("the entry tagged %s is for %s, not for %s", e.want.Key, e.got, e.want)
}

// Stats count what the factory did, for tests and (later) metrics.
type Stats struct {
	Builds, Hits, CacheErrors int64
}

// artifactCache keeps built artifacts in the cache store, each signed by
// the factory's key before it is tagged and checked against that key, its
// key and its digests when read: an entry that fails is a miss (logged,
// counted, built again and overwritten), never served.
type artifactCache struct {
	st     oci.Store
	signer *signing.Signer // nil: nothing is cached
	log    *slog.Logger
	hits   atomic.Int64
	errors atomic.Int64
	// interval is how long a layout's blob file, once hashed, is served
	// without hashing it again while its size and time stay (negative:
	// hashed at every read).
	interval time.Duration
	now      func() time.Time
	metrics  *metrics

	mu       sync.Mutex
	verified map[string]fileCheck // a layout's blob file -> when its digest last held
	damaged  map[v1.Hash]bool     // registry blobs that failed while streamed
}

// defaultVerifyInterval is how long a verified layout file is trusted
// while nothing about it changes (Options.VerifyInterval).
const defaultVerifyInterval = 10 * time.Minute

// countDamaged counts a cached blob that failed its digest while served.
func (c *artifactCache) countDamaged() {
	c.errors.Add(1)
	c.metrics.damaged.Inc()
}

// distrust marks a streamed blob that did not match its digest: its entry
// is refused (and rebuilt) from then on.
func (c *artifactCache) distrust(h v1.Hash) {
	c.countDamaged()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.damaged == nil {
		c.damaged = map[v1.Hash]bool{}
	}
	c.damaged[h] = true
}

// fileCheck is a file's state when its digest last held, and when.
type fileCheck struct {
	size  int64
	mtime time.Time
	at    time.Time
}

// CachedArtifact is an artifact to serve: from a cache entry that passed
// its checks, or just built.
type CachedArtifact struct {
	desc v1.Descriptor // the artifact's size and sha256
	path string        // a layout's blob file, checked, served in place (Range, sendfile)
	// remote opens a registry's entry, streamed within the reader's
	// context through a verifiedReader (a damaged blob breaks the
	// response before its end)
	remote func(context.Context) (io.ReadCloser, error)
	file   *os.File // otherwise, a file just built (builtFile.served)
	// committed is the cache entry of a file just built, being written
	// while it is served (Service.commit); nil: nothing to wait for.
	committed *entryWrite
}

// entryWrite is a cache entry written in the background.
type entryWrite struct {
	done chan struct{} // closed once the entry is written, or failed
	err  error         // why it failed; set before done is closed
}

// Cached waits until the artifact has its cache entry (at once for one
// read from the cache), and says why not when writing it failed: the
// response was served all the same, but the next request builds again.
func (a *CachedArtifact) Cached(ctx context.Context) error {
	if a.committed == nil {
		return nil
	}
	select {
	case <-a.committed.done:
		return a.committed.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *CachedArtifact) Size() int64 { return a.desc.Size }

// Digest is the artifact's sha256.
func (a *CachedArtifact) Digest() v1.Hash { return a.desc.Digest }

// Open reads the artifact from its start.
func (a *CachedArtifact) Open(ctx context.Context) (io.ReadCloser, error) {
	switch {
	case a.path != "":
		return os.Open(a.path)
	case a.remote != nil:
		rc, err := a.remote(ctx)
		if err != nil {
			return nil, err
		}
		return Verified(rc, a.desc), nil
	}
	// Each response its own reader: ReadAt does not move the file's offset.
	sr := io.NewSectionReader(a.file, 0, a.desc.Size)
	if a.committed != nil {
		return &committingReader{sr: sr, ctx: ctx, committed: a.committed.done}, nil
	}
	return nopSeekCloser{sr}, nil
}

// committingReader reads a file just built, holding its last byte back
// until the artifact's cache entry is written: a client that has the
// whole artifact finds it cached.
type committingReader struct {
	sr        *io.SectionReader
	ctx       context.Context
	committed <-chan struct{}
}

func (r *committingReader) Read(p []byte) (int, error) {
	pos, _ := r.sr.Seek(0, io.SeekCurrent)
	if rest := r.sr.Size() - pos; rest > 0 && int64(len(p)) >= rest {
		if rest > 1 {
			p = p[:rest-1] // all but the last byte now
		} else {
			select {
			case <-r.committed:
			case <-r.ctx.Done():
				return 0, r.ctx.Err()
			}
		}
	}
	return r.sr.Read(p)
}

func (r *committingReader) Seek(off int64, whence int) (int64, error) {
	return r.sr.Seek(off, whence)
}

func (r *committingReader) Close() error { return nil }

// Seekable says whether open gives a seeker (http.ServeContent's Range).
func (a *CachedArtifact) Seekable() bool { return a.remote == nil }

// Bytes reads a small artifact (a command line) whole.
func (a *CachedArtifact) Bytes(ctx context.Context) ([]byte, error) {
	if a.desc.Size > 1<<20 {
		return nil, fmt.Errorf("%d bytes: too large to read whole", a.desc.Size)
	}
	rc, err := a.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

type nopSeekCloser struct{ io.ReadSeeker }

func (nopSeekCloser) Close() error { return nil }

// composeWith names the compressors this factory composes with (module
// and version of each): a factory built without cgo writes other squashfs
// bytes than one built with, so replicas of both on one cache store must
// never share an entry under one key, whatever builder version they give.
var composeWith = compressors.Key(compressors.This())

// key names an artifact: the schematic, every verified digest of the
// release, the artifact's name and the builder that composes it, with
// its compressors.
func cacheKey(rel *VerifiedRelease, schematicID, name, builder string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00", cacheFormat, schematicID, name, builder, composeWith)
	for _, repo := range slices.Sorted(maps.Keys(rel.Digests)) {
		fmt.Fprintf(h, "%s=%s\x00", repo, rel.Digests[repo])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// get returns the cached artifact of want, or not ok; refused says an
// entry was there and failed its checks (its signature, its digest, or
// what it is for). An entry in a local layout is served from its blob
// file, hashed again when the file changed or was last hashed longer than
// the interval ago; any other is streamed through a verifiedReader.
func (c *artifactCache) get(ctx context.Context, want entryInfo) (a *CachedArtifact, ok, refused bool) {
	if c.signer == nil {
		return nil, false, false
	}
	img, err := c.st.Image(ctx, RepoArtifacts, want.Key)
	if errors.Is(err, oci.ErrNotFound) {
		return nil, false, false // not cached
	}
	if err == nil {
		a, err = c.read(ctx, img, want)
	}
	if err != nil {
		c.errors.Add(1)
		if we := (*wrongEntryError)(nil); errors.As(err, &we) {
			c.metrics.mismatches.Inc()
			c.log.Error("cache entry is another request's: refused, building it again", "want", we.want.String(), "found", we.got.String())
		} else {
			c.log.Warn("cache entry refused: building it again", "key", want.Key, "err", err)
		}
		return nil, false, true
	}
	c.hits.Add(1)
	return a, true, false
}

func (c *artifactCache) read(ctx context.Context, img v1.Image, want entryInfo) (*CachedArtifact, error) {
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	_, sigs, err := signing.ReadSigs(ctx, c.st, RepoArtifacts, oci.SigTag(d))
	if err != nil {
		return nil, err
	}
	signed := false
	for _, l := range sigs {
		if signing.CheckSignatureLayer(c.signer.Verifier(), l, d) == nil {
			signed = true
			break
		}
	}
	if !signed {
		return nil, errors.New("no signature by the factory's key")
	}
	// Signed, and so are its annotations: they must name this request.
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	if got := entryFrom(m.Annotations); got != want {
		return nil, &wrongEntryError{want: want, got: got}
	}
	if len(m.Layers) != 1 {
		return nil, fmt.Errorf("%d layers, want one", len(m.Layers))
	}
	ld := m.Layers[0]
	if lay, ok := c.st.(oci.BlobFiler); ok {
		path, err := lay.BlobFile(ld.Digest)
		if err != nil {
			return nil, err
		}
		if err := c.checkFile(path, ld); err != nil {
			return nil, err
		}
		return &CachedArtifact{desc: ld, path: path}, nil
	}
	c.mu.Lock()
	damaged := c.damaged[ld.Digest]
	c.mu.Unlock()
	if damaged {
		return nil, fmt.Errorf("blob %s failed its digest when last read", ld.Digest)
	}
	// Opened anew by each reader: what read it here ends with the build's
	// context.
	remote := func(ctx context.Context) (io.ReadCloser, error) { return c.openLayer(ctx, d, ld.Digest) }
	return &CachedArtifact{desc: ld, remote: remote}, nil
}

// openLayer opens a layer of an entry (by the entry's digest) as stored.
func (c *artifactCache) openLayer(ctx context.Context, entry, layer v1.Hash) (io.ReadCloser, error) {
	img, err := c.st.Image(ctx, RepoArtifacts, entry.String())
	if err != nil {
		return nil, err
	}
	l, err := img.LayerByDigest(layer)
	if err != nil {
		return nil, err
	}
	return l.Compressed()
}

// checkFile hashes a blob file unless it is unchanged since it last
// matched its descriptor and that was less than the interval ago.
func (c *artifactCache) checkFile(path string, d v1.Descriptor) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	now := c.now()
	c.mu.Lock()
	last, ok := c.verified[path]
	c.mu.Unlock()
	if ok && last.size == fi.Size() && last.mtime.Equal(fi.ModTime()) && fi.Size() == d.Size && now.Sub(last.at) < c.interval {
		return nil
	}
	if err := checkBlob(func() (io.ReadCloser, error) { return os.Open(path) }, d); err != nil {
		return err
	}
	c.mu.Lock()
	if c.verified == nil {
		c.verified = map[string]fileCheck{}
	}
	c.verified[path] = fileCheck{size: fi.Size(), mtime: fi.ModTime(), at: now}
	c.mu.Unlock()
	return nil
}

// put stores the built file f as the entry e: the image first, untagged,
// then its signature, then the tag, so no tag ever names an unsigned
// entry.
func (c *artifactCache) put(ctx context.Context, e entryInfo, f *builtFile) error {
	if c.signer == nil {
		return nil
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer: f.layer(MediaTypeArtifact), Annotations: map[string]string{AnnotationEntryArtifact: e.Name}})
	if err != nil {
		return err
	}
	img = mutate.ConfigMediaType(img, types.MediaType(MediaTypeArtifact))
	img = mutate.Annotations(img, e.annotations()).(v1.Image)
	var d v1.Hash
	if d, err = img.Digest(); err != nil {
		return err
	}
	if err := c.st.WriteImage(ctx, RepoArtifacts, "", img); err != nil {
		return err
	}
	if _, err := c.signer.Sign(ctx, c.st, RepoArtifacts, d); err != nil {
		return err
	}
	if err := c.st.WriteImage(ctx, RepoArtifacts, e.Key, img); err != nil {
		return err
	}
	c.recheck(ctx, img)
	return nil
}

// recheck reads again a blob that failed while streamed, after its entry
// was written anew: a registry keeps a blob it has, damaged or not, so it
// stays distrusted (and the artifact is built at each request) until the
// store serves it whole again.
func (c *artifactCache) recheck(ctx context.Context, img v1.Image) {
	m, err := img.Manifest()
	if err != nil || len(m.Layers) != 1 {
		return
	}
	ld := m.Layers[0]
	c.mu.Lock()
	damaged := c.damaged[ld.Digest]
	c.mu.Unlock()
	if !damaged {
		return
	}
	d, _ := img.Digest()
	err = checkBlob(func() (io.ReadCloser, error) { return c.openLayer(ctx, d, ld.Digest) }, ld)
	if err != nil {
		c.log.Error("the cache store still holds a damaged blob: the artifact is built at each request until the store is repaired", "blob", ld.Digest.String(), "err", err)
		return
	}
	c.mu.Lock()
	delete(c.damaged, ld.Digest)
	c.mu.Unlock()
}
