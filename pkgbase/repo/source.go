package repo

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nodeforge/builder/internal/httptimeout"
	"github.com/nodeforge/builder/internal/retry"
)

// Source is where a repository's files come from: a local directory or an
// HTTP(S) server. rel is a slash-separated path relative to the repository
// root, e.g. "repodata/repomd.xml".
type Source interface {
	// Open returns the content of rel. The caller must close it.
	Open(ctx context.Context, rel string) (io.ReadCloser, error)
	// URL is the repository's base URL (no trailing slash); it identifies
	// the repository in Package.Repo.
	URL() string
}

// SourceOptions tunes NewSource. The zero value is usable.
type SourceOptions struct {
	// HTTPClient is used for http(s) sources; nil means a client that gives
	// up on a server silent for Timeout (no overall timeout: indexes can be
	// large and slow, as long as they keep coming).
	HTTPClient *http.Client
	// Timeout is the longest pause without progress (default
	// httptimeout.Default).
	Timeout time.Duration
	// Retries is how many times a failed HTTP request (network error, 5xx,
	// 429) is retried. 0 means the default (4); negative means never.
	Retries int
	// Backoff is the first wait between retries (default 500ms); it doubles
	// after each retry up to maxBackoff.
	Backoff time.Duration
	// UserAgent is sent with HTTP requests (default "nodeforge-builder").
	UserAgent string
}

const (
	defaultRetries   = 4
	defaultBackoff   = 500 * time.Millisecond
	maxBackoff       = 30 * time.Second
	defaultUserAgent = "nodeforge-builder"
)

// ErrNotFound is wrapped by errors for files a source does not have (HTTP 404
// or 410, missing local file). It also matches fs.ErrNotExist, so callers may
// test either.
var ErrNotFound error = notFoundError{}

type notFoundError struct{}

func (notFoundError) Error() string        { return "not found" }
func (notFoundError) Is(target error) bool { return target == fs.ErrNotExist }

// NewSource returns a Source for location: a local directory path, a file://
// URL or an http(s):// URL.
func NewSource(location string, opts SourceOptions) (Source, error) {
	if location == "" {
		return nil, errors.New("repository location is empty")
	}
	if i := strings.Index(location, "://"); i > 0 {
		u, err := url.Parse(location)
		if err != nil {
			return nil, fmt.Errorf("repository location %q: %w", location, err)
		}
		switch strings.ToLower(u.Scheme) {
		case "file":
			if u.Host != "" && u.Host != "localhost" {
				return nil, fmt.Errorf("repository location %q: file URLs with a remote host are not supported", location)
			}
			return newLocalSource(u.Path)
		case "http", "https":
			return newHTTPSource(u, opts)
		default:
			return nil, fmt.Errorf("repository location %q: unsupported scheme %q (want a directory, file://, http:// or https://)", location, u.Scheme)
		}
	}
	return newLocalSource(location)
}

// cleanRel validates a repository-relative path. Index files name other files
// (location href), so a hostile index must not reach outside the repository.
func cleanRel(rel string) (string, error) {
	if rel == "" {
		return "", errors.New("empty path")
	}
	if strings.ContainsRune(rel, 0) {
		return "", fmt.Errorf("path %q contains a NUL byte", rel)
	}
	if strings.HasPrefix(rel, "/") || strings.HasPrefix(rel, `\`) || filepath.IsAbs(rel) || filepath.VolumeName(rel) != "" {
		return "", fmt.Errorf("path %q is absolute; want a path relative to the repository", rel)
	}
	// Backslashes are separators on Windows: check them too.
	for _, seg := range strings.FieldsFunc(rel, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == ".." {
			return "", fmt.Errorf("path %q escapes the repository (contains \"..\")", rel)
		}
	}
	c := path.Clean(rel)
	if c == "." {
		return "", fmt.Errorf("path %q names the repository root, not a file", rel)
	}
	return c, nil
}

// localSource reads a repository from a directory.
type localSource struct {
	root string // absolute, OS form
	url  string // file:// form
}

func newLocalSource(dir string) (*localSource, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("repository directory %q: %w", dir, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("repository directory %q: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("repository directory %q: not a directory", dir)
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
	if !strings.HasPrefix(u.Path, "/") { // Windows: file:///C:/...
		u.Path = "/" + u.Path
	}
	return &localSource{root: abs, url: strings.TrimSuffix(u.String(), "/")}, nil
}

func (s *localSource) URL() string { return s.url }

func (s *localSource) Open(ctx context.Context, rel string) (io.ReadCloser, error) {
	c, err := cleanRel(rel)
	if err != nil {
		return nil, fmt.Errorf("open %s/%s: %w", s.url, rel, err)
	}
	full := s.url + "/" + c
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("open %s: %w", full, err)
	}
	f, err := os.Open(filepath.Join(s.root, filepath.FromSlash(c)))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open %s: %w", full, ErrNotFound)
		}
		return nil, fmt.Errorf("open %s: %w", full, err)
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("open %s: is a directory", full)
	}
	return &namedReader{rc: f, url: full}, nil
}

// httpSource reads a repository from an HTTP(S) server.
type httpSource struct {
	base    *url.URL // path ends in "/"
	url     string
	client  *http.Client
	retries int
	backoff time.Duration
	ua      string
}

func newHTTPSource(u *url.URL, opts SourceOptions) (*httpSource, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("repository location %q: no host", u.String())
	}
	b := *u
	b.RawQuery, b.Fragment, b.RawFragment = "", "", ""
	if !strings.HasSuffix(b.Path, "/") {
		b.Path += "/"
		if b.RawPath != "" {
			b.RawPath += "/"
		}
	}
	s := &httpSource{
		base:    &b,
		url:     strings.TrimSuffix(b.String(), "/"),
		client:  opts.HTTPClient,
		retries: opts.Retries,
		backoff: opts.Backoff,
		ua:      opts.UserAgent,
	}
	if s.client == nil {
		s.client = httptimeout.Client(opts.Timeout)
	}
	switch {
	case s.retries == 0:
		s.retries = defaultRetries
	case s.retries < 0:
		s.retries = 0
	}
	if s.backoff <= 0 {
		s.backoff = defaultBackoff
	}
	if s.ua == "" {
		s.ua = defaultUserAgent
	}
	return s, nil
}

func (s *httpSource) URL() string { return s.url }

// resolve joins rel to the base URL, escaping each segment so that "?" or "#"
// in a file name cannot turn into a query or fragment.
func (s *httpSource) resolve(c string) string {
	segs := strings.Split(c, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	return s.base.String() + strings.Join(segs, "/")
}

func (s *httpSource) Open(ctx context.Context, rel string) (io.ReadCloser, error) {
	c, err := cleanRel(rel)
	if err != nil {
		return nil, fmt.Errorf("GET %s/%s: %w", s.url, rel, err)
	}
	full := s.resolve(c)
	var body io.ReadCloser
	p := retry.Policy{Retries: s.retries, Wait: s.backoff, MaxWait: maxBackoff}
	tries, err := p.Do(ctx, func() (time.Duration, error) {
		b, retryAfter, err := s.get(ctx, full)
		body = b
		return retryAfter, err
	}, func(err error) bool {
		var re *retryableError
		return errors.As(err, &re)
	}, nil)
	var stopped *retry.Stopped
	switch {
	case errors.As(err, &stopped):
		return nil, fmt.Errorf("GET %s: %w (while waiting to retry after: %v)", full, stopped.Cause, stopped.Last)
	case err != nil && tries > 1:
		return nil, fmt.Errorf("%w (after %d attempts)", err, tries)
	case err != nil:
		return nil, err
	}
	return body, nil
}

// retryableError marks failures worth another attempt.
type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// get makes one request. It returns the body on 200, otherwise an error
// (a *retryableError for transient failures) and any Retry-After delay.
func (s *httpSource) get(ctx context.Context, full string) (io.ReadCloser, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, full, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("GET %s: %w", full, err)
	}
	req.Header.Set("User-Agent", s.ua)
	// Checksums in repomd.xml are of the bytes as stored: ask servers not to
	// re-encode them (and keep Go from transparently gunzipping).
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := s.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, fmt.Errorf("GET %s: %w", full, ctx.Err())
		}
		// url.Error already names the URL. A certificate that does not
		// verify will not verify on the next attempt either.
		var cve *tls.CertificateVerificationError
		if errors.As(err, &cve) {
			return nil, 0, err
		}
		return nil, 0, &retryableError{err}
	}
	if resp.StatusCode == http.StatusOK {
		return &namedReader{rc: resp.Body, url: full}, 0, nil
	}
	// Drain a little so the connection can be reused.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	serr := fmt.Errorf("GET %s: HTTP %s", full, resp.Status)
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return nil, 0, fmt.Errorf("GET %s: %w (HTTP %s)", full, ErrNotFound, resp.Status)
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return nil, retryAfter(resp.Header.Get("Retry-After")), &retryableError{serr}
	default:
		return nil, 0, serr
	}
}

// retryAfter parses a Retry-After header (seconds or HTTP date).
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(min(n, int(maxBackoff/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// namedReader adds the URL to read errors: a body that fails half-way (reset
// connection, I/O error) should say which file it was.
type namedReader struct {
	rc  io.ReadCloser
	url string
}

func (r *namedReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("read %s: %w", r.url, err)
	}
	return n, err
}

func (r *namedReader) Close() error { return r.rc.Close() }
