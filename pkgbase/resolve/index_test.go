package resolve

import (
	"hash/maphash"
	"slices"
	"testing"

	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/pkgbase/resolve/internal/synth"
)

// refIndex is nameIndex as a plain map of lists, built the obvious way.
type refIndex struct {
	name, file, obsBy map[string][]int32
	prov              map[string][]provRef
}

func buildRefIndex(cands []*repo.Package, paths []string) *refIndex {
	x := &refIndex{name: map[string][]int32{}, file: map[string][]int32{}, obsBy: map[string][]int32{}, prov: map[string][]provRef{}}
	wanted := map[string]bool{}
	for _, f := range paths {
		wanted[f] = true
	}
	for _, p := range cands {
		for _, d := range append(slices.Clone(p.Requires), p.Conflicts...) {
			if len(d.Name) > 0 && d.Name[0] == '/' {
				wanted[d.Name] = true
			}
		}
	}
	for i, p := range cands {
		ci := int32(i)
		x.name[p.Name] = append(x.name[p.Name], ci)
		for j, d := range p.Provides {
			x.prov[d.Name] = append(x.prov[d.Name], provRef{ci, int32(j)})
		}
		for _, f := range p.Files {
			if wanted[f] {
				x.file[f] = append(x.file[f], ci)
			}
		}
		for _, o := range p.Obsoletes {
			if o.Name != p.Name {
				x.obsBy[o.Name] = append(x.obsBy[o.Name], ci)
			}
		}
	}
	return x
}

// TestNameIndexMatchesMaps: every look-up of the hash-grouped index gives
// what a map of lists gives, for every name there is and some that are
// not, on the synthetic index, and with hash collisions forced.
func TestNameIndexMatchesMaps(t *testing.T) {
	t.Run("maphash", func(t *testing.T) { testNameIndex(t) })
	t.Run("collisions", func(t *testing.T) {
		defer func(h func(maphash.Seed, string) uint32) { nameHash = h }(nameHash)
		// 256 hash values for some 20,000 names.
		nameHash = func(seed maphash.Seed, s string) uint32 { return uint32(maphash.String(seed, s)) & 0xf000000f }
		testNameIndex(t)
	})
}

func testNameIndex(t *testing.T) {
	cands := synth.Repo(2000, 3)
	// Some without provides (and the first and last).
	for i := range cands {
		if i%7 == 0 || i == len(cands)-1 {
			q := *cands[i]
			q.Provides = nil
			cands[i] = &q
		}
	}
	paths := []string{"/bin/sh", "/usr/lib64/libnope.so", "/usr/bin/python3"}
	ref := buildRefIndex(cands, paths)
	var x nameIndex
	x.build(cands, paths)
	names := []string{"", "no-such-name", "/no/such/file"}
	for _, p := range cands {
		names = append(names, p.Name)
		for _, d := range p.Provides {
			names = append(names, d.Name)
		}
		for _, d := range p.Requires {
			names = append(names, d.Name)
		}
		names = append(names, p.Files...)
	}
	for _, s := range names {
		if g, w := x.named(s), ref.name[s]; !slices.Equal(g, w) {
			t.Fatalf("named(%q) = %v, want %v", s, g, w)
		}
		if g, w := x.provides(s), ref.prov[s]; !slices.Equal(g, w) {
			t.Fatalf("provides(%q) = %v, want %v", s, g, w)
		}
		if g, w := x.files(s), ref.file[s]; !slices.Equal(g, w) {
			t.Fatalf("files(%q) = %v, want %v", s, g, w)
		}
		if g, w := x.obsoleters(s), ref.obsBy[s]; !slices.Equal(g, w) {
			t.Fatalf("obsoleters(%q) = %v, want %v", s, g, w)
		}
	}
}

func TestSortHashesStable(t *testing.T) {
	for _, n := range []int{0, 1, 100, 2000} {
		hs := make([]uint32, n)
		for i := range hs {
			// Few distinct hashes, in both halves.
			hs[i] = uint32(i%7) * 0x01234567
		}
		got, top := sortHashes(hs)
		want := make([]hashed, n)
		for i, h := range hs {
			want[i] = hashed{h, int32(i)}
		}
		slices.SortStableFunc(want, func(x, y hashed) int {
			switch {
			case x.h < y.h:
				return -1
			case x.h > y.h:
				return 1
			}
			return 0
		})
		if !slices.Equal(got, want) {
			t.Fatalf("n=%d: not sorted stably", n)
		}
		if len(top) != 1<<16+1 || top[len(top)-1] != int32(n) {
			t.Fatalf("n=%d: top table %d long, ends at %d", n, len(top), top[len(top)-1])
		}
		for i, e := range got {
			d := e.h >> 16
			if int32(i) < top[d] || int32(i) >= top[d+1] {
				t.Fatalf("n=%d: %x at %d, outside [%d, %d)", n, e.h, i, top[d], top[d+1])
			}
		}
	}
}
