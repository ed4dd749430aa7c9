package repo

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/nodeforge/builder/pkgbase/evr"
)

// encodeIndex returns an entry's bytes.
func encodeIndex(ci *cachedIndex, repoURL string) []byte {
	var b bytes.Buffer
	writeIndex(&b, ci, repoURL)
	return b.Bytes()
}

func cacheEntries(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+indexCacheSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func loadWithCache(t *testing.T, location, cache string) *Loaded {
	t.Helper()
	ld, err := Load(context.Background(), location, AnyOptions{InsecureSkipVerify: true, IndexCache: cache})
	if err != nil {
		t.Fatal(err)
	}
	return ld
}

// sameLoaded compares what Load returns, the Source aside.
func sameLoaded(t *testing.T, what string, got, want *Loaded) {
	t.Helper()
	g, w := *got, *want
	g.Source, w.Source = nil, nil
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: loaded\n%+v\nwant\n%+v", what, g, w)
	}
}

func TestIndexCacheEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	str := func() string {
		return []string{"", "a", "libfoo.so.1()(64bit)", "/usr/bin/x", "é\x00\xff", "1:2.0-3"}[r.IntN(6)]
	}
	deps := func() []Dep {
		switch r.IntN(3) {
		case 0:
			return nil
		case 1:
			return []Dep{}
		}
		var ds []Dep
		for range 1 + r.IntN(4) {
			ds = append(ds, Dep{Name: str(), Flags: r.Uint32(), Version: str()})
		}
		return ds
	}
	var pkgs []*Package
	for i := range 200 {
		if i == 7 {
			pkgs = append(pkgs, nil)
			continue
		}
		p := &Package{Name: str(), EVR: evr.EVR{Epoch: r.IntN(5) - 1, HasEpoch: r.IntN(2) == 0, Version: str(), Release: str(), Disttag: str()},
			Arch: str(), BuildTime: r.Int64() - r.Int64(), SourceRPM: str(), License: str(), Size: r.Int64(),
			Provides: deps(), Requires: deps(), Conflicts: deps(), Obsoletes: deps(),
			Semantics: evr.Semantics(r.IntN(2)), Repo: []string{"http://r", "http://elsewhere", ""}[r.IntN(3)],
			Location: str(), FileSize: r.Int64(), SHA256: str(), BLAKE2b: str(), MD5: str(), SHA1: str()}
		switch r.IntN(3) {
		case 0:
			p.Files = []string{}
		case 1:
			p.Files = []string{str(), str()}
		}
		pkgs = append(pkgs, p)
	}
	for _, ci := range []*cachedIndex{
		{},
		{Packages: []*Package{}, Indexes: []IndexInfo{}},
		{Packages: pkgs, FullFiles: true, Indexes: []IndexInfo{{Path: "base/pkglist.classic.xz", Algorithm: "blake2b", Hash: "00", Size: 12}}},
	} {
		b := encodeIndex(ci, "http://r")
		got, err := decodeIndex(string(b), "http://r")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, ci) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, ci)
		}
		// Another location of the same repository.
		got, err = decodeIndex(string(b), "file:///mirror")
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range got.Packages {
			if p != nil && ci.Packages[i].Repo == "http://r" && p.Repo != "file:///mirror" {
				t.Fatalf("package %d: Repo %q", i, p.Repo)
			}
		}
		// Any damage is refused, never a panic.
		for i := range 300 {
			d := append([]byte(nil), b...)
			switch i % 3 {
			case 0:
				d[r.IntN(len(d))] ^= byte(1 + r.IntN(255))
			case 1:
				d = d[:r.IntN(len(d))]
			case 2:
				d = append(d, 0)
			}
			if _, err := decodeIndex(string(d), "http://r"); err == nil {
				t.Fatalf("damage %d accepted", i)
			}
		}
	}
}

// FuzzIndexCacheDecode: whatever an entry holds, decoding fails or gives
// packages, never panics (the trailer is fixed up so the bytes get
// decoded).
func FuzzIndexCacheDecode(f *testing.F) {
	b := encodeIndex(&cachedIndex{Packages: []*Package{{Name: "a", Files: []string{"/a"}, Provides: []Dep{{Name: "a"}}}}}, "u")
	f.Add(b[len(indexCacheMagic) : len(b)-12])
	f.Fuzz(func(t *testing.T, payload []byte) {
		b := append([]byte(indexCacheMagic), payload...)
		var tr [12]byte
		binary.LittleEndian.PutUint64(tr[:], uint64(len(payload)))
		binary.LittleEndian.PutUint32(tr[8:], crc32.Checksum(payload, castagnoli))
		ci, err := decodeIndex(string(append(b, tr[:]...)), "u")
		if err == nil {
			for _, p := range ci.Packages {
				if p != nil {
					_ = p.NEVRA()
				}
			}
		}
	})
}

func TestIndexCacheRPMMD(t *testing.T) {
	repo := mdFixtureRepo(t)
	cache := filepath.Join(t.TempDir(), "index")
	want := loadWithCache(t, repo, "")

	// A miss parses and writes the entry; a hit gives the same.
	sameLoaded(t, "miss", loadWithCache(t, repo, cache), want)
	entries := cacheEntries(t, cache)
	if len(entries) != 1 {
		t.Fatalf("cache entries %q", entries)
	}
	sameLoaded(t, "hit", loadWithCache(t, repo, cache), want)

	// A hit does not read the indexes: with them gone it still loads,
	// and it does not write.
	st0, _ := os.Stat(entries[0])
	prim, _ := filepath.Glob(filepath.Join(repo, "repodata", "*-primary.xml.gz"))
	saved, err := os.ReadFile(prim[0])
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(prim[0])
	sameLoaded(t, "hit without primary", loadWithCache(t, repo, cache), want)
	if _, err := Load(context.Background(), repo, AnyOptions{InsecureSkipVerify: true}); err == nil {
		t.Fatal("no primary.xml, no cache: loaded")
	}
	if st1, _ := os.Stat(entries[0]); !os.SameFile(st0, st1) {
		t.Error("a hit rewrote the entry")
	}
	os.WriteFile(prim[0], saved, 0o644)

	// Another location of the same repository shares the entry, with
	// its own URL in the packages.
	other := filepath.Join(t.TempDir(), "mirror")
	mdCopyDir(t, repo, other)
	sameLoaded(t, "other location", loadWithCache(t, other, cache), loadWithCache(t, other, ""))
	if n := len(cacheEntries(t, cache)); n != 1 {
		t.Errorf("%d entries after another location", n)
	}

	// Changed metadata: a new repomd.xml is a miss.
	pkgs := want.Packages[:2]
	for _, p := range pkgs {
		if p.SHA256 == "" {
			p.SHA256 = "00"
		}
	}
	if err := WriteRPMMD(repo, pkgs, RPMMDWriteOptions{Revision: 1800000000}); err != nil {
		t.Fatal(err)
	}
	changed := loadWithCache(t, repo, cache)
	sameLoaded(t, "changed", changed, loadWithCache(t, repo, ""))
	if len(changed.Packages) != 2 {
		t.Fatalf("changed repository: %d packages", len(changed.Packages))
	}
	if n := len(cacheEntries(t, cache)); n != 2 {
		t.Errorf("%d entries after a change", n)
	}
}

func TestIndexCacheDamagedEntry(t *testing.T) {
	repo := mdFixtureRepo(t)
	cache := t.TempDir()
	want := loadWithCache(t, repo, "")
	loadWithCache(t, repo, cache)
	entry := cacheEntries(t, cache)[0]
	good, _ := os.ReadFile(entry)
	for name, damage := range map[string]func([]byte) []byte{
		"flipped":   func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b },
		"truncated": func(b []byte) []byte { return b[:len(b)/2] },
		"empty":     func([]byte) []byte { return nil },
		"foreign":   func([]byte) []byte { return []byte("not an index cache entry at all") },
		"old magic": func(b []byte) []byte { b[6] = '0'; return b },
	} {
		if err := os.WriteFile(entry, damage(append([]byte(nil), good...)), 0o644); err != nil {
			t.Fatal(err)
		}
		sameLoaded(t, name, loadWithCache(t, repo, cache), want)
		// The miss wrote a good entry again.
		if b, _ := os.ReadFile(entry); string(b) != string(good) {
			t.Errorf("%s: entry not rewritten", name)
		}
	}
	// A directory in the entry's place, a cache that cannot be made:
	// still loads.
	os.Remove(entry)
	os.Mkdir(entry, 0o755)
	sameLoaded(t, "directory", loadWithCache(t, repo, cache), want)
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	sameLoaded(t, "cache is a file", loadWithCache(t, repo, file), want)
	sameLoaded(t, "cache below a file", loadWithCache(t, repo, filepath.Join(file, "sub")), want)
}

func TestIndexCacheConcurrentWriters(t *testing.T) {
	repo := mdFixtureRepo(t)
	cache := t.TempDir()
	want := loadWithCache(t, repo, "")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				ld, err := Load(context.Background(), repo, AnyOptions{InsecureSkipVerify: true, IndexCache: cache})
				if err != nil {
					errs <- err
					return
				}
				g, w := *ld, *want
				g.Source, w.Source = nil, nil
				if !reflect.DeepEqual(g, w) {
					errs <- os.ErrInvalid
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	entries := cacheEntries(t, cache)
	if len(entries) != 1 {
		t.Fatalf("entries %q", entries)
	}
	b, _ := os.ReadFile(entries[0])
	if _, err := decodeIndex(string(b), "x"); err != nil {
		t.Fatal(err)
	}
	if tmp, _ := filepath.Glob(filepath.Join(cache, ".tmp-*")); len(tmp) != 0 {
		t.Errorf("temporary files left: %q", tmp)
	}
}

func TestIndexCacheALT(t *testing.T) {
	dir := altFixtureRepo(t)
	cache := t.TempDir()
	want := loadWithCache(t, dir, "")
	sameLoaded(t, "miss", loadWithCache(t, dir, cache), want)
	sameLoaded(t, "hit", loadWithCache(t, dir, cache), want)
	// A hit does not read the pkglist.
	os.Remove(filepath.Join(dir, "base", "pkglist.checkinstall.xz"))
	sameLoaded(t, "hit without pkglist", loadWithCache(t, dir, cache), want)

	// Signed: the release is verified on every load, hit or not.
	sdir, ent := signedRepo(t, nil)
	kr := keyringOf(t, ent)
	_, other := signedRepo(t, nil)
	for i := range 2 {
		ld, err := Load(context.Background(), sdir, AnyOptions{Keyring: kr, IndexCache: cache})
		if err != nil || len(ld.Signers) != 1 || len(ld.Packages) != 14 || len(ld.Indexes) != 1 {
			t.Fatalf("load %d: %v", i, err)
		}
		if _, err := Load(context.Background(), sdir, AnyOptions{Keyring: keyringOf(t, other), IndexCache: cache}); err == nil {
			t.Fatalf("load %d: a wrong key verifies with a cache", i)
		}
	}
}

func TestIndexCachePrune(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old"+indexCacheSuffix)
	recent := filepath.Join(dir, "recent"+indexCacheSuffix)
	other := filepath.Join(dir, "other.txt")
	for _, f := range []string{old, recent, other} {
		os.WriteFile(f, []byte("x"), 0o644)
	}
	past := time.Now().Add(-2 * indexCacheMaxAge)
	os.Chtimes(old, past, past)
	os.Chtimes(other, past, past)
	writeIndexCache(dir, "new", "u", &cachedIndex{})
	for f, keep := range map[string]bool{old: false, recent: true, other: true, filepath.Join(dir, "new"+indexCacheSuffix): true} {
		if _, err := os.Stat(f); (err == nil) != keep {
			t.Errorf("%s: kept %v, want %v", f, err == nil, keep)
		}
	}
}

// TestIndexCacheTruncatedUnderMapping: an entry cut short after it was
// mapped faults when read; that is a miss, not a crash.
func TestIndexCacheTruncatedUnderMapping(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("entries are mapped on Linux only")
	}
	dir := t.TempDir()
	pkgs := make([]*Package, 3000)
	for i := range pkgs {
		pkgs[i] = &Package{Name: "p", Files: []string{"/usr/share/doc/some/long/path/" + string(rune('a'+i%26))}}
	}
	writeIndexCache(dir, "k", "u", &cachedIndex{Packages: pkgs})
	path := indexCachePath(dir, "k")
	data, release, err := mapIndexFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 10); err != nil {
		t.Fatal(err)
	}
	if _, ok := decodeMapped(data, release, "u"); ok {
		t.Fatal("decoded a truncated entry")
	}
	if _, ok := readIndexCache(dir, "k", "u"); ok {
		t.Fatal("read a truncated entry")
	}
}

func TestIndexCacheAsync(t *testing.T) {
	repo := mdFixtureRepo(t)
	cache := t.TempDir()
	want := loadWithCache(t, repo, "")
	ld, err := Load(context.Background(), repo, AnyOptions{InsecureSkipVerify: true, IndexCache: cache, IndexCacheAsync: true})
	if err != nil {
		t.Fatal(err)
	}
	sameLoaded(t, "async miss", ld, want)
	WaitIndexCache()
	if n := len(cacheEntries(t, cache)); n != 1 {
		t.Fatalf("%d entries after WaitIndexCache", n)
	}
	sameLoaded(t, "hit", loadWithCache(t, repo, cache), want)
}
