package factory

import (
	"context"
	"fmt"
	"sync/atomic"

	"golang.org/x/sync/singleflight"

	"github.com/nodeforge/builder/api/schematic"
)

// Service is the Image Factory without its HTTP front: the releases it
// serves (a catalog of verified releases, listed again by RetryFailed),
// the schematics, the artifact cache, and the builds behind them (one
// per key, at most MaxBuilds at once, a bounded queue); Warm and Collect
// work on it. Server is its HTTP front, which asks it for releases,
// schematics and artifacts.
type Service struct {
	o          ServerOptions
	schematics *schematics
	cat        atomic.Pointer[catalog] // what is served
	cache      *artifactCache
	metrics    *metrics
	builds     singleflight.Group
	built      atomic.Int64
	slots      chan struct{} // builds running
	queue      chan struct{} // builds waiting for a slot
	buildFn    func(context.Context, *Release, *schematic.Schematic, artifact, string) ([]byte, error)
	running    running    // builds in flight
	inst       installers // the checked installer entries
	// buildAllowed says whether the request in ctx may start a build (its
	// login, its rate: the front's check), asked on a cache miss so that
	// cached artifacts need no leave; nil: any may. An error it returns
	// that is a perClient refuses that request alone, not the others
	// waiting for the same build.
	buildAllowed func(ctx context.Context) error
}

// perClient is an error said of one client (its login, its rate), not of
// the factory.
type perClient interface {
	error
	PerClient() bool
}

// BusyError is a build refused because MaxBuilds builds run and MaxQueue
// wait already (the front answers 503 with a Retry-After).
type BusyError struct{ Running, Waiting int }

func (e *BusyError) Error() string {
	return fmt.Sprintf("the factory is busy: %d builds run and %d wait; try again later", e.Running, e.Waiting)
}
