package resolve

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nodeforge/builder/pkgbase/resolve/internal/synth"
)

var nodeOSOpts = Options{Arch: "x86_64", TargetBranch: "p10"}

func TestSyntheticShape(t *testing.T) {
	pkgs, reqs := synth.NodeOS(20000, 1)
	if len(pkgs) < 20000 || len(pkgs) > 20100 {
		t.Fatalf("%d packages", len(pkgs))
	}
	var nprov, nreq, noarch, withFiles int
	for _, p := range pkgs {
		nprov += len(p.Provides)
		nreq += len(p.Requires)
		if p.Arch == "noarch" {
			noarch++
		}
		if len(p.Files) > 0 {
			withFiles++
		}
	}
	avgP, avgR := float64(nprov)/float64(len(pkgs)), float64(nreq)/float64(len(pkgs))
	t.Logf("%d packages: %.1f provides, %.1f requires per package, %d noarch; %d requests", len(pkgs), avgP, avgR, noarch, len(reqs))
	if avgP < 5 || avgP > 9 || avgR < 10 || avgR > 14 {
		t.Errorf("density off ALT's (~7 provides, ~12 requires): %.1f, %.1f", avgP, avgR)
	}
	if len(reqs) < 280 || len(reqs) > 330 {
		t.Errorf("%d requests, want ~300", len(reqs))
	}
	// Deterministic.
	again := synth.Repo(20000, 1)
	for i := range pkgs {
		if pkgs[i].NEVRA() != again[i].NEVRA() || len(pkgs[i].Requires) != len(again[i].Requires) {
			t.Fatalf("package %d differs between runs: %s, %s", i, pkgs[i].NEVRA(), again[i].NEVRA())
		}
	}

	start := time.Now()
	res, err := Resolve(pkgs, reqs, nodeOSOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node OS: %d packages in %v", len(res.Packages), time.Since(start))
	if n := len(res.Packages); n < 280 || n > 360 {
		t.Errorf("closure of %d packages, want ~300", n)
	}
	var kernels int
	for _, p := range res.Packages {
		if p.Name == "kernel-image-std-def" {
			kernels++
			if p.EVR.Version != "6.6.30" {
				t.Errorf("kernel %s, want the one zfs is built for", p.NEVRA())
			}
		}
		if p.Arch != "x86_64" && p.Arch != "noarch" {
			t.Errorf("%s: wrong arch", p.NEVRA())
		}
	}
	if kernels != 1 {
		t.Errorf("%d kernels", kernels)
	}
	checkClosed(t, res, nodeOSOpts)

	// Shuffled input, same answer.
	if testing.Short() {
		return
	}
	want := names(res)
	rng := rand.New(rand.NewPCG(7, 7))
	for range 2 {
		sh := slices.Clone(pkgs)
		rng.Shuffle(len(sh), func(i, j int) { sh[i], sh[j] = sh[j], sh[i] })
		rq := slices.Clone(reqs)
		rng.Shuffle(len(rq), func(i, j int) { rq[i], rq[j] = rq[j], rq[i] })
		res2, err := Resolve(sh, rq, nodeOSOpts)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(res2); !slices.Equal(got, want) {
			t.Fatalf("shuffled input resolves differently:\n%v\n%v", got, want)
		}
	}
}

// checkClosed verifies a result independently of the solver: every
// requirement met inside the set, no conflicts, one version per name.
func checkClosed(t *testing.T, res *Result, opts Options) {
	t.Helper()
	r, err := newResolver(res.Packages, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for ci, p := range r.cands {
		byName[p.Name]++
		for j := range p.Requires {
			d := &p.Requires[j]
			if isRPMLib(d) {
				continue
			}
			if len(r.providers(d, p.Semantics)) == 0 {
				t.Errorf("%s requires %s: not in the result", p.NEVRA(), depString(d))
			}
		}
		for j := range p.Conflicts {
			for _, q := range r.providers(&p.Conflicts[j], p.Semantics) {
				if q != int32(ci) {
					t.Errorf("%s conflicts with %s", p.NEVRA(), r.cands[q].NEVRA())
				}
			}
		}
	}
	for name, n := range byName {
		if n > 1 && !r.multiVersion(name) {
			t.Errorf("%d versions of %s", n, name)
		}
	}
}

// BenchmarkResolveNodeOS resolves a ~300-package node OS from a 20,000
// package index, building the provider index each time.
func BenchmarkResolveNodeOS(b *testing.B) {
	pkgs, reqs := synth.NodeOS(20000, 1)
	b.ReportAllocs()
	var res *Result
	var err error
	for b.Loop() {
		res, err = Resolve(pkgs, reqs, nodeOSOpts)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(len(res.Packages)), "pkgs")
	peak, base := peakHeap(func() {
		if _, err := Resolve(pkgs, reqs, nodeOSOpts); err != nil {
			b.Fatal(err)
		}
	})
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(peak-base)/(1<<20), "resolve-heap-MB")
}

// peakHeap runs f while sampling runtime.MemStats.HeapAlloc and returns
// the highest value seen and the live heap before f (the input index).
func peakHeap(f func()) (peak, base uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base = ms.HeapAlloc
	peak = base
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m runtime.MemStats
		tick := time.NewTicker(500 * time.Microsecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	wg.Wait()
	runtime.ReadMemStats(&ms)
	peak = max(peak, ms.HeapAlloc)
	return peak, base
}
