// Package httptimeout bounds how long an HTTP exchange may go without
// progress: connecting, the TLS handshake and waiting for the response
// headers together, and every pause while a request body is sent or a
// response body is read. A server that accepts connections and never
// answers then fails with a StallError naming the host, instead of hanging
// the builder. A stall is not retried (retrying a silent server only
// multiplies the wait); failures that retries can fix stay as they were.
package httptimeout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Default is the longest pause without progress when none is set.
const Default = 30 * time.Second

// StallError is a request that made no progress for the timeout.
type StallError struct {
	Method, URL, Host string
	// While is what was awaited: "an answer", "the response body", ...
	While string
	After time.Duration
}

func (e *StallError) Error() string {
	return fmt.Sprintf("%s %s: %s sent nothing for %s while waiting for %s (a stalled or overloaded server; --timeout sets the limit)", e.Method, e.URL, e.Host, e.After, e.While)
}

// Timeout reports true, as net.Error does; Temporary reports false so that
// retry loops (go-containerregistry's among them) do not wait again.
func (e *StallError) Timeout() bool   { return true }
func (e *StallError) Temporary() bool { return false }

// Wrap bounds every exchange through rt by timeout (Default when 0).
func Wrap(rt http.RoundTripper, timeout time.Duration) http.RoundTripper {
	if timeout <= 0 {
		timeout = Default
	}
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &transport{base: rt, timeout: timeout}
}

// Client is an http.Client over http.DefaultTransport's settings, bounded
// by timeout.
func Client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: Wrap(http.DefaultTransport.(*http.Transport).Clone(), timeout)}
}

type transport struct {
	base    http.RoundTripper
	timeout time.Duration
}

// watchdog cancels a request's context when it is not fed for timeout.
type watchdog struct {
	mu      sync.Mutex
	timer   *time.Timer
	timeout time.Duration
	fired   *StallError
	while   string
	stopped bool
}

func (w *watchdog) feed(while string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped && w.fired == nil {
		w.while = while
		w.timer.Reset(w.timeout)
	}
}

func (w *watchdog) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	w.timer.Stop()
}

// stalled returns the StallError when the watchdog fired.
func (w *watchdog) stalled() *StallError {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fired
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	w := &watchdog{timeout: t.timeout, while: "an answer"}
	stall := &StallError{Method: req.Method, URL: req.URL.Redacted(), Host: req.URL.Host, After: t.timeout}
	w.timer = time.AfterFunc(t.timeout, func() {
		w.mu.Lock()
		if w.stopped {
			w.mu.Unlock()
			return
		}
		s := *stall
		s.While = w.while
		w.fired = &s
		w.mu.Unlock()
		cancel(&s)
	})
	r2 := req.WithContext(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		r2.Body = &fedBody{rc: req.Body, w: w, while: "the server to take the request body"}
	}
	resp, err := t.base.RoundTrip(r2)
	if err != nil {
		w.stop()
		cancel(nil)
		if s := w.stalled(); s != nil {
			return nil, s
		}
		return nil, err
	}
	w.feed("the response body")
	resp.Body = &watchedBody{rc: resp.Body, w: w, cancel: cancel}
	return resp, nil
}

// fedBody feeds the watchdog as the request body is sent.
type fedBody struct {
	rc    io.ReadCloser
	w     *watchdog
	while string
}

func (b *fedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.w.feed(b.while)
	}
	if err == io.EOF {
		b.w.feed("an answer")
	}
	return n, err
}

func (b *fedBody) Close() error { return b.rc.Close() }

// watchedBody feeds the watchdog as the response body arrives and turns
// its firing into a StallError.
type watchedBody struct {
	rc     io.ReadCloser
	w      *watchdog
	cancel context.CancelCauseFunc
	once   sync.Once
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.w.feed("the response body")
	}
	if err != nil && !errors.Is(err, io.EOF) {
		if s := b.w.stalled(); s != nil {
			return n, s
		}
	}
	return n, err
}

func (b *watchedBody) Close() error {
	err := b.rc.Close()
	b.once.Do(func() {
		b.w.stop()
		b.cancel(nil)
	})
	return err
}
