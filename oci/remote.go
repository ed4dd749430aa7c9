package oci

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/internal/httptimeout"
)

// RemoteOptions say how to reach a registry.
type RemoteOptions struct {
	// CAFile is a PEM bundle trusted besides the system's roots.
	CAFile string
	// AllowHTTP permits plain HTTP to a host that is not loopback; loopback
	// hosts may always use it.
	AllowHTTP bool
	// Keychain finds credentials; default: docker's config.json
	// ($DOCKER_CONFIG) and its credential helpers.
	Keychain authn.Keychain
	// Retries of one request on 5xx, 429 and transport errors (default 5),
	// with exponential backoff from RetryDelay (default 200ms).
	Retries    int
	RetryDelay time.Duration
	// Transport under everything (tests inject faults here).
	Transport http.RoundTripper
	// Timeout is the longest a request may go without progress (connect,
	// answer, each pause of a body); default httptimeout.Default.
	Timeout time.Duration
}

// Remote is a registry under a repository prefix.
type Remote struct {
	Host, Prefix string
	opts         []remote.Option
	nameOpts     []name.Option
	insecure     bool // plain HTTP allowed
	sent         atomic.Int64
	blobs        atomic.Int64
	manifests    atomic.Int64
	// What pushBlob needs: the keychain, the counting transport, the
	// retries, the authenticated transport of each repository and the
	// blobs known to be there.
	keychain   authn.Keychain
	transport  http.RoundTripper
	retries    int
	retryDelay time.Duration
	transports sync.Map
	pushed     sync.Map
}

// userAgent names the builder to registries.
const userAgent = "nodeforge-builder"

// ParseTarget splits "HOST[:PORT][/PREFIX]" (a leading docker:// is
// allowed) into host and prefix.
func ParseTarget(s string) (host, prefix string, err error) {
	s = strings.TrimPrefix(s, "docker://")
	s = strings.TrimSuffix(s, "/")
	host, prefix, _ = strings.Cut(s, "/")
	if host == "" || strings.ContainsAny(host, " \t") {
		return "", "", fmt.Errorf("registry %q: want HOST[:PORT][/PREFIX]", s)
	}
	if prefix != "" {
		if _, err := name.NewRepository(host + "/" + prefix); err != nil {
			return "", "", fmt.Errorf("registry %q: %w", s, err)
		}
	}
	return host, prefix, nil
}

// IsLoopback reports whether a registry host is on this machine.
func IsLoopback(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.Trim(h, "[]")
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// NewRemote returns the store at target ("HOST[:PORT][/PREFIX]").
func NewRemote(target string, o RemoteOptions) (*Remote, error) {
	host, prefix, err := ParseTarget(target)
	if err != nil {
		return nil, err
	}
	r := &Remote{Host: host, Prefix: prefix}
	if o.AllowHTTP || IsLoopback(host) {
		// name.Insecure tries HTTPS first and falls back to HTTP.
		r.nameOpts = append(r.nameOpts, name.Insecure)
		r.insecure = true
	}
	base := o.Transport
	if base == nil {
		t := remote.DefaultTransport.(*http.Transport).Clone()
		if o.CAFile != "" {
			pem, err := os.ReadFile(o.CAFile)
			if err != nil {
				return nil, fmt.Errorf("CA bundle: %w", err)
			}
			pool, err := x509.SystemCertPool()
			if err != nil || pool == nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("CA bundle %s holds no PEM certificate", o.CAFile)
			}
			t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		base = t
	}
	base = httptimeout.Wrap(base, o.Timeout)
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	retries, delay := o.Retries, o.RetryDelay
	if retries == 0 {
		retries = 5
	}
	if delay == 0 {
		delay = 200 * time.Millisecond
	}
	r.keychain, r.retries, r.retryDelay = kc, retries, delay
	r.transport = &countingTransport{base: base, sent: &r.sent, blobs: &r.blobs, manifests: &r.manifests}
	r.opts = []remote.Option{
		remote.WithAuthFromKeychain(kc),
		remote.WithTransport(r.transport),
		remote.WithRetryBackoff(remote.Backoff{Duration: delay, Factor: 2, Jitter: 0.2, Steps: retries}),
		remote.WithRetryStatusCodes(retryStatus...),
		remote.WithJobs(4),
		remote.WithUserAgent(userAgent),
	}
	// A puller and a pusher keep each repository's authenticated transport,
	// so the registry is pinged and the token fetched once per repository
	// rather than once per request.
	puller, err := remote.NewPuller(r.opts...)
	if err != nil {
		return nil, err
	}
	pusher, err := remote.NewPusher(r.opts...)
	if err != nil {
		return nil, err
	}
	r.opts = append(r.opts, remote.Reuse(puller), remote.Reuse(pusher))
	return r, nil
}

func (r *Remote) String() string {
	if r.Prefix == "" {
		return r.Host
	}
	return r.Host + "/" + r.Prefix
}

func (r *Remote) repoName(repo string) string {
	if r.Prefix == "" {
		return r.Host + "/" + repo
	}
	return r.Host + "/" + r.Prefix + "/" + repo
}

// Ref implements Store.
func (r *Remote) Ref(repo, ref string) string {
	if digestRef(ref) {
		return r.repoName(repo) + "@" + ref
	}
	return r.repoName(repo) + ":" + ref
}

func (r *Remote) reference(repo, ref string) (name.Reference, error) {
	return name.ParseReference(r.Ref(repo, ref), r.nameOpts...)
}

func (r *Remote) ctxOpts(ctx context.Context) []remote.Option {
	return append(append([]remote.Option{}, r.opts...), remote.WithContext(ctx))
}

// WriteImage implements Store. Blobs go first, by digest; the manifest
// (and so the tag) only after all of them arrived (see push.go).
func (r *Remote) WriteImage(ctx context.Context, repo, tag string, img v1.Image) error {
	ref, err := r.target(repo, tag, img)
	if err != nil {
		return err
	}
	if err := r.pushImage(ctx, repo, ref, img); err != nil {
		return r.explain(ref.String(), err)
	}
	return nil
}

// WriteIndex implements Store: children first, then the index.
func (r *Remote) WriteIndex(ctx context.Context, repo, tag string, idx v1.ImageIndex) error {
	ref, err := r.target(repo, tag, idx)
	if err != nil {
		return err
	}
	if err := r.pushIndex(ctx, repo, ref, idx); err != nil {
		return r.explain(ref.String(), err)
	}
	return nil
}

func (r *Remote) target(repo, tag string, d interface{ Digest() (v1.Hash, error) }) (name.Reference, error) {
	if tag != "" {
		return r.reference(repo, tag)
	}
	h, err := d.Digest()
	if err != nil {
		return nil, err
	}
	return r.reference(repo, h.String())
}

// Head implements Store.
func (r *Remote) Head(ctx context.Context, repo, ref string) (*v1.Descriptor, error) {
	nr, err := r.reference(repo, ref)
	if err != nil {
		return nil, err
	}
	d, err := remote.Head(nr, r.ctxOpts(ctx)...)
	if err != nil {
		return nil, r.explain(nr.String(), err)
	}
	return d, nil
}

// Image implements Store.
func (r *Remote) Image(ctx context.Context, repo, ref string) (v1.Image, error) {
	nr, err := r.reference(repo, ref)
	if err != nil {
		return nil, err
	}
	img, err := remote.Image(nr, r.ctxOpts(ctx)...)
	if err != nil {
		return nil, r.explain(nr.String(), err)
	}
	return img, nil
}

// Index implements Store.
func (r *Remote) Index(ctx context.Context, repo, ref string) (v1.ImageIndex, error) {
	nr, err := r.reference(repo, ref)
	if err != nil {
		return nil, err
	}
	idx, err := remote.Index(nr, r.ctxOpts(ctx)...)
	if err != nil {
		return nil, r.explain(nr.String(), err)
	}
	return idx, nil
}

// Referrers implements Store; on a registry without the referrers API it
// reads the sha256-<hex> fallback tag.
func (r *Remote) Referrers(ctx context.Context, repo string, d v1.Hash) ([]v1.Descriptor, error) {
	nr, err := name.NewDigest(r.Ref(repo, d.String()), r.nameOpts...)
	if err != nil {
		return nil, err
	}
	idx, err := remote.Referrers(nr, r.ctxOpts(ctx)...)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, r.explain(nr.String(), err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	return m.Manifests, nil
}

// Tags implements Store.
func (r *Remote) Tags(ctx context.Context, repo string) ([]string, error) {
	nr, err := name.NewRepository(r.repoName(repo), r.nameOpts...)
	if err != nil {
		return nil, err
	}
	tags, err := remote.List(nr, r.ctxOpts(ctx)...)
	if err != nil {
		return nil, r.explain(nr.String(), err)
	}
	return tags, nil
}

// Stats implements Store.
func (r *Remote) Stats() Stats {
	return Stats{BlobBytes: r.sent.Load(), Blobs: int(r.blobs.Load()), Manifests: int(r.manifests.Load())}
}

func isNotFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && (te.StatusCode == http.StatusNotFound ||
		hasCode(te, transport.ManifestUnknownErrorCode) || hasCode(te, transport.NameUnknownErrorCode))
}

// explain names the reference and turns a 404 into ErrNotFound.
func (r *Remote) explain(ref string, err error) error {
	if isNotFound(err) {
		return notFound(ref)
	}
	var te *transport.Error
	if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("%s: access denied (%d): check the credentials in docker's config.json ($DOCKER_CONFIG) for %s: %w", ref, te.StatusCode, r.Host, err)
	}
	return fmt.Errorf("%s: %w", ref, err)
}

// countingTransport counts the bytes of blob uploads actually sent, the
// blobs and the manifests written (not the referrers fallback tags).
type countingTransport struct {
	base                   http.RoundTripper
	sent, blobs, manifests *atomic.Int64
}

// fallbackTag matches the path of a referrers fallback tag.
var fallbackTag = regexp.MustCompile(`/manifests/sha256-[0-9a-f]{64}$`)

// deferFallback marks a context whose referrer pushes leave the referrers
// fallback tag alone (WithDeferredFallback): the mirror lists all
// referrers of a subject in it at once afterwards (EnsureReferrers),
// instead of ggcr's read, modify and write of that index for every
// referrer.
type deferFallback struct{}

// emptyReferrers answers ggcr's probe of the referrers API under
// deferFallback, so it leaves the fallback tag to the mirror.
const emptyReferrers = `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}`

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/referrers/") && req.Context().Value(deferFallback{}) != nil {
		return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": []string{string(types.OCIImageIndex)}},
			Body:   io.NopCloser(strings.NewReader(emptyReferrers)), ContentLength: int64(len(emptyReferrers)), Request: req}, nil
	}
	upload := strings.Contains(req.URL.Path, "/blobs/uploads/") && (req.Method == http.MethodPatch || req.Method == http.MethodPut || req.Method == http.MethodPost)
	if upload && req.Body != nil && req.Body != http.NoBody {
		req.Body = &countingBody{ReadCloser: req.Body, n: t.sent}
	}
	resp, err := t.base.RoundTrip(req)
	if upload && req.Method == http.MethodPut && err == nil && resp.StatusCode == http.StatusCreated {
		t.blobs.Add(1)
	}
	if req.Method == http.MethodPut && err == nil && resp.StatusCode == http.StatusCreated &&
		strings.Contains(req.URL.Path, "/manifests/") && !fallbackTag.MatchString(req.URL.Path) {
		t.manifests.Add(1)
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// Ping checks that the host answers the OCI distribution API (GET /v2/
// answers 200, or 401 asking for credentials), so that a release fails
// before it builds, and a host that is no registry is named as such.
func (r *Remote) Ping(ctx context.Context) error {
	schemes := []string{"https"}
	if r.insecure {
		schemes = append(schemes, "http")
	}
	client := &http.Client{Transport: r.transport}
	var lastErr error
	for _, scheme := range schemes {
		u := scheme + "://" + r.Host + "/v2/"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			if badCertificate(err) {
				// An HTTPS registry whose certificate is not trusted: no
				// fallback to plain HTTP, say so.
				return fmt.Errorf("registry %s: %w (a registry with a private CA needs --ca-file)", r.Host, err)
			}
			lastErr = err
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
			return nil
		}
		return fmt.Errorf("%s is not an OCI registry: GET %s answered %q where a registry answers 200 or 401 (for a local OCI layout write oci:DIR)", r.Host, u, resp.Status)
	}
	return fmt.Errorf("registry %s does not answer: %w", r.Host, lastErr)
}

// badCertificate reports a TLS handshake refused for the server's
// certificate.
func badCertificate(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci)
}
