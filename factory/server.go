package factory

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"golang.org/x/sync/singleflight"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/build/compose"
	"github.com/nodeforge/builder/build/media/secureboot"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/release"
)

// ReleaseStore is a store of releases and the keys they must verify with.
type ReleaseStore struct {
	Store oci.Store
	Keys  []signature.Verifier
}

// ServerOptions configure a factory.
type ServerOptions struct {
	Releases []ReleaseStore
	// Cache holds the schematics and the built artifacts.
	Cache oci.Store
	// Signer signs cache entries and checks them when read; nil caches
	// no artifact (every request composes).
	Signer *signing.Signer
	// BuilderVersion is part of every cache key: another builder may
	// compose other bytes.
	BuilderVersion string
	// ExternalURL is where clients reach the factory (PXE scripts point
	// back at it); "" uses the request's host.
	ExternalURL string
	// Work is a scratch directory for the ISO tool.
	Work string
	// MaxBuilds bounds the builds running at once (0: 2).
	MaxBuilds int
	// MaxQueue bounds the builds waiting for a slot (0: 4 × MaxBuilds;
	// negative: none wait); past it a request gets 503 and Retry-After.
	MaxQueue int
	// Access says who may do what (the zero value: anyone, anything).
	Access Access
	// BuildTimeout bounds one build (0: 10 minutes).
	BuildTimeout time.Duration
	// SecureBoot signs the -secureboot media (systemd-boot and the UKIs
	// made from the release's systemd-stub); nil: the factory serves none.
	SecureBoot *secureboot.Signing
	// VerifyInterval is how long a cached artifact's file in a layout
	// cache, once hashed, is served without hashing it again while its
	// size and modification time stay (0: 10 minutes; negative: hashed at
	// every request). A registry's entries are verified as they stream.
	VerifyInterval time.Duration
	Log            *slog.Logger
}

// requestError is a build refused for what the request asks (a
// schematic the release cannot honour): 400 with its message, which names
// no file of the factory's.
type requestError struct{ msg string }

func (e *requestError) Error() string { return e.msg }

// maxSchematicBody bounds a POSTed schematic.
const maxSchematicBody = 64 << 10

// Server is the Image Factory's HTTP API (compatible with the upstream
// factory's routes): schematics, versions, and artifacts composed on
// demand from verified releases.
type Server struct {
	o          ServerOptions
	schematics *schematics
	releases   map[string]*Release // version -> verified release
	versions   []string
	problems   []string // releases not served, and why
	unverified []string // versions listed but not served (gc keeps their entries)
	unlisted   []string // release stores whose versions could not be listed
	cache      *artifactCache
	metrics    *metrics
	builds     singleflight.Group
	built      atomic.Int64
	slots      chan struct{}
	gate       *gate // logins, build rates, the build queue
	buildFn    func(context.Context, *Release, *schematic.Schematic, artifact, string) ([]byte, error)
	requests   atomic.Int64
	inst       installers // the registry front's checked entries
}

// Stats says how many artifacts were built and served from the cache, and
// how many cache entries were refused.
func (s *Server) Stats() Stats {
	return Stats{Builds: s.built.Load(), Hits: s.cache.hits.Load(), CacheErrors: s.cache.errors.Load()}
}

// NewServer verifies every version of every release store (a version that
// does not verify is not served, and /readyz names it).
func NewServer(ctx context.Context, o ServerOptions) (*Server, error) {
	if o.Cache == nil || len(o.Releases) == 0 {
		return nil, errors.New("factory: a cache store and at least one release store are needed")
	}
	if o.MaxBuilds <= 0 {
		o.MaxBuilds = 2
	}
	if o.BuildTimeout <= 0 {
		o.BuildTimeout = 10 * time.Minute
	}
	if o.MaxQueue == 0 {
		o.MaxQueue = 4 * o.MaxBuilds
	}
	g, err := newGate(o.Access, max(o.MaxQueue, 0))
	if err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.VerifyInterval == 0 {
		o.VerifyInterval = defaultVerifyInterval
	}
	m := newMetrics()
	s := &Server{o: o, schematics: &schematics{st: o.Cache}, releases: map[string]*Release{}, slots: make(chan struct{}, o.MaxBuilds),
		cache: &artifactCache{st: o.Cache, signer: o.Signer, log: o.Log, interval: o.VerifyInterval, now: time.Now, metrics: m}, metrics: m, gate: g}
	s.buildFn = s.build
	for _, rs := range o.Releases {
		tags, err := rs.Store.Tags(ctx, release.RepoLock)
		if err != nil {
			s.problems = append(s.problems, fmt.Sprintf("%s: no releases listed: %v", rs.Store, err))
			s.unlisted = append(s.unlisted, rs.Store.String())
			continue
		}
		for _, v := range tags {
			if _, dup := s.releases[v]; dup || strings.HasPrefix(v, "sha256-") {
				continue // served from the first store; referrer fallback tags
			}
			rel, err := Open(ctx, rs.Store, v, rs.Keys)
			if err != nil {
				s.problems = append(s.problems, err.Error())
				s.unverified = append(s.unverified, v)
				o.Log.Warn("release not served", "version", v, "store", rs.Store.String(), "err", err)
				continue
			}
			s.releases[v] = rel
			s.versions = append(s.versions, v)
		}
	}
	slices.Sort(s.versions)
	return s, nil
}

// Handler routes the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /schematics", s.postSchematic)
	mux.HandleFunc("GET /schematics/{id}", s.getSchematic)
	mux.HandleFunc("GET /versions", s.getVersions)
	mux.HandleFunc("GET /version/{version}/extensions/official", s.getExtensions)
	mux.HandleFunc("GET /image/{id}/{version}/{artifact}", s.getImage)
	mux.HandleFunc("GET /pxe/{id}/{version}/{target}", s.getPXE)
	mux.HandleFunc("GET /oci/cosign/signing-key.pub", s.getSigningKey)
	mux.HandleFunc("GET /secureboot/signing-cert.pem", s.getSecureBootCert)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", s.getReady)
	s.uiRoutes(mux)
	mux.HandleFunc("/v2/", s.serveRegistry)
	return s.identify(s.logged(s.guardRoutes(mux)))
}

// logged gives every request an ID (the client's X-Request-Id or a
// counter) echoed in the response, and logs it with its outcome.
func (s *Server) logged(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 64 {
			id = fmt.Sprintf("r%d", s.requests.Add(1))
		}
		w.Header().Set("X-Request-Id", id)
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		start := time.Now()
		h.ServeHTTP(rec, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		s.metrics.requests.WithLabelValues(route, strconv.Itoa(rec.status)).Inc()
		s.metrics.bytesSent.Add(float64(rec.bytes))
		s.o.Log.Info("request", "id", id, "user", principalOf(r.Context()).name(), "method", r.Method, "path", r.URL.Path, "status", rec.status, "bytes", rec.bytes, "seconds", time.Since(start).Seconds())
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *statusRecorder) WriteHeader(code int) { r.status = code; r.ResponseWriter.WriteHeader(code) }
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
		fail(w, http.StatusBadRequest, "reading the schematic: %v", err)
		return
	}
	sch, err := schematic.Parse(body)
	if err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	available := s.extensionNames()
	for _, e := range sch.Extensions() {
		if !slices.Contains(available, e) {
			fail(w, http.StatusBadRequest, "extension %q is in no served release (available: %s)", e, strings.Join(available, ", "))
			return
		}
	}
	id, err := s.schematics.put(r.Context(), sch)
	if err != nil {
		s.o.Log.Error("storing a schematic", "err", err)
		fail(w, http.StatusInternalServerError, "storing the schematic failed")
		return
	}
	s.metrics.schematicsCreated.Inc()
	canon, _ := sch.Canonical()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]string{"id": id, "schematic": string(canon)})
}

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	return b.Bytes(), err
}

// extensionNames are the extensions of every served release.
func (s *Server) extensionNames() []string {
	var out []string
	for _, rel := range s.releases {
		for _, e := range rel.Extensions {
			if !slices.Contains(out, e) {
				out = append(out, e)
			}
		}
	}
	slices.Sort(out)
	return out
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

// schematic finds a schematic or answers 404 (400 for what cannot be an
// ID).
func (s *Server) schematic(w http.ResponseWriter, r *http.Request, id string) (*schematic.Schematic, bool) {
	if len(id) != 64 || strings.Trim(id, "0123456789abcdef") != "" {
		fail(w, http.StatusBadRequest, "%q is not a schematic ID (64 lower-case hex digits)", id)
		return nil, false
	}
	sch, err := s.schematics.get(r.Context(), id)
	switch {
	case errors.Is(err, errUnknownSchematic):
		fail(w, http.StatusNotFound, "schematic %s not found", id)
		return nil, false
	case err != nil:
		s.o.Log.Error("reading a schematic", "id", id, "err", err)
		fail(w, http.StatusInternalServerError, "reading schematic %s failed", id)
		return nil, false
	}
	return sch, true
}

func (s *Server) getVersions(w http.ResponseWriter, r *http.Request) {
	out := []string{}
	branch := r.URL.Query().Get("branch")
	for _, v := range s.versions {
		if branch == "" || s.releases[v].Branch == branch {
			out = append(out, v)
		}
	}
	writeJSON(w, out)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// release finds a served version or answers 404.
func (s *Server) release(w http.ResponseWriter, v string) (*Release, bool) {
	rel := s.releases[v]
	if rel == nil {
		fail(w, http.StatusNotFound, "version %q is not served (see /versions)", v)
		return nil, false
	}
	return rel, true
}

// officialExtension is one entry of /version/{v}/extensions/official.
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
		meta, err := rel.extensionMetadata(r.Context(), name)
		if err != nil {
			s.o.Log.Error("reading an extension", "name", name, "err", err)
			fail(w, http.StatusInternalServerError, "reading extension %s failed", name)
			return
		}
		repo := release.RepoExtension + name
		out = append(out, officialExtension{Name: name, Ref: rel.Store.Ref(repo, rel.Version), Digest: rel.digests[repo],
			Author: meta.Author, Description: meta.Description})
	}
	writeJSON(w, out)
}

func (s *Server) getReady(w http.ResponseWriter, _ *http.Request) {
	if len(s.problems) > 0 || len(s.versions) == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "serving %d versions\n", len(s.versions))
		for _, p := range s.problems {
			fmt.Fprintln(w, "not served:", p)
		}
		return
	}
	fmt.Fprintf(w, "ready: %s\n", strings.Join(s.versions, ", "))
}

func (s *Server) getImage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("artifact")
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
	a, err := parseArtifact(name)
	if err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	if a.secureBoot && s.o.SecureBoot == nil {
		fail(w, http.StatusNotFound, "this factory has no Secure Boot key: no -secureboot media")
		return
	}
	sch, rel, arch, ok := s.target(w, r, a.arch)
	if !ok {
		return
	}
	data, err := s.compose(r.Context(), rel, sch, a, arch)
	if s.refused(w, r, err) {
		return
	}
	if err != nil {
		s.failBuild(w, r, name, rel.Version, err)
		return
	}
	hexsum := data.desc.Digest.Hex
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
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	if rng := r.Header.Get("Range"); rng != "" {
		fixed, ok := normalizeRange(rng, data.size())
		if !ok {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", data.size()))
			fail(w, http.StatusRequestedRangeNotSatisfiable, "range %q: not satisfiable for %d bytes", rng, data.size())
			return
		}
		if fixed == "" {
			r.Header.Del("Range")
		} else {
			r.Header.Set("Range", fixed)
		}
	}
	if !data.seekable() && r.Header.Get("Range") == "" {
		s.streamArtifact(w, r, data, name)
		return
	}
	var rc io.ReadCloser
	if data.seekable() {
		rc, err = data.open(r.Context())
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
	if re := (*requestError)(nil); errors.As(err, &re) {
		fail(w, http.StatusBadRequest, "%s: %s", name, re.msg)
		return
	}
	fail(w, http.StatusInternalServerError, "making %s of release %s failed (request %s: the factory's log says why)", name, version, id)
}

// failRead answers a cached artifact that could not be read; a damaged
// one is refused from now on and built again.
func (s *Server) failRead(w http.ResponseWriter, name string, data *cachedArtifact, err error) {
	s.o.Log.Error("reading a cached artifact", "id", w.Header().Get("X-Request-Id"), "artifact", name, "err", err)
	if errors.Is(err, errDamaged) {
		s.cache.distrust(data.desc.Digest)
		s.metrics.damaged.Inc()
	}
	fail(w, http.StatusInternalServerError, "reading %s failed (request %s: the factory's log says why); ask again to have it built anew", name, w.Header().Get("X-Request-Id"))
}

// spool copies a registry's artifact into a scratch file, verified
// whole, for a range of it; the file is gone when closed.
func (s *Server) spool(ctx context.Context, data *cachedArtifact) (io.ReadCloser, error) {
	rc, err := data.open(ctx)
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
func (s *Server) streamArtifact(w http.ResponseWriter, r *http.Request, data *cachedArtifact, name string) {
	if inm := r.Header.Get("If-None-Match"); inm != "" && strings.Contains(inm, w.Header().Get("ETag")) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(data.size(), 10))
	w.Header().Set("Accept-Ranges", "bytes")
	if r.Method == http.MethodHead {
		return
	}
	rc, err := data.open(r.Context())
	if err != nil {
		s.failRead(w, name, data, err)
		return
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil {
		s.o.Log.Warn("streaming a cached artifact failed: the transfer is cut", "id", w.Header().Get("X-Request-Id"), "artifact", name, "err", err)
		if errors.Is(err, errDamaged) {
			s.cache.distrust(data.desc.Digest) // the entry is rebuilt next time
			s.metrics.damaged.Inc()
		}
		panic(http.ErrAbortHandler)
	}
}

// serveSide answers an artifact's .sha512 or .sig, reading it through
// (verified, from a registry).
func (s *Server) serveSide(w http.ResponseWriter, r *http.Request, data *cachedArtifact, name, side string) {
	rc, err := data.open(r.Context())
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

// target finds what a media URL names: its schematic, its release and
// the release's name of the architecture asked for, or answers 4xx.
func (s *Server) target(w http.ResponseWriter, r *http.Request, arch string) (*schematic.Schematic, *Release, string, bool) {
	sch, ok := s.schematic(w, r, r.PathValue("id"))
	if !ok {
		return nil, nil, "", false
	}
	rel, ok := s.release(w, r.PathValue("version"))
	if !ok {
		return nil, nil, "", false
	}
	rarch := releaseArch(rel.Params.Architectures, arch)
	if rarch == "" {
		fail(w, http.StatusNotFound, "release %s has no architecture %s (it has %s)", rel.Version, arch, strings.Join(rel.Params.Architectures, ", "))
		return nil, nil, "", false
	}
	return sch, rel, rarch, true
}

// compose makes one artifact (see flight).
func (s *Server) compose(ctx context.Context, rel *Release, sch *schematic.Schematic, a artifact, arch string) (*cachedArtifact, error) {
	id, err := sch.ID()
	if err != nil {
		return nil, err
	}
	name := a.composedName(arch)
	e := entryInfo{Schematic: id, Version: rel.Version, Name: name, Arch: arch, Platform: a.platform, Builder: s.o.BuilderVersion}
	keyName := name
	if a.secureBoot {
		// Signed with this factory's key: another key, another entry.
		e.SecureBoot = s.o.SecureBoot.CertSHA256()
		keyName += "\x00" + e.SecureBoot
	}
	e.Key = cacheKey(rel, id, keyName, s.o.BuilderVersion)
	v, err := s.flight(ctx, flightJob{
		key:    strings.Join([]string{id, rel.Version, arch, name}, "\x00"),
		labels: []string{rel.Version, a.kind, arch},
		lookup: func(bctx context.Context) (any, bool, bool) { return s.cache.get(bctx, e) },
		build: func(bctx context.Context) (any, error) {
			data, err := s.buildFn(bctx, rel, sch, a, arch)
			if err != nil {
				return nil, err
			}
			if err := s.cache.put(bctx, e, data); err != nil {
				s.o.Log.Warn("caching an artifact failed", "artifact", name, "err", err)
			}
			return builtArtifact(data), nil // later requests read the entry
		},
	})
	if err != nil {
		return nil, err
	}
	return v.(*cachedArtifact), nil
}

// flightJob is one thing the factory builds on a cache miss.
type flightJob struct {
	key    string   // one flight per key
	labels []string // the metrics' version, kind and arch
	// lookup returns the cached value; refused says an entry was there
	// and failed its checks (it is built again).
	lookup func(ctx context.Context) (v any, ok, refused bool)
	build  func(ctx context.Context) (any, error)
}

// flight answers a job from the cache or builds it. One build per key
// runs at once (others wait for it), at most MaxBuilds builds run, and a
// build is detached from the request that started it, within the build
// time limit: a client that hangs up does not cancel what others wait for.
func (s *Server) flight(ctx context.Context, j flightJob) (any, error) {
	ran := false // this call's flight ran: a refusal from another is not this client's
	ch := s.builds.DoChan(j.key, func() (any, error) {
		ran = true
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.BuildTimeout)
		defer cancel()
		v, ok, refused := j.lookup(bctx)
		if ok {
			s.metrics.hits.WithLabelValues(j.labels...).Inc()
			return v, nil
		}
		if refused {
			s.metrics.cacheErrors.WithLabelValues(j.labels...).Inc()
		}
		free, err := s.buildSlot(ctx, bctx)
		if err != nil {
			return nil, err
		}
		defer free()
		start := time.Now()
		v, err = j.build(bctx)
		if err != nil {
			return nil, err
		}
		s.built.Add(1)
		s.metrics.built.WithLabelValues(j.labels...).Inc()
		s.metrics.buildSeconds.WithLabelValues(j.labels[1]).Observe(time.Since(start).Seconds())
		return v, nil
	})
	select {
	case res := <-ch:
		if rf := (*refusal)(nil); !ran && errors.As(res.Err, &rf) && rf.perClient {
			return s.flight(ctx, j) // ask for this client
		}
		return res.Val, res.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// build composes the media the artifact belongs to and returns its bytes.
func (s *Server) build(ctx context.Context, rel *Release, sch *schematic.Schematic, a artifact, arch string) ([]byte, error) {
	boot, exts, o, err := rel.Inputs(ctx, arch, sch.Extensions())
	if err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(s.o.Work, "compose-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	o.Schematic, o.Platform, o.Work = sch, a.platform, work
	o.DiskFormats, o.Compressions = []string{}, nil
	if a.secureBoot {
		o.SecureBoot = &compose.SecureBoot{Signing: s.o.SecureBoot}
	}
	if a.kind == "disk" {
		o.DiskFormats = []string{a.format}
		if a.compression != "" {
			o.Compressions = []string{a.compression}
		}
	}
	res, err := compose.Media(ctx, boot, exts, o)
	if err != nil {
		return nil, err
	}
	want := a.composedName(arch)
	for _, f := range res.Files {
		if f.Name == want {
			return f.Data, nil
		}
	}
	return nil, fmt.Errorf("%s was not made (the release has no EFI boot manager for disk images?)", want)
}

func (s *Server) getPXE(w http.ResponseWriter, r *http.Request) {
	platformName, arch, ok := strings.Cut(r.PathValue("target"), "-")
	if !ok {
		fail(w, http.StatusBadRequest, "want /pxe/ID/VERSION/PLATFORM-ARCH")
		return
	}
	a, err := parseArtifact("cmdline-" + platformName + "-" + arch)
	if err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	sch, rel, rarch, ok := s.target(w, r, arch)
	if !ok {
		return
	}
	art, err := s.compose(r.Context(), rel, sch, a, rarch)
	var cmdline []byte
	if err == nil {
		cmdline, err = art.bytes(r.Context())
	}
	if s.refused(w, r, err) {
		return
	}
	if err != nil {
		fail(w, http.StatusInternalServerError, "making the command line failed: %v", err)
		return
	}
	base := s.o.ExternalURL
	if base == "" {
		base = "http://" + r.Host
	}
	base = strings.TrimSuffix(base, "/") + "/image/" + r.PathValue("id") + "/" + rel.Version + "/"
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "#!ipxe\nkernel %skernel-%s %s\ninitrd %sinitramfs-%s.xz\nboot\n", base, arch, strings.TrimSpace(string(cmdline)), base, arch)
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
