package factory

import (
	"context"
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
