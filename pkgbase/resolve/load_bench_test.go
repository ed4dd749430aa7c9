package resolve

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/ulikunitz/xz"
	"golang.org/x/crypto/blake2b"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/pkgbase/resolve/internal/synth"
	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// writeSyntheticDist writes pkgs as an apt-rpm dist (pkglist.classic.xz and
// an unsigned release listing its hashes) and returns its directory.
func writeSyntheticDist(tb testing.TB, pkgs []*repo.Package) string {
	var plain bytes.Buffer
	for i, p := range pkgs {
		b := rpmhdr.NewBuilder()
		b.SetString(rpmhdr.TagName, p.Name)
		b.SetString(rpmhdr.TagVersion, p.EVR.Version)
		b.SetString(rpmhdr.TagRelease, p.EVR.Release)
		if p.EVR.HasEpoch {
			b.SetInt32(rpmhdr.TagEpoch, uint32(p.EVR.Epoch))
		}
		if p.EVR.Disttag != "" {
			b.SetString(rpmhdr.TagDistTag, p.EVR.Disttag)
		}
		b.SetString(rpmhdr.TagArch, p.Arch)
		b.SetInt32(rpmhdr.TagBuildTime, uint32(p.BuildTime))
		b.SetString(rpmhdr.TagSourceRPM, p.Name+"-"+p.EVR.Version+"-"+p.EVR.Release+".src.rpm")
		for _, k := range []struct {
			deps          []repo.Dep
			name, fl, ver uint32
		}{
			{p.Provides, rpmhdr.TagProvideName, rpmhdr.TagProvideFlags, rpmhdr.TagProvideVersion},
			{p.Requires, rpmhdr.TagRequireName, rpmhdr.TagRequireFlags, rpmhdr.TagRequireVersion},
			{p.Conflicts, rpmhdr.TagConflictName, rpmhdr.TagConflictFlags, rpmhdr.TagConflictVersion},
			{p.Obsoletes, rpmhdr.TagObsoleteName, rpmhdr.TagObsoleteFlags, rpmhdr.TagObsoleteVersion},
		} {
			if len(k.deps) == 0 {
				continue
			}
			var names, vers []string
			var flags []uint32
			for _, d := range k.deps {
				names, vers, flags = append(names, d.Name), append(vers, d.Version), append(flags, d.Flags)
			}
			b.SetStrings(k.name, names)
			b.SetStrings(k.ver, vers)
			b.SetInt32(k.fl, flags...)
		}
		if len(p.Files) > 0 {
			var bases, dirs []string
			var idx []uint32
			dirIndex := map[string]uint32{}
			for _, f := range p.Files {
				d, base := path.Split(f)
				j, ok := dirIndex[d]
				if !ok {
					j = uint32(len(dirs))
					dirIndex[d] = j
					dirs = append(dirs, d)
				}
				bases, idx = append(bases, base), append(idx, j)
			}
			b.SetStrings(rpmhdr.TagBaseNames, bases)
			b.SetStrings(rpmhdr.TagDirNames, dirs)
			b.SetInt32(rpmhdr.TagDirIndexes, idx...)
		}
		fn := fmt.Sprintf("%s-%s-%s.%s.rpm", p.Name, p.EVR.Version, p.EVR.Release, p.Arch)
		b.SetString(rpmhdr.CRPMTagFilename, fn)
		b.SetInt32(rpmhdr.CRPMTagFileSize, uint32(10000+i))
		b.SetString(rpmhdr.CRPMTagMD5, fmt.Sprintf("%032x", i))
		b.SetString(rpmhdr.CRPMTagBLAKE2b, fmt.Sprintf("%0128x", i))
		b.SetString(rpmhdr.CRPMTagDirectory, "RPMS.classic")
		plain.Write(b.Marshal())
	}
	var comp bytes.Buffer
	w, err := xz.NewWriter(&comp)
	if err != nil {
		tb.Fatal(err)
	}
	w.Write(plain.Bytes())
	w.Close()
	b2 := func(b []byte) string { s := blake2b.Sum512(b); return hex.EncodeToString(s[:]) }
	m5 := func(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }
	rel := fmt.Sprintf("Origin: synthetic\nComponents: classic\nMD5Sum:\n %s %d base/pkglist.classic\n %s %d base/pkglist.classic.xz\nBLAKE2b:\n %s %d base/pkglist.classic\n %s %d base/pkglist.classic.xz\n",
		m5(plain.Bytes()), plain.Len(), m5(comp.Bytes()), comp.Len(), b2(plain.Bytes()), plain.Len(), b2(comp.Bytes()), comp.Len())
	dir := tb.TempDir()
	os.MkdirAll(filepath.Join(dir, "base"), 0o755)
	os.WriteFile(filepath.Join(dir, "base", "pkglist.classic.xz"), comp.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "base", "release"), []byte(rel), 0o644)
	return dir
}

func loadAndResolve(tb testing.TB, dir string, reqs []string) (*Result, int) {
	src, err := repo.NewSource(dir, repo.SourceOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	r, err := repo.LoadALT(context.Background(), src, repo.ALTOptions{InsecureSkipVerify: true})
	if err != nil {
		tb.Fatal(err)
	}
	res, err := Resolve(r.Packages, reqs, nodeOSOpts)
	if err != nil {
		tb.Fatal(err)
	}
	return res, len(r.Packages)
}

// TestLoadAndResolveSynthetic checks the benchmark's setup: the index
// round-trips through a real pkglist and resolves to the same closure.
func TestLoadAndResolveSynthetic(t *testing.T) {
	testutil.Slow(t)
	// The benchmark's 20,000 packages end to end; the loader's
	// concurrency is pkgbase/repo's tests', under -race.
	testutil.NoRace(t)
	pkgs, reqs := synth.NodeOS(20000, 1)
	dir := writeSyntheticDist(t, pkgs)
	res, n := loadAndResolve(t, dir, reqs)
	if n != len(pkgs) {
		t.Fatalf("loaded %d of %d packages", n, len(pkgs))
	}
	direct, err := Resolve(pkgs, reqs, nodeOSOpts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Packages) != len(direct.Packages) || len(res.Packages) < 250 {
		t.Fatalf("closure through the pkglist: %d packages, directly: %d", len(res.Packages), len(direct.Packages))
	}
	for i := range res.Packages {
		if res.Packages[i].NEVRA() != direct.Packages[i].NEVRA() {
			t.Fatalf("package %d: %s vs %s", i, res.Packages[i].NEVRA(), direct.Packages[i].NEVRA())
		}
	}
}

// BenchmarkLoadAndResolveNodeOS is the target: load a 20,000
// package ALT index (xz pkglist, hash-checked against the release) and
// resolve a ~300-package node OS from it. Target: under 1 s on 2 cores.
func BenchmarkLoadAndResolveNodeOS(b *testing.B) {
	pkgs, reqs := synth.NodeOS(20000, 1)
	dir := writeSyntheticDist(b, pkgs)
	st, _ := os.Stat(filepath.Join(dir, "base", "pkglist.classic.xz"))
	b.ReportAllocs()
	var res *Result
	for b.Loop() {
		res, _ = loadAndResolve(b, dir, reqs)
	}
	b.StopTimer()
	b.ReportMetric(float64(len(res.Packages)), "pkgs")
	b.ReportMetric(float64(st.Size())/(1<<20), "pkglist-xz-MB")
	peak, _ := peakHeap(func() { loadAndResolve(b, dir, reqs) })
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
}
