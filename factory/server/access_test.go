package server

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/attest/signing/signingtest"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
)

const (
	alicePassword = "alice-secret-password"
	ciToken       = "ci-token-0123456789abcdef"
)

// testCredentials: alice and bob by password (bcrypt, as htpasswd -B
// writes it, $2y$ and $2a$), ci by a token, ops by a token's sha256.
func testCredentials(t *testing.T) *Credentials {
	t.Helper()
	hash := func(pw, prefix string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		return prefix + string(h[4:])
	}
	dir := t.TempDir()
	htpasswd := filepath.Join(dir, "htpasswd")
	os.WriteFile(htpasswd, []byte("# the factory's users\r\nalice:"+hash(alicePassword, "$2y$")+"\r\n\nbob:"+hash("bob-password", "$2a$")+"\n"), 0o600)
	tokens := filepath.Join(dir, "tokens")
	opsSum := sha256.Sum256([]byte("ops-token-fedcba9876543210"))
	os.WriteFile(tokens, []byte("ci:"+ciToken+"\n# hashed\nops:sha256:"+hex.EncodeToString(opsSum[:])+"\n"), 0o600)
	c, err := LoadCredentials(htpasswd, tokens)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCredentials(t *testing.T) {
	c := testCredentials(t)
	for _, tc := range []struct {
		user, pass, want string
	}{
		{"alice", alicePassword, "alice"},
		{"alice", alicePassword, "alice"}, // remembered
		{"bob", "bob-password", "bob"},
		{"alice", "wrong", ""},
		{"mallory", alicePassword, ""},
		{"ci", ciToken, "ci"}, // a token as its name's password
		{"alice", ciToken, ""},
		{"ops", "ops-token-fedcba9876543210", "ops"},
	} {
		if got, ok := c.Basic(tc.user, tc.pass); got != tc.want || ok != (tc.want != "") {
			t.Errorf("basic %s/%s: %q %v, want %q", tc.user, tc.pass, got, ok, tc.want)
		}
	}
	for tok, want := range map[string]string{ciToken: "ci", "ops-token-fedcba9876543210": "ops", "ci-token-0123456789abcdeF": "", "": ""} {
		if got, _ := c.Bearer(tok, ""); got != want {
			t.Errorf("bearer %q: %q, want %q", tok, got, want)
		}
	}
	// Authorization headers.
	for _, tc := range []struct {
		header, user string
		failed       bool
	}{
		{"", "", false},
		{"Basic " + b64("alice:"+alicePassword), "alice", false},
		{"Basic " + b64("alice:nope"), "", true},
		{"Bearer " + ciToken, "ci", false},
		{"bearer " + ciToken, "ci", false},
		{"Bearer nope", "", true},
		{"Digest username=alice", "", true},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		if user, failed := checkAuth(c, r); user != tc.user || failed != tc.failed {
			t.Errorf("Authorization %q: %q failed=%v, want %q failed=%v", tc.header, user, failed, tc.user, tc.failed)
		}
	}
}

// newServer is a factory serving nothing yet (the tests say what with
// the service's test hooks, factory/fortest.go): the front of
// factory.NewUnverified, its options checked as New checks them.
func newServer(o Options) (*Server, error) {
	if err := checkFront(o); err != nil {
		return nil, err
	}
	svc, err := factory.NewUnverified(o.Service)
	if err != nil {
		return nil, err
	}
	return newFront(svc, o)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// accessFactory is a factory serving one release ("1.0", x86_64) whose
// builds are the build hook's (default: the artifact's name), and the
// ID of the empty schematic.
type accessFactory struct {
	*Server
	url, id string
	log     *testutil.Log
}

func newAccessFactory(t *testing.T, o Options) *accessFactory {
	t.Helper()
	releases, err := oci.CreateLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if o.Service.Cache == nil {
		if o.Service.Cache, err = oci.CreateLayout(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	logs := &testutil.Log{}
	o.Service.Releases, o.Service.Log, o.Service.BuilderVersion = []factory.ReleaseStore{{Store: releases}}, slog.New(slog.NewTextHandler(logs, nil)), "test"
	s, err := newServer(o)
	if err != nil {
		t.Fatal(err)
	}
	s.svc.ServeUnverified(&factory.VerifiedRelease{Version: "1.0", Params: compose.Params{Architectures: []string{"x86_64"}}, Digests: map[string]string{}})
	s.svc.BuildWith(func(_ context.Context, _ *factory.VerifiedRelease, _ *schematic.Schematic, a factory.Artifact, arch string) ([]byte, error) {
		return []byte(a.FileName(arch)), nil
	})
	sch, _ := schematic.Parse([]byte("{}"))
	id, err := s.svc.AddSchematic(context.Background(), sch, nil)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitBuildsAtEnd(t, s.WaitBuilds)
	hs := httptest.NewServer(testutil.NoLocalPaths(t, s.Handler()))
	t.Cleanup(hs.Close)
	return &accessFactory{Server: s, url: hs.URL, id: id, log: logs}
}

// do sends a request with an Authorization header (or none) and returns
// the response with its body read.
func (f *accessFactory) do(t *testing.T, method, path, auth string) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if method == "POST" { // the empty schematic (an empty body is not one)
		body = strings.NewReader("customization: {}\n")
	}
	req, _ := http.NewRequest(method, f.url+path, body)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestAccessSurfaces: an internal factory, logins to build and to read
// metrics, anonymous downloads: who gets what, and 401's challenge.
func TestAccessSurfaces(t *testing.T) {
	f := newAccessFactory(t, Options{Service: factory.Options{Signer: signingtest.Signer(t)}, Access: Access{Login: []string{"build", "metrics"}, Credentials: testCredentials(t)}})
	alice := "Basic " + b64("alice:"+alicePassword)
	kernel := "/image/" + f.id + "/1.0/kernel-amd64"
	for _, c := range []struct {
		method, path, auth string
		code               int
		says               string
	}{
		{"GET", "/versions", "", 200, "1.0"},
		{"GET", "/healthz", "", 200, "ok"},
		{"GET", "/versions", "Basic " + b64("alice:wrong"), 200, "1.0"}, // a wrong login on an anonymous surface is anonymous
		{"POST", "/schematics", "", 401, "creating schematics and building artifacts needs a login"},
		{"POST", "/schematics", "Basic " + b64("alice:wrong"), 401, "wrong user name, password or token"},
		{"POST", "/schematics", "Basic " + b64("mallory:"+alicePassword), 401, "wrong user name"},
		{"POST", "/schematics", "Bearer not-a-token", 401, "wrong user name"},
		{"POST", "/schematics", alice, 201, f.id},
		{"POST", "/schematics", "Bearer " + ciToken, 201, f.id},
		{"GET", kernel, "", 401, "needs a login"}, // not cached: a build
		{"GET", "/pxe/" + f.id + "/1.0/metal-amd64", "", 401, "needs a login"},
		{"GET", kernel, alice, 200, "kernel-x86_64"},
		{"GET", kernel, "", 200, "kernel-x86_64"}, // cached: a download
		{"GET", kernel + ".sha256", "", 200, "kernel-amd64"},
	} {
		resp, body := f.do(t, c.method, c.path, c.auth)
		if resp.StatusCode != c.code || !strings.Contains(body, c.says) {
			t.Errorf("%s %s (%s): %d %q, want %d saying %q", c.method, c.path, c.auth, resp.StatusCode, body, c.code, c.says)
		}
		if got := resp.Header.Get("WWW-Authenticate"); (c.code == 401) != (got == `Basic realm="nodeforge-factory"`) {
			t.Errorf("%s %s: %d with WWW-Authenticate %q", c.method, c.path, resp.StatusCode, got)
		}
	}
	if st := f.svc.Stats(); st.Builds != 1 || st.Hits != 2 {
		t.Errorf("stats: %+v, want one build and two hits", st)
	}
	// Metrics need a login.
	for auth, code := range map[string]int{"": 401, alice: 200, "Bearer " + ciToken: 200, "Bearer nope": 401} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		f.MetricsHandler().ServeHTTP(rec, req)
		if rec.Code != code || code == 401 && rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("metrics with %q: %d, want %d", auth, rec.Code, code)
		}
		// Refusals count under their route.
		if code == 200 && !strings.Contains(rec.Body.String(), `nodeforge_factory_requests_total{code="401",route="POST /schematics"} 4`+"\n") {
			t.Errorf("the refusals of POST /schematics are not counted:\n%s", rec.Body)
		}
	}
	// The request log names the user (or the address), never a secret.
	logs := f.log.String()
	if !strings.Contains(logs, "user=alice ") || !strings.Contains(logs, "user=ci ") || !strings.Contains(logs, "user=127.0.0.1 ") {
		t.Errorf("the log does not name the users:\n%s", logs)
	}
	for _, secret := range []string{alicePassword, ciToken, b64("alice:" + alicePassword)} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log shows %q:\n%s", secret, logs)
		}
	}
}

// TestAccessRegistryAndDownloads: an external factory (anonymous builds,
// logins to download and pull): under /v2/ a refusal is a registry's.
func TestAccessRegistryAndDownloads(t *testing.T) {
	f := newAccessFactory(t, Options{Access: Access{Login: []string{"download", "pull"}, Credentials: testCredentials(t)}})
	for _, c := range []struct {
		method, path, auth string
		code               int
	}{
		{"POST", "/schematics", "", 201},
		{"GET", "/versions", "", 401},
		{"GET", "/schematics/" + f.id, "", 401},
		{"GET", "/oci/cosign/signing-key.pub", "", 401},
		{"GET", "/versions", "Bearer " + ciToken, 200},
		{"GET", "/readyz", "", 200}, // open
	} {
		if resp, body := f.do(t, c.method, c.path, c.auth); resp.StatusCode != c.code {
			t.Errorf("%s %s: %d %q, want %d", c.method, c.path, resp.StatusCode, body, c.code)
		}
	}
	for _, path := range []string{"/v2/", "/v2/installer/" + f.id + "/manifests/1.0"} {
		resp, body := f.do(t, "GET", path, "")
		var e struct {
			Errors []struct{ Code, Message string }
		}
		json.Unmarshal([]byte(body), &e)
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Basic realm="nodeforge-factory"` ||
			resp.Header.Get("Docker-Distribution-API-Version") != "registry/2.0" || len(e.Errors) != 1 || e.Errors[0].Code != "UNAUTHORIZED" || e.Errors[0].Message != "pulling images needs a login" {
			t.Errorf("GET %s: %d %v %q", path, resp.StatusCode, resp.Header, body)
		}
	}
	// 429 and 503 as a registry says them.
	for _, rf := range []*refusal{{status: 429, retryAfter: 1500 * time.Millisecond, msg: "slow down"}, {status: 503, retryAfter: busyRetry, msg: "busy"}} {
		rec := httptest.NewRecorder()
		f.refused(rec, httptest.NewRequest("GET", "/v2/installer/x/manifests/1.0", nil), fmt.Errorf("wrapped: %w", rf))
		want := map[int]string{429: `{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}`, 503: `{"errors":[{"code":"UNAVAILABLE","message":"busy"}]}`}[rf.status]
		if rec.Code != rf.status || strings.TrimSpace(rec.Body.String()) != want || rec.Header().Get("Retry-After") != map[int]string{429: "2", 503: "10"}[rf.status] {
			t.Errorf("%d under /v2/: %d %v %s", rf.status, rec.Code, rec.Header(), rec.Body)
		}
	}
	if f.refused(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), io.EOF) {
		t.Error("refused answered an error that is no refusal")
	}
}

func TestAccessOptions(t *testing.T) {
	creds := testCredentials(t)
	for _, c := range []struct {
		a    Access
		says string
	}{
		{Access{Login: []string{"build", "upload"}, Credentials: creds}, `no surface "upload"`},
		{Access{Login: []string{"build"}}, "no credentials"},
		{Access{BuildRate: -1}, "negative"},
	} {
		if _, err := newGate(c.a); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%+v: %v, want %q", c.a, err, c.says)
		}
	}
}

// TestBuildRate: a client's builds are bounded (429 with Retry-After);
// another client's, and what the cache has, are not.
func TestBuildRate(t *testing.T) {
	f := newAccessFactory(t, Options{Service: factory.Options{Signer: signingtest.Signer(t)}, Access: Access{BuildRate: 1, BuildBurst: 2, Credentials: testCredentials(t)}})
	base := "/image/" + f.id + "/1.0/"
	for i, c := range []struct {
		artifact, auth string
		code           int
	}{
		{"kernel-amd64", "", 200},
		{"initramfs-amd64.xz", "", 200},
		{"cmdline-metal-amd64", "", 429},
		{"kernel-amd64", "", 200}, // cached
		{"cmdline-metal-amd64", "Bearer " + ciToken, 200},
		{"cmdline-metal-amd64", "", 200}, // cached now
	} {
		resp, body := f.do(t, "GET", base+c.artifact, c.auth)
		if resp.StatusCode != c.code {
			t.Errorf("%d %s: %d %q, want %d", i, c.artifact, resp.StatusCode, body, c.code)
		}
		if c.code == 429 {
			if s, _ := strconv.Atoi(resp.Header.Get("Retry-After")); s < 25 || s > 60 || !strings.Contains(body, "127.0.0.1 asked for too many builds (at most 1 a minute, 2 at once)") {
				t.Errorf("429: Retry-After %q, %q", resp.Header.Get("Retry-After"), body)
			}
		}
	}
	if st := f.svc.Stats(); st.Builds != 3 {
		t.Errorf("%d builds, want 3", st.Builds)
	}
}

// TestLimitersBounded: the buckets kept are bounded; full ones go first.
func TestLimitersBounded(t *testing.T) {
	l := &limiters{rate: 1, burst: 1, per: 60, by: map[string]*clientLimit{}}
	now := time.Now()
	for i := range maxClients {
		l.take(fmt.Sprint("old", i), now.Add(-time.Hour))
	}
	if err := l.take("old0", now.Add(-time.Hour)); err == nil {
		t.Error("a second build at once was let through")
	}
	l.take("new", now)
	if len(l.by) != 1 {
		t.Errorf("%d buckets after an eviction, want 1 (the refilled ones go)", len(l.by))
	}
	for i := range maxClients + 10 {
		l.take(fmt.Sprint("busy", i), now)
	}
	if len(l.by) > maxClients {
		t.Errorf("%d buckets kept, at most %d", len(l.by), maxClients)
	}
}

// blockingBuilds makes the factory's builds wait for release, each
// announcing itself on started.
func blockingBuilds(f *accessFactory) (started chan string, release chan struct{}) {
	started, release = make(chan string, 10), make(chan struct{})
	f.svc.BuildWith(func(_ context.Context, _ *factory.VerifiedRelease, _ *schematic.Schematic, a factory.Artifact, arch string) ([]byte, error) {
		started <- a.Name()
		<-release
		return []byte(a.FileName(arch)), nil
	})
	return started, release
}

// TestBuildQueue: with every build slot taken and the queue full, a
// request that needs a build gets 503 with Retry-After; the others get
// their artifacts when the builds end.
func TestBuildQueue(t *testing.T) {
	f := newAccessFactory(t, Options{Service: factory.Options{MaxBuilds: 1, MaxQueue: 1}})
	started, release := blockingBuilds(f)
	base := "/image/" + f.id + "/1.0/"
	var wg sync.WaitGroup
	get := func(artifact string) {
		defer wg.Done()
		if resp, body := f.do(t, "GET", base+artifact, ""); resp.StatusCode != 200 || body != strings.Replace(artifact, "amd64", "x86_64", 1) {
			t.Errorf("%s: %d %q", artifact, resp.StatusCode, body)
		}
	}
	wg.Add(2)
	go get("kernel-amd64")
	<-started // the only slot
	go get("initramfs-amd64.xz")
	for f.svc.Waiting() == 0 {
		time.Sleep(time.Millisecond) // until initramfs waits in the queue
	}
	resp, body := f.do(t, "GET", base+"cmdline-metal-amd64", "")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "10" || !strings.Contains(body, "busy: 1 builds run and 1 wait") {
		t.Errorf("a third build: %d %v %q", resp.StatusCode, resp.Header, body)
	}
	close(release)
	wg.Wait()
	if st := f.svc.Stats(); st.Builds != 2 {
		t.Errorf("%d builds, want 2", st.Builds)
	}
	// No queue: a busy factory refuses at once.
	g := newAccessFactory(t, Options{Service: factory.Options{MaxBuilds: 1, MaxQueue: -1}})
	started, release = blockingBuilds(g)
	wg.Add(1)
	go func() {
		defer wg.Done()
		g.do(t, "GET", base+"kernel-amd64", "")
	}()
	<-started
	if resp, _ := g.do(t, "GET", base+"initramfs-amd64.xz", ""); resp.StatusCode != 503 {
		t.Errorf("without a queue: %d", resp.StatusCode)
	}
	close(release)
	wg.Wait()
}

// TestBuildDetached: a client that hangs up does not cancel the build it
// started; the next request gets its bytes.
func TestBuildDetached(t *testing.T) {
	f := newAccessFactory(t, Options{Service: factory.Options{Signer: signingtest.Signer(t)}})
	started, release := blockingBuilds(f)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", f.url+"/image/"+f.id+"/1.0/kernel-amd64", nil)
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-started
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the request was answered before the build ended")
	}
	close(release)
	for f.svc.Stats().Builds == 0 {
		time.Sleep(time.Millisecond) // until the build ends
	}
	if resp, body := f.do(t, "GET", "/image/"+f.id+"/1.0/kernel-amd64", ""); resp.StatusCode != 200 || body != "kernel-x86_64" {
		t.Errorf("after the hang-up: %d %q", resp.StatusCode, body)
	}
	if st := f.svc.Stats(); st.Builds != 1 {
		t.Errorf("stats %+v, want one build", st)
	}
}

// TestRefusalIsPerClient: a build refused to one client (no login) is
// not refused to a client with a login waiting for the same artifact.
func TestRefusalIsPerClient(t *testing.T) {
	f := newAccessFactory(t, Options{Access: Access{Login: []string{"build"}, Credentials: testCredentials(t)}})
	rel, sch := f.svc.Release("1.0"), schematicOf(t, f)
	a, _ := factory.ParseArtifact("kernel-amd64")
	anonymous := context.WithValue(context.Background(), principalKey{}, principal{addr: "192.0.2.1"})
	alice := context.WithValue(context.Background(), principalKey{}, principal{user: "alice"})
	if _, err := f.svc.Compose(anonymous, rel, sch, a, "x86_64"); err == nil || !strings.Contains(err.Error(), "needs a login") {
		t.Errorf("anonymous: %v", err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := anonymous
			if i%2 == 1 {
				ctx = alice
			}
			art, err := f.svc.Compose(ctx, rel, sch, a, "x86_64")
			var data []byte
			if err == nil {
				data, _ = art.Bytes(context.Background())
			}
			if ctx == alice && (err != nil || string(data) != "kernel-x86_64") {
				t.Errorf("alice: %q %v", data, err)
			}
		}()
	}
	wg.Wait()
}

func schematicOf(t *testing.T, f *accessFactory) *schematic.Schematic {
	t.Helper()
	sch, err := f.svc.Schematic(context.Background(), f.id)
	if err != nil {
		t.Fatal(err)
	}
	return sch
}
