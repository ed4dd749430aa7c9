package factory

import (
	"context"
	"os"
	"sync"
)

// running counts the builds in flight (cache lookups and builds, whether
// a client still waits for them or not).
type running struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0
}

func (r *running) start() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		r.idle = make(chan struct{})
	}
	r.n++
}

func (r *running) done() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n--; r.n == 0 {
		close(r.idle)
	}
}

func (r *running) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// wait returns when nothing runs, or ctx's error when it ends first.
func (r *running) wait(ctx context.Context) error {
	r.mu.Lock()
	idle := r.idle
	n := r.n
	r.mu.Unlock()
	if n == 0 {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// buildSlot is what a build on a cache miss waits for: the request's
// leave to build (mayBuild, of ctx: the request's) and then a build slot
// (takeSlot, within bctx: the build's); free gives the slot back.
func (s *Service) buildSlot(ctx, bctx context.Context) (free func(), err error) {
	if s.buildAllowed != nil {
		if err := s.buildAllowed(ctx); err != nil {
			return nil, err
		}
	}
	return s.takeSlot(bctx)
}

// takeSlot waits for one of the MaxBuilds build slots, or refuses when
// MaxQueue builds wait already; release gives the slot back.
func (s *Service) takeSlot(ctx context.Context) (release func(), err error) {
	release = func() { <-s.slots }
	select {
	case s.slots <- struct{}{}:
		return release, nil
	default:
	}
	select {
	case s.queue <- struct{}{}:
		defer func() { <-s.queue }()
	default:
		return nil, &BusyError{Running: cap(s.slots), Waiting: cap(s.queue)}
	}
	select {
	case s.slots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// committing holds the artifacts just built whose cache entries are being
// written, by cache key: a request for one meanwhile is served the same
// file instead of building it again.
type committing struct {
	mu sync.Mutex
	m  map[string]*CachedArtifact
}

func (c *committing) get(key string) *CachedArtifact {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

func (c *committing) add(key string, a *CachedArtifact) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*CachedArtifact{}
	}
	c.m[key] = a
}

func (c *committing) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// commit writes the cache entry of the artifact just built in dir while
// it is served: the responses send all of it but its last byte meanwhile,
// and that byte once the entry is written (CachedArtifact.Open), so the
// entry's syncs to disk overlap the transfer, and a client that has the
// whole artifact finds it cached, as before. A stop waits for the entry
// (the build is counted running until it is written). dir is removed
// once the entry is written (the served file stays open), or at once on
// an error.
func (s *Service) commit(ctx context.Context, e entryInfo, f *builtFile, dir string) (*CachedArtifact, error) {
	served, err := f.served()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	w := &entryWrite{done: make(chan struct{})}
	served.committed = w
	s.committing.add(e.Key, served)
	s.running.start()
	// The build's context ends when the build returns: the entry gets
	// its own, within the same limit.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.BuildTimeout)
	go func() {
		defer s.running.done()
		defer cancel()
		if w.err = s.cache.put(cctx, e, f); w.err != nil {
			s.o.Log.Warn("caching an artifact failed", "artifact", e.Name, "err", w.err)
		}
		s.committing.remove(e.Key)
		close(w.done)
		os.RemoveAll(dir)
	}()
	return served, nil
}
