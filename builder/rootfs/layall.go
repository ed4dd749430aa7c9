package rootfs

import (
	"cmp"
	"context"
	"os"
	"slices"
	"sync"

	"github.com/nodeforge/builder/api/report"
)

// RPMToLay is one package file to lay and where it comes from.
type RPMToLay struct {
	Path   string
	Origin report.Origin
}

// AddRPMs lays packages into the tree in the order given, through the
// cache c (nil: none), as AddRPMCached would one after the other. The
// packages are read (decompressed, checked, hashed) by up to workers
// goroutines at once, the largest files first so that the biggest package
// (the kernel, say) does not start last and finish alone; the tree takes
// them in the given order, so it, the results and the first error are
// those of laying them one by one.
func (t *Tree) AddRPMs(ctx context.Context, pkgs []RPMToLay, opts LayOptions, c *LayCache, workers int) ([]*PackageResult, error) {
	type outcome struct {
		lp   *laidPackage
		err  error
		done chan struct{}
	}
	outs := make([]outcome, len(pkgs))
	for i := range outs {
		outs[i].done = make(chan struct{})
	}
	schedule := make([]int, len(pkgs))
	sizes := make([]int64, len(pkgs))
	for i, p := range pkgs {
		schedule[i] = i
		if st, err := os.Stat(p.Path); err == nil {
			sizes[i] = st.Size()
		}
	}
	slices.SortStableFunc(schedule, func(a, b int) int { return cmp.Compare(sizes[b], sizes[a]) })

	opts.arena = &contentArena{}
	ctx, cancel := context.WithCancel(ctx)
	next := make(chan int)
	var wg sync.WaitGroup
	// On return (an error, say) the packages still being read stop at
	// their next entry, and none is handed out any more.
	defer func() { cancel(); wg.Wait() }()
	for range max(1, min(workers, len(pkgs))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				o := &outs[i]
				if o.err = ctx.Err(); o.err == nil {
					o.lp, o.err = readCached(ctx, pkgs[i].Path, pkgs[i].Origin, opts, c)
				}
				close(o.done)
			}
		}()
	}
	go func() {
		defer close(next)
		for _, i := range schedule {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()

	results := make([]*PackageResult, len(pkgs))
	for i := range pkgs {
		select {
		case <-outs[i].done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		o := &outs[i]
		if o.err != nil {
			return nil, o.err
		}
		if err := t.addLaid(o.lp, pkgs[i].Origin); err != nil {
			return nil, err
		}
		results[i], o.lp = o.lp.res, nil
		if opts.OnPackage != nil {
			opts.OnPackage(i+1, len(pkgs), results[i])
		}
	}
	return results, nil
}
