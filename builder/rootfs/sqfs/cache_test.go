package sqfs

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nodeforge/builder/internal/blobcache"
	"github.com/nodeforge/builder/internal/testutil"
)

// countingCache counts what the writer asks of a cache.
type countingCache struct {
	BlockCache
	gets, hits, puts atomic.Int64
}

func (c *countingCache) Get(k [32]byte) ([]byte, bool) {
	c.gets.Add(1)
	b, ok := c.BlockCache.Get(k)
	if ok {
		c.hits.Add(1)
	}
	return b, ok
}

func (c *countingCache) Put(k [32]byte, b []byte) {
	c.puts.Add(1)
	c.BlockCache.Put(k, b)
}

func (c *countingCache) reset() { c.gets.Store(0); c.hits.Store(0); c.puts.Store(0) }

// packageTree is a synthetic root file system: 12 "packages" of 40
// files, sizes spread log-uniformly from 10 bytes to 400 KiB. Like
// fixture, a copy of the slice, built once (tests clone the data they
// change).
func packageTree() []Entry { return slices.Clone(packageTreeOnce()) }

var packageTreeOnce = sync.OnceValue(buildPackageTree)

func buildPackageTree() []Entry {
	r := rand.New(rand.NewPCG(3, 4))
	es := []Entry{dir("/", 0o755, 0, 0), dir("/usr", 0o755, 0, 0)}
	for p := range 12 {
		d := fmt.Sprintf("/usr/pkg%02d", p)
		es = append(es, dir(d, 0o755, 0, 0))
		for f := range 40 {
			n := int(math.Exp(r.Float64()*math.Log(400<<10/10))) * 10
			es = append(es, file(fmt.Sprintf("%s/file%02d", d, f), 0o644, content(uint64(p*100+f), n)))
		}
	}
	return es
}

// TestCache: a rebuild with the cache recompresses only blocks whose bytes
// changed, and gives the same image as a build without a cache.
func TestCache(t *testing.T) {
	testutil.Slow(t)
	dc, err := blobcache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cache := &countingCache{BlockCache: dc}
	es := packageTree()
	o := Options{Cache: cache}

	cold := imageBytes(t, es, o)
	jobs := cache.puts.Load()
	t.Logf("cold build: %d blocks compressed and stored", jobs)
	if jobs == 0 || cache.hits.Load() != 0 {
		t.Fatalf("cold build: %d puts, %d hits", jobs, cache.hits.Load())
	}

	cache.reset()
	warm := imageBytes(t, es, o)
	if !bytes.Equal(cold, warm) {
		t.Fatal("a build from the cache differs")
	}
	if cache.puts.Load() != 0 || cache.hits.Load() != jobs {
		t.Errorf("unchanged rebuild: %d puts, %d hits of %d", cache.puts.Load(), cache.hits.Load(), jobs)
	}

	check := func(what string, es []Entry, maxPuts int64) {
		t.Helper()
		cache.reset()
		got := imageBytes(t, es, o)
		want := imageBytes(t, es, Options{})
		if !bytes.Equal(got, want) {
			t.Errorf("%s: image with the cache differs from one without", what)
		}
		t.Logf("%s: %d of %d blocks recompressed", what, cache.puts.Load(), cache.gets.Load())
		if cache.puts.Load() > maxPuts {
			t.Errorf("%s: %d blocks recompressed, want at most %d", what, cache.puts.Load(), maxPuts)
		}
	}

	// A small file changes size: its fragment block, perhaps a neighbour.
	es2 := append([]Entry(nil), es...)
	var small *Entry
	for i := len(es2) / 2; small == nil; i++ {
		if n := len(es2[i].Data); n > 1000 && n < 20000 {
			small = &es2[i]
		}
	}
	small.Data = append(bytes.Clone(small.Data[:len(small.Data)/2]), "changed"...)
	check("small file "+small.Path+" changed", es2, 3)

	// One block of a large file changes: that block only.
	es3 := append([]Entry(nil), es...)
	var big *Entry
	for i := range es3 {
		if len(es3[i].Data) > 3*defaultBlockSize {
			big = &es3[i]
			break
		}
	}
	big.Data = bytes.Clone(big.Data)
	copy(big.Data[defaultBlockSize+10:], "changed")
	check("one block of "+big.Path+" changed", es3, 1)

	// A package gains a file and loses another.
	es4 := append([]Entry(nil), es...)
	for i := range es4 {
		if es4[i].Path == "/usr/pkg20/file10" {
			es4 = append(es4[:i], es4[i+1:]...)
			break
		}
	}
	es4 = append(es4, file("/usr/pkg05/newfile", 0o644, content(999, 5000)))
	check("file added and file removed", es4, 6)
}

var plainPackage = sync.OnceValues(func() ([]byte, error) {
	var buf bytes.Buffer
	err := Write(&buf, packageTree(), Options{})
	return buf.Bytes(), err
})

// plainPackageImage is packageTree's image with the default options,
// written once for the package.
func plainPackageImage(t *testing.T) []byte {
	t.Helper()
	b, err := plainPackage()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDigestKeys: entries that carry their sha256 give the same image, and
// a rebuild from the cache reads whole-file blocks by digest.
func TestDigestKeys(t *testing.T) {
	es := packageTree()
	plain := plainPackageImage(t)
	withDigests := append([]Entry(nil), es...)
	for i := range withDigests {
		if withDigests[i].Mode&sIFMT == sIFREG {
			withDigests[i].Digest = sha256.Sum256(withDigests[i].Data)
		}
	}
	dc, err := blobcache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cache := &countingCache{BlockCache: dc}
	if got := imageBytes(t, withDigests, Options{Cache: cache}); !bytes.Equal(got, plain) {
		t.Fatal("an image from entries with digests differs")
	}
	cold := cache.puts.Load()
	cache.reset()
	if got := imageBytes(t, withDigests, Options{Cache: cache}); !bytes.Equal(got, plain) {
		t.Fatal("an image from the digest-keyed cache differs")
	}
	if cache.puts.Load() != 0 || cache.hits.Load() != cold {
		t.Errorf("rebuild: %d puts, %d hits of %d", cache.puts.Load(), cache.hits.Load(), cold)
	}
}

// TestPrecompressor: blocks compressed ahead are the ones Write wants; the
// image is the same, and Write compresses only what was not done ahead
// (the fragment blocks).
func TestPrecompressor(t *testing.T) {
	es := digestedPackageTree()
	want := plainPackageImage(t) // digests change no byte (TestDigestKeys)
	dc, err := blobcache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cache := &countingCache{BlockCache: dc}
	p, err := NewPrecompressor(Options{Cache: cache}, 2)
	if err != nil {
		t.Fatal(err)
	}
	precompressAll(p, es)
	ahead := cache.puts.Load()
	cache.reset()
	if got := imageBytes(t, es, Options{Cache: cache}); !bytes.Equal(got, want) {
		t.Fatal("the image differs when blocks were compressed ahead")
	}
	rest := cache.puts.Load()
	fresh := &countingCache{BlockCache: newDir(t)}
	imageBytes(t, es, Options{Cache: fresh})
	t.Logf("%d blocks compressed ahead, %d by Write after, %d in a cold build", ahead, rest, fresh.puts.Load())
	if ahead == 0 || ahead+rest != fresh.puts.Load() {
		t.Errorf("%d ahead + %d after, want %d in all", ahead, rest, fresh.puts.Load())
	}
}

func newDir(t *testing.T) *blobcache.Dir {
	d, err := blobcache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestHeld: blocks a Precompressor held are taken by Write, each once,
// for the same image; once sealed, what Write compresses itself is not
// kept.
func TestHeld(t *testing.T) {
	es := digestedPackageTree()
	want := plainPackageImage(t)
	h := NewHeld()
	p, err := NewPrecompressor(Options{Cache: h}, 2)
	if err != nil {
		t.Fatal(err)
	}
	precompressAll(p, es)
	h.Seal()
	held := len(h.blocks)
	if held == 0 {
		t.Fatal("nothing held")
	}
	if got := imageBytes(t, es, Options{Cache: h}); !bytes.Equal(got, want) {
		t.Fatal("the image differs when blocks were held")
	}
	if len(h.blocks) != 0 {
		t.Errorf("%d of %d blocks left after the image took them; sealed, Write's own kept", len(h.blocks), held)
	}
	var k [32]byte
	h.Put(k, []byte("x"))
	if h.Has(k) {
		t.Error("a sealed Held kept a block")
	}
}

// digestedPackageTree is packageTree with its files' digests.
func digestedPackageTree() []Entry {
	es := packageTree()
	for i := range es {
		if es[i].Mode&sIFMT == sIFREG {
			es[i].Digest = sha256.Sum256(es[i].Data)
		}
	}
	return es
}

// precompressAll gives p every file of es, lets its queue drain, then
// stops it.
func precompressAll(p *Precompressor, es []Entry) {
	for _, e := range es {
		p.Add(e.Data, e.Digest)
	}
	for {
		p.mu.Lock()
		n := len(p.queue)
		p.mu.Unlock()
		if n == 0 {
			break
		}
		runtime.Gosched()
	}
	p.Stop()
}
