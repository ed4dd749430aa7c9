package oci

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/nodeforge/builder/internal/httptimeout"
	"github.com/nodeforge/builder/internal/retry"
)

// The retry policy (internal/retry's, as for downloads and repository
// reads; ggcr retries manifests and reads with its own backoff). A Remote
// retries each request itself
// (RemoteOptions.Retries: ggcr's backoff for manifests and reads,
// pushBlob's loop for blobs); Retry runs a whole write again after those
// retries gave up; RerunHelps says when running the command again is
// worth it. pushBlob, Retry and RerunHelps agree on what is worth another
// try: retryable.

// retryStatus are the answers worth asking again: 408, 429 and the 5xx
// of a busy or restarting registry.
var retryStatus = []int{http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
	http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}

// pushRetries is how often a whole image push is tried again after the
// per-request retries gave up: blobs that arrived are not sent again.
const pushRetries = 3

// Retry runs f until it succeeds, the context ends, or pushRetries
// attempts failed, waiting longer each time; only failures a retry may
// fix (see retryable) are tried again.
func Retry(ctx context.Context, f func() error) error {
	p := retry.Policy{Retries: pushRetries - 1, Wait: time.Second}
	_, err := p.Do(ctx, func() (time.Duration, error) { return 0, f() }, retryable, nil)
	var stopped *retry.Stopped
	if errors.As(err, &stopped) {
		return ctx.Err()
	}
	return err
}

// retryable reports whether a failed request may succeed when sent again
// soon: a cut connection, a 408, 429 or 5xx answer. A stalled server is
// not retried (waiting again only multiplies the wait), nor are answers
// that will not change (401, 403, 404, a damaged source).
func retryable(err error) bool {
	var se *httptimeout.StallError
	if errors.As(err, &se) {
		return false
	}
	var te *transport.Error
	if errors.As(err, &te) {
		return slices.Contains(retryStatus, te.StatusCode)
	}
	// Connection failures (refused, reset, timed out, cut short) are net
	// errors; *url.Error, which wraps every failed request, is one too.
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// RerunHelps reports whether running the command again later can finish
// what err stopped: a failure a retry could fix, a stalled server, a full
// disk once there is room, an interruption. It decides whether a message
// tells the user to run it again.
func RerunHelps(err error) bool {
	var se *httptimeout.StallError
	return retryable(err) || errors.As(err, &se) || errors.Is(err, context.Canceled) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
