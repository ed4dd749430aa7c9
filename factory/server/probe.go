package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ProbeOptions say what Probe asks.
type ProbeOptions struct {
	// URL is the endpoint: a factory's /readyz or /healthz.
	URL string
	// InsecureSkipVerify accepts any TLS certificate: a probe from inside
	// the container reaches the factory at 127.0.0.1, a name its
	// certificate does not carry.
	InsecureSkipVerify bool
}

// Probe asks a factory whether it is ready (or alive): the body it
// answered, and an error unless it answered 200. It is the health check of
// the factory's container image (builder factory health), which has no
// curl.
func Probe(ctx context.Context, o ProbeOptions) (string, error) {
	if !strings.HasPrefix(o.URL, "http://") && !strings.HasPrefix(o.URL, "https://") {
		return "", fmt.Errorf("probe %q: want an http:// or https:// URL", o.URL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.URL, nil)
	if err != nil {
		return "", fmt.Errorf("probe %s: %w", o.URL, err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // the factory itself, never a proxy in between
	if o.InsecureSkipVerify {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return "", fmt.Errorf("probe %s: %w", o.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("probe %s: %w", o.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("probe %s: %s: %s", o.URL, resp.Status, strings.TrimSpace(string(b)))
	}
	return string(b), nil
}
