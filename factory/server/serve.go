package server

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"
)

// Serve serves the API on ln (Listener's, wrapped in TLS or not) with
// HTTPServer's bounds until ctx ends, then stops gracefully: no new
// connection is accepted (the listener closes, so a balancer sends the
// next request to another replica), idle keep-alive connections close,
// and the requests and builds in flight, those whose client hung up
// included, have grace to finish, their entries cached. It returns nil
// when everything finished, and an error saying what was cut when the
// grace ran out first.
func (s *Server) Serve(ctx context.Context, ln net.Listener, errorLog *log.Logger, grace time.Duration) error {
	hs := s.HTTPServer(errorLog)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	requests, builds := s.active.Load(), s.svc.BuildsInFlight()
	s.o.Log.Info("stopping: no new connections; the requests and builds in flight may finish", "requests", requests, "builds", builds, "grace", grace)
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	herr := hs.Shutdown(sctx)
	berr := s.svc.WaitBuilds(sctx)
	if herr != nil || berr != nil {
		requests, builds = s.active.Load(), s.svc.BuildsInFlight()
		hs.Close()
		return fmt.Errorf("the shutdown grace of %v ran out: %d requests and %d builds in flight cut (a build cut leaves no cache entry)", grace, requests, builds)
	}
	s.o.Log.Info("stopped: every request and build in flight finished")
	return nil
}
