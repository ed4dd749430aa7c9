package server

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nodeforge/builder/factory"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"golang.org/x/net/netutil"

	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/release"
)

// maxSchematicBody bounds a POSTed schematic.
const maxSchematicBody = 64 << 10

// Server is the Image Factory's HTTP API (compatible with the upstream
// factory's routes): schematics, versions, and artifacts composed on
// demand from verified releases, by its Service.
type Server struct {
	svc    *factory.Service // its builds in flight, its metrics
	rels   releases
	schems schematicStore
	arts   artifacts
	imgs   images
	o      factory.Options // the service's, as it completed them
	front  Options         // the front's, defaults filled in (its Service unread: o is)

	gate     *gate // logins, build rates
	requests atomic.Int64
	active   atomic.Int64   // requests being answered
	proxies  trustedProxies // whose forwarding headers name the client
	metrics  *frontMetrics
}

// releases is what the front reads of the service's catalog of verified
// releases.
type releases interface {
	Listed() []*factory.VerifiedRelease
	Available(version string) *factory.VerifiedRelease
	Latest() *factory.VerifiedRelease
	VersionTags() []string
	Readiness() (ready bool, body string)
}

// schematicStore is where the front reads and adds schematics.
type schematicStore interface {
	Schematic(ctx context.Context, id string) (*schematic.Schematic, error)
	AddSchematic(ctx context.Context, sch *schematic.Schematic, doc []byte) (string, error)
	SchematicsFull() bool
}

// artifacts answers a media file from the signed cache or builds it.
type artifacts interface {
	Compose(ctx context.Context, rel *factory.VerifiedRelease, sch *schematic.Schematic, a factory.Artifact, arch string) (*factory.CachedArtifact, error)
	Distrust(blob v1.Hash)
	CountDamaged()
}

// images are the images of the registry front: a schematic's installers
// (cached and signed, or built) and a release's extensions.
type images interface {
	Installer(ctx context.Context, rel *factory.VerifiedRelease, sch *schematic.Schematic, k factory.InstallerKind, host string) (*factory.ImageEntry, error)
	CachedEntry(ctx context.Context, sch *schematic.Schematic, k factory.InstallerKind, has func(*factory.ImageEntry) bool) *factory.ImageEntry
	ForgetInstaller(key string)
	PullRef(host string, k factory.InstallerKind, id, version string) string
	ExtensionImage(ctx context.Context, rel *factory.VerifiedRelease, name string) (*factory.ImageEntry, error)
	PublicHost(requestHost string) string
}

// frontMetrics are the front's series, in the service's registry.
type frontMetrics struct {
	requests  *prometheus.CounterVec
	bytesSent prometheus.Counter
}

func newFrontMetrics(reg *prometheus.Registry) (*frontMetrics, error) {
	m := &frontMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodeforge_factory_requests_total",
			Help: "HTTP requests by route and status."}, []string{"route", "code"}),
		bytesSent: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodeforge_factory_bytes_sent_total",
			Help: "Bytes of responses."}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.bytesSent} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("factory: the front's metrics: %w", err)
		}
	}
	return m, nil
}

// Options configure the factory's HTTP front and, in Service, the
// service it serves.
//
// Service is a named field, not an embedded factory.Options: a literal
// then says whose each option is (the service's MaxBuilds, the front's
// MaxConnections), and the front never reads the service's options as
// given, only as the service completed them (factory.Service.Options).
type Options struct {
	Service factory.Options
	// Access says who may do what (the zero value: anyone, anything).
	Access Access
	// BodyTimeout bounds the time a request's body takes to arrive (0: 30
	// seconds); past it the request gets 408 and its connection closes.
	BodyTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle that long (0: two
	// minutes); MaxConnections bounds the connections served at once (0:
	// 1024), more wait to be accepted. Both are for HTTPServer and Listener.
	IdleTimeout    time.Duration
	MaxConnections int
	// AllowedOrigins are the origins pages may download from (CORS); nil:
	// any ("*"), as upstream.
	AllowedOrigins []string
	// TrustedProxies are the address ranges (CIDR, or single addresses)
	// of the proxies whose X-Forwarded-For or Forwarded header names the
	// client, for rate limits and logs; nil: the peer is the client.
	TrustedProxies []string
}

// New serves over HTTP the Service factory.NewService makes of
// o.Service (see there): the front's options are checked first.
func New(ctx context.Context, o Options) (*Server, error) {
	if err := checkFront(o); err != nil {
		return nil, err
	}
	svc, err := factory.NewService(ctx, o.Service)
	if err != nil {
		return nil, err
	}
	return newFront(svc, o)
}

// checkFront checks the front's options before the releases are
// verified.
func checkFront(o Options) error {
	if _, err := newGate(o.Access); err != nil {
		return err
	}
	if err := checkOrigins(o.AllowedOrigins); err != nil {
		return err
	}
	_, err := parseTrustedProxies(o.TrustedProxies)
	return err
}

// newFront is the HTTP front of svc with the front's options of o (its
// Service is not read: svc has its own): it asks svc for releases,
// schematics, artifacts and images through the seams, and svc asks it
// whether a request may build.
func newFront(svc *factory.Service, o Options) (*Server, error) {
	g, err := newGate(o.Access)
	if err != nil {
		return nil, err
	}
	proxies, err := parseTrustedProxies(o.TrustedProxies)
	if err != nil {
		return nil, err
	}
	m, err := newFrontMetrics(svc.Metrics())
	if err != nil {
		return nil, err
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = 30 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 2 * time.Minute
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = 1024
	}
	o.Service = factory.Options{}
	s := &Server{svc: svc, rels: svc, schems: svc, arts: svc, imgs: svc, o: svc.Options(), front: o, gate: g, proxies: proxies, metrics: m}
	svc.SetBuildAllowed(s.mayBuild)
	return s, nil
}

// RetryFailed lists and verifies again what failed (see
// factory.Service.RetryFailed).
func (s *Server) RetryFailed(ctx context.Context, interval time.Duration) {
	s.svc.RetryFailed(ctx, interval)
}

// Stats says how many artifacts were built and served from the cache
// (see factory.Service.Stats).
func (s *Server) Stats() factory.Stats { return s.svc.Stats() }

// WaitBuilds waits until no build is in flight, cache entries still being
// written after their response included (see factory.Service.WaitBuilds).
func (s *Server) WaitBuilds(ctx context.Context) error { return s.svc.WaitBuilds(ctx) }

// Handler routes the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /schematics", s.postSchematic)
	mux.HandleFunc("GET /schematics/{id}", s.getSchematic)
	mux.HandleFunc("GET /versions", s.getVersions)
	mux.HandleFunc("GET /version/{version}/extensions/official", s.getExtensions)
	mux.HandleFunc("GET /version/{version}/overlays/official", s.getOverlays)
	mux.HandleFunc("GET /talosctl/{version}", s.getTalosctl)
	mux.HandleFunc("GET /talosctl/{version}/{file}", s.getTalosctl)
	mux.HandleFunc("GET /image/{id}/{version}/{artifact}", s.getImage)
	mux.HandleFunc("GET /pxe/{id}/{version}/{target}", s.getPXE)
	mux.HandleFunc("GET /oci/cosign/signing-key.pub", s.getSigningKey)
	mux.HandleFunc("GET /secureboot/signing-cert.pem", s.getSecureBootCert)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", s.getReady)
	s.uiRoutes(mux)
	mux.HandleFunc("/v2/", s.serveRegistry)
	mux.HandleFunc("/v2", s.serveRegistry) // 200, not a redirect to /v2/
	return s.identify(s.logged(s.cors(s.bodyDeadline(s.guardRoutes(mux)))))
}

// HTTPServer serves Handler with the factory's bounds: request headers
// within 10 seconds, bodies within BodyTimeout (Handler sets that one per
// request: a server-wide ReadTimeout would also cancel long downloads),
// idle connections closed after IdleTimeout. Serve it on Listener's
// listener.
func (s *Server) HTTPServer(errorLog *log.Logger) *http.Server {
	return &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: s.front.IdleTimeout, ErrorLog: errorLog}
}

// Listener bounds the connections served at once on ln to
// MaxConnections; further ones wait in the listen queue.
func (s *Server) Listener(ln net.Listener) net.Listener {
	return netutil.LimitListener(ln, s.front.MaxConnections)
}

// bodyDeadline gives a request's body BodyTimeout to arrive, so a client
// that sends it a byte at a time cannot hold a connection; the deadline
// is lifted once the body is read, for the answer may take long.
func (s *Server) bodyDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(s.front.BodyTimeout)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { rc.SetReadDeadline(time.Time{}) }}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts its connection's read deadline once read to its
// end (and only then: after a timeout the connection is to close).
type deadlineBody struct {
	io.ReadCloser
	lift   func()
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.lifted {
		b.lifted = true
		b.lift()
	}
	return n, err
}

// slowBody says whether reading a body failed for its deadline.
func slowBody(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// logged gives every request an ID (the client's X-Request-Id or a
// counter) echoed in the response, and logs it with its outcome.
func (s *Server) logged(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 64 {
			id = fmt.Sprintf("r%d", s.requests.Add(1))
		}
		w.Header().Set("X-Request-Id", id)
		w.Header().Set("Server", strings.TrimSpace(serverName+" "+s.o.BuilderVersion))
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		s.active.Add(1)
		defer s.active.Add(-1)
		h.ServeHTTP(rec, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		s.metrics.requests.WithLabelValues(route, strconv.Itoa(rec.status)).Inc()
		s.metrics.bytesSent.Add(float64(rec.bytes))
		p := principalOf(r.Context())
		attrs := []any{"id", id, "user", p.name(), "method", r.Method, "path", r.URL.Path, "status", rec.status, "bytes", rec.bytes, "seconds", time.Since(start).Seconds()}
		if p.via != "" {
			attrs = append(attrs, "address", p.addr, "via", p.via)
		}
		s.o.Log.Info("request", attrs...)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *statusRecorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }

// ReadFrom keeps the connection's own ReadFrom (sendfile for a file)
// reachable through the recorder.
func (r *statusRecorder) ReadFrom(src io.Reader) (int64, error) {
	n, err := io.Copy(r.ResponseWriter, src)
	r.bytes += n
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (the body
// deadline, flushes).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
func (r *statusRecorder) Write(b []byte) (int, error) {
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// fail answers with a status and a one-line reason.
func fail(w http.ResponseWriter, code int, format string, a ...any) {
	http.Error(w, fmt.Sprintf(format, a...), code)
}

func (s *Server) postSchematic(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r, maxSchematicBody)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(w, http.StatusRequestEntityTooLarge, "schematic larger than %d bytes", maxSchematicBody)
			return
		}
		if slowBody(err) {
			fail(w, http.StatusRequestTimeout, "the schematic did not arrive within %s", s.front.BodyTimeout)
			return
		}
		fail(w, http.StatusBadRequest, "reading the schematic: %v", err)
		return
	}
	// As upstream: any schematic it accepts is stored (extensions the
	// served releases lack too: a schematic is version-independent); what
	// a release cannot make of it is refused when media are asked for.
	sch, err := schematic.Parse(body)
	if err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	id, err := s.createSchematic(r.Context(), sch, body)
	if s.refused(w, r, err) {
		return
	}
	if err != nil {
		s.o.Log.Error("storing a schematic", "id", w.Header().Get("X-Request-Id"), "err", err)
		fail(w, http.StatusInternalServerError, "storing the schematic failed (request %s)", w.Header().Get("X-Request-Id"))
		return
	}
	canon, _ := sch.Canonical()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]string{"id": id, "schematic": string(canon)})
}

// createSchematic stores a schematic posted (to the API, as the document
// doc, or the UI, nil): one the factory has gives its ID at once; a new
// one counts against its client's rate (429) and the store's cap (507).
func (s *Server) createSchematic(ctx context.Context, sch *schematic.Schematic, doc []byte) (string, error) {
	id, err := sch.ID()
	if err != nil {
		return "", err
	}
	if _, err := s.schems.Schematic(ctx, id); err == nil {
		return id, nil
	}
	if s.gate != nil {
		if err := s.gate.schematics.take(principalOf(ctx).name(), time.Now()); err != nil {
			return "", err
		}
	}
	if s.schems.SchematicsFull() {
		return "", &refusal{status: http.StatusInsufficientStorage,
			msg: fmt.Sprintf("the factory stores %d schematics, as many as it may: ask its operator (--max-schematics)", s.o.MaxSchematics)}
	}
	return s.schems.AddSchematic(ctx, sch, doc)
}

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	return b.Bytes(), err
}

func (s *Server) getSchematic(w http.ResponseWriter, r *http.Request) {
	sch, ok := s.schematic(w, r, r.PathValue("id"))
	if !ok {
		return
	}
	canon, err := sch.Canonical()
	if err != nil {
		fail(w, http.StatusInternalServerError, "%v", err)
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(canon)
}

// schematic finds a schematic or answers 404, as upstream, in upstream's
// words (clients match them), for what cannot be an ID too.
func (s *Server) schematic(w http.ResponseWriter, r *http.Request, id string) (*schematic.Schematic, bool) {
	if len(id) != 64 || strings.Trim(id, "0123456789abcdef") != "" {
		fail(w, http.StatusNotFound, "schematic ID %q not found", id)
		return nil, false
	}
	sch, err := s.schems.Schematic(r.Context(), id)
	switch {
	case errors.Is(err, factory.ErrUnknownSchematic):
		fail(w, http.StatusNotFound, "schematic ID %q not found", id)
		return nil, false
	case err != nil:
		s.o.Log.Error("reading a schematic", "id", id, "err", err)
		fail(w, http.StatusInternalServerError, "reading schematic %s failed", id)
		return nil, false
	}
	return sch, true
}

// getVersions lists the versions served and not broken, Talos's way
// ("v1.11.0"), oldest first; ?broken=true lists only those marked broken.
func (s *Server) getVersions(w http.ResponseWriter, r *http.Request) {
	out := []string{}
	if r.URL.Query().Get("broken") == "true" {
		for _, v := range s.o.BrokenVersions {
			out = append(out, factory.TalosVersion(v))
		}
		writeJSON(w, out)
		return
	}
	branch := r.URL.Query().Get("branch")
	for _, rel := range s.rels.Listed() {
		if branch == "" || rel.Branch == branch {
			out = append(out, factory.TalosVersion(rel.Version))
		}
	}
	writeJSON(w, out)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// release finds a version served and not broken, either spelling, or
// answers 404 in upstream's words.
func (s *Server) release(w http.ResponseWriter, v string) (*factory.VerifiedRelease, bool) {
	rel := s.rels.Available(v)
	if rel == nil {
		fail(w, http.StatusNotFound, "version %s is not available", strings.TrimPrefix(v, "v"))
		return nil, false
	}
	return rel, true
}

// officialExtension is one entry of /version/{v}/extensions/official:
// its name in the release's namespace (siderolabs/zfs by default, as
// Talos names them; a schematic may name it so, by an alias or bare), a
// pullable reference pinned to its digest (the factory's own /v2/), its
// manifest's author and description.
type officialExtension struct {
	Name        string `json:"name"`
	Ref         string `json:"ref"`
	Digest      string `json:"digest"`
	Author      string `json:"author"`
	Description string `json:"description"`
}

func (s *Server) getExtensions(w http.ResponseWriter, r *http.Request) {
	rel, ok := s.release(w, r.PathValue("version"))
	if !ok {
		return
	}
	out := []officialExtension{}
	for _, name := range rel.Extensions {
		meta, err := rel.ExtensionMetadata(r.Context(), name)
		if err != nil {
			s.o.Log.Error("reading an extension", "name", name, "err", err)
			fail(w, http.StatusInternalServerError, "reading extension %s failed", name)
			return
		}
		out = append(out, officialExtension{Name: rel.Namespace.Qualified(name), Ref: s.extensionRef(r.Host, rel, name), Digest: rel.Digests[release.RepoExtension+name],
			Author: meta.Author, Description: meta.Description})
	}
	writeJSON(w, out)
}

func (s *Server) getReady(w http.ResponseWriter, _ *http.Request) {
	ready, body := s.rels.Readiness()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	io.WriteString(w, body)
}

func (s *Server) getImage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("artifact")
	if strings.HasSuffix(name, ".sigstore.json") {
		// Upstream's answer where it offers no bundles.
		fail(w, http.StatusPaymentRequired, "signature endpoint is not available: this factory signs an artifact as ARTIFACT.sig (cosign sign-blob; key at /oci/cosign/signing-key.pub)")
		return
	}
	side := "" // sha256, sha512 or sig: a file about the artifact
	for _, ext := range []string{"sha256", "sha512", "sig"} {
		if base, ok := strings.CutSuffix(name, "."+ext); ok {
			name, side = base, ext
			break
		}
	}
	if side == "sig" && s.o.Signer == nil {
		fail(w, http.StatusNotFound, "this factory has no signing key: no signatures")
		return
	}
	// Upstream's order: the schematic, the name, then the version.
	sch, ok := s.schematic(w, r, r.PathValue("id"))
	if !ok {
		return
	}
	a, goArch, ok := s.artifactAsked(w, name)
	if !ok {
		return
	}
	rel, arch, ok := s.target(w, r, sch, a.Output(), goArch)
	if !ok {
		return
	}
	data, err := s.arts.Compose(r.Context(), rel, sch, a, arch)
	if s.refused(w, r, err) {
		return
	}
	if err != nil {
		s.failBuild(w, r, name, rel.Version, err)
		return
	}
	hexsum := data.Digest().Hex
	switch side {
	case "sha256":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "%s  %s\n", hexsum, name)
		return
	case "sha512", "sig":
		s.serveSide(w, r, data, name, side)
		return
	}
	w.Header().Set("ETag", `"sha256:`+hexsum+`"`)
	w.Header().Set("Content-Type", contentType(name))
	w.Header().Set("Content-Disposition", contentDisposition(cmp.Or(r.URL.Query().Get("filename"), name)))
	if rng := r.Header.Get("Range"); rng != "" {
		fixed, ok := normalizeRange(rng, data.Size())
		if !ok {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", data.Size()))
			fail(w, http.StatusRequestedRangeNotSatisfiable, "range %q: not satisfiable for %d bytes", rng, data.Size())
			return
		}
		if fixed == "" {
			r.Header.Del("Range")
		} else {
			r.Header.Set("Range", fixed)
		}
	}
	if !data.Seekable() && r.Header.Get("Range") == "" {
		s.streamArtifact(w, r, data, name)
		return
	}
	var rc io.ReadCloser
	if data.Seekable() {
		rc, err = data.Open(r.Context())
	} else {
		// A range of a registry's entry: the whole blob is verified into
		// a scratch file first.
		rc, err = s.spool(r.Context(), data)
	}
	if err != nil {
		s.failRead(w, name, data, err)
		return
	}
	defer rc.Close()
	// A layout's file goes out by sendfile, ranges included.
	http.ServeContent(w, r, "", time.Time{}, rc.(io.ReadSeeker))
}

// failBuild answers a build that failed: the reason is logged with the
// request's ID; the client gets the artifact's name and that ID, not an
// error that may name the factory's files.
func (s *Server) failBuild(w http.ResponseWriter, r *http.Request, name, version string, err error) {
	id := w.Header().Get("X-Request-Id")
	s.o.Log.Error("composing", "id", id, "artifact", name, "version", version, "err", err)
	if re := (*factory.RequestError)(nil); errors.As(err, &re) {
		fail(w, http.StatusBadRequest, "%s: %v", name, re)
		return
	}
	if errors.Is(err, exec.ErrNotFound) { // compose.Tools: /readyz names it
		fail(w, http.StatusServiceUnavailable, "making %s: a tool it needs is not installed on this factory (its /readyz names it)", name)
		return
	}
	fail(w, http.StatusInternalServerError, "making %s of release %s failed (request %s: the factory's log says why)", name, version, id)
}

// failRead answers a cached artifact that could not be read; a damaged
// one is refused from now on and built again.
func (s *Server) failRead(w http.ResponseWriter, name string, data *factory.CachedArtifact, err error) {
	s.o.Log.Error("reading a cached artifact", "id", w.Header().Get("X-Request-Id"), "artifact", name, "err", err)
	if errors.Is(err, factory.ErrDamaged) {
		s.arts.Distrust(data.Digest())
	}
	fail(w, http.StatusInternalServerError, "reading %s failed (request %s: the factory's log says why); ask again to have it built anew", name, w.Header().Get("X-Request-Id"))
}

// spool copies a registry's artifact into a scratch file, verified
// whole, for a range of it; the file is gone when closed.
func (s *Server) spool(ctx context.Context, data *factory.CachedArtifact) (io.ReadCloser, error) {
	rc, err := data.Open(ctx)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	f, err := os.CreateTemp(s.o.Work, "range-")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name()) // gone when closed; nothing is left behind
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// streamArtifact sends a registry's entry as it is read, verified: its
// last bytes leave only once the whole has matched its digest, and a
// mismatch cuts the connection (the client sees a short transfer, never
// a complete wrong file). No Range (a range is spooled and verified
// first); ETag and If-None-Match as ServeContent answers them.
func (s *Server) streamArtifact(w http.ResponseWriter, r *http.Request, data *factory.CachedArtifact, name string) {
	if inm := r.Header.Get("If-None-Match"); inm != "" && strings.Contains(inm, w.Header().Get("ETag")) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(data.Size(), 10))
	w.Header().Set("Accept-Ranges", "bytes")
	if r.Method == http.MethodHead {
		return
	}
	rc, err := data.Open(r.Context())
	if err != nil {
		s.failRead(w, name, data, err)
		return
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil {
		s.o.Log.Warn("streaming a cached artifact failed: the transfer is cut", "id", w.Header().Get("X-Request-Id"), "artifact", name, "err", err)
		if errors.Is(err, factory.ErrDamaged) {
			s.arts.Distrust(data.Digest()) // the entry is rebuilt next time
		}
		panic(http.ErrAbortHandler)
	}
}

// serveSide answers an artifact's .sha512 or .sig, reading it through
// (verified, from a registry).
func (s *Server) serveSide(w http.ResponseWriter, r *http.Request, data *factory.CachedArtifact, name, side string) {
	rc, err := data.Open(r.Context())
	if err != nil {
		s.failRead(w, name, data, err)
		return
	}
	defer rc.Close()
	var out []byte
	if side == "sha512" {
		h := sha512.New()
		if _, err = io.Copy(h, rc); err == nil {
			out = fmt.Appendf(nil, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), name)
		}
	} else {
		out, err = s.o.Signer.SignReader(rc)
	}
	if err != nil {
		s.failRead(w, name, data, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(out)
}

// artifactAsked reads an artifact's name and the architecture it names
// (amd64 or arm64, as upstream reads it), or answers 400 in upstream's
// words; a -secureboot one without the factory's Secure Boot key is 400
// as upstream's.
func (s *Server) artifactAsked(w http.ResponseWriter, name string) (factory.Artifact, string, bool) {
	a, err := factory.ParseArtifact(name)
	if err != nil {
		fail(w, http.StatusBadRequest, "error parsing profile from path: %v", err)
		return a, "", false
	}
	goArch, ok := archAsked(a.Arch)
	if !ok {
		fail(w, http.StatusBadRequest, "error parsing profile from path: invalid architecture: %q", a.Arch)
		return a, "", false
	}
	if a.SecureBoot && s.o.SecureBoot == nil {
		fail(w, http.StatusBadRequest, "error enhancing profile from schematic: secure boot is disabled (this factory has no Secure Boot key: no -secureboot media)")
		return a, "", false
	}
	return a, goArch, true
}

// target finds the release a media URL names and the release's name of
// the architecture asked for, or answers 4xx (400 for what the release
// cannot make of the schematic for out).
func (s *Server) target(w http.ResponseWriter, r *http.Request, sch *schematic.Schematic, out compose.Output, goArch string) (*factory.VerifiedRelease, string, bool) {
	rel, ok := s.release(w, r.PathValue("version"))
	if !ok {
		return nil, "", false
	}
	if err := factory.Unhonoured(rel, sch, out, r.PathValue("version")); err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return nil, "", false
	}
	rarch := factory.ReleaseArch(rel.Params.Architectures, goArch)
	if rarch == "" {
		fail(w, http.StatusNotFound, "release %s has no architecture %s (it has %s)", factory.TalosVersion(rel.Version), goArch, strings.Join(rel.Params.Architectures, ", "))
		return nil, "", false
	}
	return rel, rarch, true
}

// getPXE answers upstream's iPXE script byte for byte: the kernel and
// initramfs (with -secureboot, the UKI) at the factory with the
// platform's command line, the version always "v"-prefixed and the
// architecture Go's (iPXE's x86_64 and i386 boot amd64).
func (s *Server) getPXE(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	sch, ok := s.schematic(w, r, id)
	if !ok {
		return
	}
	want, secureBoot := strings.CutSuffix(r.PathValue("target"), compose.SecureBootSuffix)
	platformName, arch, ok := platform.SplitName(want)
	if !ok {
		fail(w, http.StatusBadRequest, "error parsing profile from path: invalid platform-arch: %q (want /pxe/ID/VERSION/PLATFORM-ARCH[-secureboot])", want)
		return
	}
	a, goArch, ok := s.artifactAsked(w, "cmdline-"+platformName+"-"+arch)
	if !ok {
		return
	}
	if secureBoot && s.o.SecureBoot == nil {
		fail(w, http.StatusBadRequest, "error enhancing profile from schematic: secure boot is disabled (this factory has no Secure Boot key)")
		return
	}
	rel, rarch, ok := s.target(w, r, sch, a.Output(), goArch)
	if !ok {
		return
	}
	art, err := s.arts.Compose(r.Context(), rel, sch, a, rarch)
	var cmdline []byte
	if err == nil {
		cmdline, err = art.Bytes(r.Context())
	}
	if s.refused(w, r, err) {
		return
	}
	if err != nil {
		s.failBuild(w, r, "cmdline-"+platformName+"-"+rarch, rel.Version, err)
		return
	}
	dir := s.pxeBase(r).JoinPath("image", id, factory.TalosVersion(rel.Version))
	file := func(name string) string { return dir.JoinPath(name).String() }
	args := strings.TrimSpace(string(cmdline))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if secureBoot {
		fmt.Fprintf(w, "#!ipxe\n\nimgfree\nkernel %s %s\nboot\n", file(platformName+"-"+goArch+compose.SecureBootSuffix+"-uki.efi"), args)
		return
	}
	fmt.Fprintf(w, "#!ipxe\n\nimgfree\nkernel %s %s\ninitrd %s\nboot\n", file("kernel-"+goArch), args, file("initramfs-"+goArch+".xz"))
}

// pxeBase is where iPXE fetches the files from: --external-url, else the
// request's scheme and host. A request that logged in with a password
// gets it in the URLs, as upstream embeds it, for iPXE to log in too.
func (s *Server) pxeBase(r *http.Request) *url.URL {
	u, err := url.Parse(s.o.ExternalURL)
	if err != nil || s.o.ExternalURL == "" {
		u = &url.URL{Scheme: "http", Host: r.Host}
		if r.TLS != nil {
			u.Scheme = "https"
		}
	}
	if user, pass, ok := r.BasicAuth(); ok && user != "" && principalOf(r.Context()).user == user {
		u.User = url.UserPassword(user, pass)
	}
	return u
}

// getSecureBootCert serves the certificate whose key signs the
// -secureboot media (the db certificate to enrol), PEM, as upstream's
// factory serves its own.
func (s *Server) getSecureBootCert(w http.ResponseWriter, _ *http.Request) {
	if s.o.SecureBoot == nil {
		fail(w, http.StatusNotFound, "this factory has no Secure Boot key")
		return
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.o.SecureBoot.Signer.Cert.Raw}))
}

// getSigningKey serves the public key of the factory's signatures (cache
// entries, .sig files), PEM, as upstream serves its own.
func (s *Server) getSigningKey(w http.ResponseWriter, _ *http.Request) {
	if s.o.Signer == nil {
		fail(w, http.StatusNotFound, "this factory has no signing key")
		return
	}
	pub, err := s.o.Signer.Verifier().PublicKey()
	if err != nil {
		fail(w, http.StatusInternalServerError, "%v", err)
		return
	}
	pemBytes, err := cryptoutils.MarshalPublicKeyToPEM(pub)
	if err != nil {
		fail(w, http.StatusInternalServerError, "%v", err)
		return
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Write(pemBytes)
}

// MetricsHandler serves the factory's metrics in Prometheus's format
// (behind a login when the metrics surface needs one).
func (s *Server) MetricsHandler() http.Handler {
	return s.identify(s.guard(surfaceMetrics, promhttp.HandlerFor(s.svc.Metrics(), promhttp.HandlerOpts{})))
}

// getTalosctl answers /talosctl/V with the URLs of the release's talosctl
// binaries, and /talosctl/V/talosctl-linux-ARCH with one, as upstream
// does; 404 for a release that ships none.
func (s *Server) getTalosctl(w http.ResponseWriter, r *http.Request) {
	rel, ok := s.release(w, r.PathValue("version"))
	if !ok {
		return
	}
	v := factory.TalosVersion(rel.Version)
	arches, err := rel.TalosctlArches(r.Context())
	if err != nil {
		fail(w, http.StatusInternalServerError, "talosctl of version %s: %v", v, err)
		return
	}
	if len(arches) == 0 {
		fail(w, http.StatusNotFound, "talosctl is not available for version %s: %v", v, factory.ErrNoTalosctl)
		return
	}
	file := r.PathValue("file")
	if file == "" {
		var urls []string
		for _, a := range arches {
			urls = append(urls, s.pxeBase(r).JoinPath("talosctl", v, factory.TalosctlPrefix+a).String())
		}
		writeJSON(w, urls)
		return
	}
	goArch, ok := strings.CutPrefix(file, factory.TalosctlPrefix)
	if !ok || !slices.Contains(arches, goArch) {
		fail(w, http.StatusNotFound, "%q is not a talosctl binary of version %s (have %s%s)", file, v, factory.TalosctlPrefix, strings.Join(arches, ", "+factory.TalosctlPrefix))
		return
	}
	b, err := rel.Talosctl(r.Context(), factory.ReleaseArch(rel.Params.Architectures, goArch))
	if err != nil {
		fail(w, http.StatusInternalServerError, "talosctl of version %s: %v", v, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", file))
	w.Write(b)
}

// getOverlays lists a version's official overlays: none, for a release
// ships no board overlay images (a schematic naming one is refused when
// its media are asked for); 200 [] as upstream answers a version without
// overlays.
func (s *Server) getOverlays(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.release(w, r.PathValue("version")); !ok {
		return
	}
	writeJSON(w, []struct{}{})
}
