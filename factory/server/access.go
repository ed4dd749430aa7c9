package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nodeforge/builder/factory"

	"golang.org/x/time/rate"
)

// surface is a part of the factory that one access policy covers.
type surface string

const (
	// surfaceBuild: creating schematics (any POST) and building what the
	// cache lacks (checked in compose, on a miss).
	surfaceBuild surface = "build"
	// surfaceDownload: artifacts, PXE scripts, schematics, versions,
	// extensions, the signing key, the web UI.
	surfaceDownload surface = "download"
	// surfacePull: the registry front, /v2/.
	surfacePull    surface = "pull"
	surfaceMetrics surface = "metrics"
	// surfaceOpen: health probes, always anonymous.
	surfaceOpen surface = ""
)

var surfaceNames = []surface{surfaceBuild, surfaceDownload, surfacePull, surfaceMetrics}

// surfaceWhat says what a surface's login is for, in refusals.
var surfaceWhat = map[surface]string{
	surfaceBuild:    "creating schematics and building artifacts",
	surfaceDownload: "downloading",
	surfacePull:     "pulling images",
	surfaceMetrics:  "reading metrics",
}

// realm is the realm of the factory's WWW-Authenticate challenges.
const realm = "nodeforge-factory"

// gate holds what New made of Access.
type gate struct {
	login      map[surface]bool
	creds      *Credentials
	limits     *limiters // builds; nil: no bound
	schematics *limiters // new schematics; nil: no bound
}

func newGate(a Access) (*gate, error) {
	g := &gate{login: map[surface]bool{}, creds: a.Credentials}
	for _, name := range a.Login {
		sf := surface(strings.TrimSpace(name))
		if !slices.Contains(surfaceNames, sf) {
			return nil, fmt.Errorf("factory: no surface %q to require a login for (surfaces: build, download, pull, metrics)", name)
		}
		g.login[sf] = true
	}
	if len(g.login) > 0 && a.Credentials == nil {
		return nil, errors.New("factory: a login is required but no credentials are given (an htpasswd file or a token file)")
	}
	var err error
	if g.limits, err = newLimiters("builds", a.BuildRate, a.BuildBurst); err != nil {
		return nil, err
	}
	if g.schematics, err = newLimiters("new schematics", a.SchematicRate, a.SchematicBurst); err != nil {
		return nil, err
	}
	return g, nil
}

// newLimiters bounds what per client, perMinute (0: no bound, nil).
func newLimiters(what string, perMinute float64, burst int) (*limiters, error) {
	switch {
	case perMinute < 0 || burst < 0:
		return nil, fmt.Errorf("factory: the rate of %s (%g a minute, burst %d) is negative", what, perMinute, burst)
	case perMinute == 0:
		return nil, nil
	}
	return &limiters{what: what, rate: rate.Limit(perMinute / 60), burst: max(burst, 1), per: perMinute, by: map[string]*clientLimit{}}, nil
}

// checkAuth reads an Authorization header: the user it proves, or failed
// when it proves nobody ("" and not failed: no header).
func checkAuth(c *Credentials, r *http.Request) (user string, failed bool) {
	if r.Header.Get("Authorization") == "" {
		return "", false
	}
	if name, pass, ok := r.BasicAuth(); ok {
		user, ok = c.Basic(name, pass)
		return user, !ok
	}
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if strings.EqualFold(scheme, "Bearer") {
		user, ok := c.Bearer(strings.TrimSpace(tok), "")
		return user, !ok
	}
	return "", true
}

// principal is who sent a request: a user it proved, or its address.
type principal struct {
	user   string
	addr   string // the client's address (a trusted proxy's header's, or the peer's)
	via    string // the trusted proxy that forwarded the request, when one did
	failed bool   // it sent credentials that prove nobody
}

// name names the principal in logs and rate limits.
func (p principal) name() string {
	if p.user != "" {
		return p.user
	}
	return p.addr
}

type principalKey struct{}

// principalOf is the request's principal; a context without one is
// anonymous.
func principalOf(ctx context.Context) principal {
	p, _ := ctx.Value(principalKey{}).(principal)
	return p
}

// identify puts the request's principal into its context. Credentials
// are checked whatever the surface, so that logs and rate limits name
// the user.
func (s *Server) identify(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p principal
		p.addr, p.via = s.proxies.client(r)
		if s.gate != nil && s.gate.creds != nil {
			p.user, p.failed = checkAuth(s.gate.creds, r)
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// routeSurface is the surface a request to the API is on: /v2/ is pull,
// anything that is not a read (POST /schematics, the UI's forms) is
// build, health probes are open, the rest is download.
func routeSurface(r *http.Request) surface {
	switch {
	case r.URL.Path == "/healthz" || r.URL.Path == "/readyz":
		return surfaceOpen
	case isRegistryPath(r):
		return surfacePull
	case r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions:
		return surfaceDownload
	}
	return surfaceBuild
}

func isRegistryPath(r *http.Request) bool {
	return r.URL.Path == "/v2" || strings.HasPrefix(r.URL.Path, "/v2/")
}

// guard lets a request on surface sf through to h when the surface lets
// its principal in, and answers 401 otherwise.
func (s *Server) guard(sf surface, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.lets(w, r, sf) {
			h.ServeHTTP(w, r)
		}
	})
}

// guardRoutes guards every request to mux with its route's surface
// (routeSurface), so that routes added later are guarded too.
func (s *Server) guardRoutes(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.lets(w, r, routeSurface(r)) {
			mux.ServeHTTP(w, r)
			return
		}
		_, r.Pattern = mux.Handler(r) // the refusal counts under its route
	})
}

// lets says whether sf lets the request in, having answered it when not.
func (s *Server) lets(w http.ResponseWriter, r *http.Request, sf surface) bool {
	if err := s.gate.allows(sf, principalOf(r.Context())); err != nil {
		s.refused(w, r, err)
		return false
	}
	return true
}

// allows says whether p may use sf (a refusal when not); a nil gate (a
// Server not made by New) lets anyone in.
func (g *gate) allows(sf surface, p principal) error {
	if g == nil || !g.login[sf] || p.user != "" {
		return nil
	}
	msg := surfaceWhat[sf] + " needs a login"
	if p.failed {
		msg = "wrong user name, password or token"
	}
	return &refusal{status: http.StatusUnauthorized, msg: msg, perClient: true}
}

// refusal is a request the factory will not serve now: 401 (no login),
// 429 (the client's build rate) or 503 (the build queue is full).
type refusal struct {
	status     int
	retryAfter time.Duration
	msg        string
	// perClient: said of one client (its login, its rate), not of the
	// factory, so not for the others waiting for the same build.
	perClient bool
}

func (e *refusal) Error() string { return e.msg }

// PerClient says whether the refusal is of one client (see perClient).
func (e *refusal) PerClient() bool { return e.perClient }

// setRetryAfter says, when the refusal has a wait, when to try again:
// whole seconds, rounded up.
func (e *refusal) setRetryAfter(h http.Header) {
	if e.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(e.retryAfter.Seconds()))))
	}
}

// ociCodes are the distribution spec's error codes of refusals.
var ociCodes = map[int]string{
	http.StatusUnauthorized:       "UNAUTHORIZED",
	http.StatusTooManyRequests:    "TOOMANYREQUESTS",
	http.StatusServiceUnavailable: "UNAVAILABLE",
}

// refused answers err when it is a refusal (with WWW-Authenticate or
// Retry-After, and as a registry answers under /v2/) and says whether
// it did; other errors are the caller's.
func (s *Server) refused(w http.ResponseWriter, r *http.Request, err error) bool {
	var rf *refusal
	if be := (*factory.BusyError)(nil); errors.As(err, &be) {
		rf = &refusal{status: http.StatusServiceUnavailable, retryAfter: busyRetry, msg: be.Error()}
	} else if !errors.As(err, &rf) {
		return false
	}
	h := w.Header()
	if rf.status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Basic realm="`+realm+`"`)
	}
	rf.setRetryAfter(h)
	if !isRegistryPath(r) {
		fail(w, rf.status, "%s", rf.msg)
		return true
	}
	h.Set("Docker-Distribution-API-Version", "registry/2.0")
	h.Set("Content-Type", "application/json")
	w.WriteHeader(rf.status)
	type ociError struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	json.NewEncoder(w).Encode(map[string][]ociError{"errors": {{Code: ociCodes[rf.status], Message: rf.msg}}})
	return true
}

// mayBuild says whether the request in ctx may trigger a build (a
// login, when the build surface needs one, and within its client's
// rate); compose asks on a cache miss, so that cached artifacts stay
// anonymous when downloads are.
func (s *Server) mayBuild(ctx context.Context) error {
	if s.gate == nil {
		return nil
	}
	p := principalOf(ctx)
	if err := s.gate.allows(surfaceBuild, p); err != nil {
		return err
	}
	return s.gate.limits.take(p.name(), time.Now())
}

// limiters are a token bucket per client, for the builds it triggers or
// the schematics it stores.
type limiters struct {
	what  string // "builds", for refusals
	rate  rate.Limit
	burst int
	per   float64 // a minute, for refusals

	mu sync.Mutex
	by map[string]*clientLimit
}

type clientLimit struct {
	lim  *rate.Limiter
	last time.Time
}

// maxClients bounds the clients whose buckets are kept.
const maxClients = 10000

// take spends one of client's builds, or refuses saying when the next
// one comes.
func (l *limiters) take(client string, now time.Time) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.by[client]
	if c == nil {
		if len(l.by) >= maxClients {
			l.evict(now)
		}
		c = &clientLimit{lim: rate.NewLimiter(l.rate, l.burst)}
		l.by[client] = c
	}
	c.last = now
	r := c.lim.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	if wait == 0 {
		return nil
	}
	r.CancelAt(now)
	return &refusal{status: http.StatusTooManyRequests, retryAfter: wait, perClient: true,
		msg: fmt.Sprintf("%s asked for too many %s (at most %g a minute, %d at once); try again in %s", client, l.what, l.per, l.burst, wait.Round(time.Second))}
}

// evict forgets the clients whose buckets have filled up again (a new
// one is the same), and the longest idle one if that is not enough.
func (l *limiters) evict(now time.Time) {
	refill := time.Duration(float64(l.burst) / float64(l.rate) * float64(time.Second))
	oldest, oldestAt := "", now
	for k, c := range l.by {
		if now.Sub(c.last) >= refill {
			delete(l.by, k)
			continue
		}
		if !c.last.After(oldestAt) {
			oldest, oldestAt = k, c.last
		}
	}
	if len(l.by) >= maxClients {
		delete(l.by, oldest)
	}
}

// busyRetry is the Retry-After of a full build queue.
const busyRetry = 10 * time.Second
