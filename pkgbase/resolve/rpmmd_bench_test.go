package resolve

import (
	"context"
	"testing"

	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/pkgbase/resolve/internal/synth"
)

// writeSyntheticRPMMD writes synth.RPMMD(n, 1) as an rpm-md repository
// and returns its directory and the node OS's requests.
func writeSyntheticRPMMD(tb testing.TB, n int) (string, []string) {
	pkgs, reqs := synth.RPMMD(n, 1)
	dir := tb.TempDir()
	if err := repo.WriteRPMMD(dir, pkgs, repo.RPMMDWriteOptions{}); err != nil {
		tb.Fatal(err)
	}
	return dir, reqs
}

var rpmmdNodeOSOpts = Options{Arch: "x86_64", Semantics: evr.RPM}

func loadAndResolveRPMMD(tb testing.TB, dir string, reqs []string, cache string) (*Result, int) {
	ld, err := repo.Load(context.Background(), dir, repo.AnyOptions{InsecureSkipVerify: true, IndexCache: cache})
	if err != nil {
		tb.Fatal(err)
	}
	res, err := Resolve(ld.Packages, reqs, rpmmdNodeOSOpts)
	if err != nil {
		tb.Fatal(err)
	}
	return res, len(ld.Packages)
}

// BenchmarkLoadAndResolveRPMMD is issue 16's target: load a 20,000
// package rpm-md repository (primary and filelists, gz) and resolve the
// node OS from it, without a parsed-index cache.
func BenchmarkLoadAndResolveRPMMD(b *testing.B) {
	dir, reqs := writeSyntheticRPMMD(b, 20000)
	b.ReportAllocs()
	var res *Result
	for b.Loop() {
		res, _ = loadAndResolveRPMMD(b, dir, reqs, "")
	}
	b.ReportMetric(float64(len(res.Packages)), "pkgs")
}

// BenchmarkLoadAndResolveRPMMDWarm is the same with the parsed-index cache
// filled: what a second `builder resolve` does.
func BenchmarkLoadAndResolveRPMMDWarm(b *testing.B) {
	dir, reqs := writeSyntheticRPMMD(b, 20000)
	cache := b.TempDir()
	loadAndResolveRPMMD(b, dir, reqs, cache)
	b.ReportAllocs()
	var res *Result
	for b.Loop() {
		res, _ = loadAndResolveRPMMD(b, dir, reqs, cache)
	}
	b.ReportMetric(float64(len(res.Packages)), "pkgs")
}

// BenchmarkResolveRPMMD is Resolve alone on the loaded index.
func BenchmarkResolveRPMMD(b *testing.B) {
	dir, reqs := writeSyntheticRPMMD(b, 20000)
	ld, err := repo.Load(context.Background(), dir, repo.AnyOptions{InsecureSkipVerify: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Resolve(ld.Packages, reqs, rpmmdNodeOSOpts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoadAndResolveNodeOSWarm is BenchmarkLoadAndResolveNodeOS (the
// ALT pkglist) read through a filled parsed-index cache.
func BenchmarkLoadAndResolveNodeOSWarm(b *testing.B) {
	pkgs, reqs := synth.NodeOS(20000, 1)
	dir := writeSyntheticDist(b, pkgs)
	cache := b.TempDir()
	load := func() {
		ld, err := repo.Load(context.Background(), dir, repo.AnyOptions{InsecureSkipVerify: true, IndexCache: cache})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Resolve(ld.Packages, reqs, nodeOSOpts); err != nil {
			b.Fatal(err)
		}
	}
	load()
	b.ReportAllocs()
	for b.Loop() {
		load()
	}
}
