package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/attest/signing/signingtest"
	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/oci"
)

// serving is a factory's Serve on a loopback listener until cancel.
type serving struct {
	addr   string
	cancel context.CancelFunc
	done   chan error
}

func serveFactory(t *testing.T, f *accessFactory, grace time.Duration) *serving {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sv := &serving{addr: ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { sv.done <- f.Serve(ctx, f.Listener(ln), nil, grace) }()
	t.Cleanup(cancel)
	return sv
}

// get answers "STATUS BODY", or the error, on c.
func (sv *serving) get(path string, c chan<- string) {
	resp, err := http.Get("http://" + sv.addr + path)
	if err != nil {
		c <- err.Error()
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	c <- fmt.Sprint(resp.StatusCode, " ", string(b))
}

// TestServeDrains: a factory told to stop while a build is in flight
// accepts no new connection, lets the build finish and its request get
// 200, caches the entry, and returns nil.
func TestServeDrains(t *testing.T) {
	cache, err := oci.CreateLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	signer := signingtest.Signer(t)
	f := newAccessFactory(t, Options{Service: factory.Options{Signer: signer, Cache: cache}})
	started, release := blockingBuilds(f)
	sv := serveFactory(t, f, time.Minute)
	kernel := "/image/" + f.id + "/1.0/kernel-amd64"
	got := make(chan string, 1)
	go sv.get(kernel, got)
	<-started
	sv.cancel()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		c, err := net.Dial("tcp", sv.addr)
		if err != nil {
			break // stopped accepting
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections after the stop")
		}
	}
	select {
	case err := <-sv.done:
		t.Fatalf("stopped with a build in flight: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if g := <-got; g != "200 kernel-x86_64" {
		t.Errorf("the request in flight: %s", g)
	}
	if err := <-sv.done; err != nil {
		t.Errorf("Serve after a graceful stop: %v", err)
	}
	if !strings.Contains(f.log.String(), "stopped: every request and build in flight finished") {
		t.Errorf("the log does not say it stopped:\n%s", f.log)
	}
	// The entry was cached: another factory on the cache serves it.
	g := newAccessFactory(t, Options{Service: factory.Options{Signer: signer, Cache: cache}})
	g.svc.BuildWith(func(context.Context, *factory.VerifiedRelease, *schematic.Schematic, factory.Artifact, string) ([]byte, error) {
		return nil, errors.New("built again")
	})
	if resp, body := g.do(t, "GET", kernel, ""); resp.StatusCode != 200 || body != "kernel-x86_64" || g.svc.Stats().Hits != 1 {
		t.Errorf("after the stop: %d %q %+v", resp.StatusCode, body, g.svc.Stats())
	}
}

// TestServeGraceRunsOut: a build that outlasts the grace is cut, and
// Serve says so.
func TestServeGraceRunsOut(t *testing.T) {
	f := newAccessFactory(t, Options{})
	started, release := blockingBuilds(f)
	defer close(release)
	sv := serveFactory(t, f, 100*time.Millisecond)
	got := make(chan string, 1)
	go sv.get("/image/"+f.id+"/1.0/kernel-amd64", got)
	<-started
	sv.cancel()
	err := <-sv.done
	if err == nil || !strings.Contains(err.Error(), "shutdown grace of 100ms ran out: 1 requests and 1 builds in flight cut") {
		t.Errorf("Serve when the grace runs out: %v", err)
	}
	if g := <-got; strings.HasPrefix(g, "200") {
		t.Errorf("a cut request answered %s", g)
	}
}
