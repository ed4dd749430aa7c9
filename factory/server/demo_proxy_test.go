package server

import (
	"log/slog"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
)

// TestFactoryBehindProxy: two replicas on one cache, trusting
// 127.0.0.1 as their proxy (--trusted-proxies), behind one round-robin
// reverse proxy on loopback (Go's httputil, appending X-Forwarded-For as
// nginx and HAProxy do). Two clients behind the proxy get a build-rate
// bucket each on each replica, and a client that reaches a replica
// directly with a forged header is its own address, in the buckets and in
// the logs.
func TestFactoryBehindProxy(t *testing.T) {
	f := newDemoFactory(t)
	logs := &testutil.Log{}
	limits := func(o *Options) {
		o.TrustedProxies = []string{"127.0.0.1"}
		o.Access.BuildRate, o.Access.BuildBurst = 1, 1
		o.Service.Log = slog.New(slog.NewTextHandler(logs, nil))
	}
	_, c := f.serve(t, limits)
	_, e := f.serve(t, limits)
	var next atomic.Int64
	upstreams := []*url.URL{mustURL(t, c.URL), mustURL(t, e.URL)}
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(upstreams[next.Add(1)%2])
		r.SetXForwarded()
	}})
	t.Cleanup(proxy.Close)

	// A schematic of its own: every artifact below is a new build.
	id := f.postSchematic(t, "customization:\n  extraKernelArgs: [nodeforge.test=proxy]\n")
	base := "/image/" + id + "/1.11.0-demo/"
	for i, s := range []struct {
		from, via, artifact, forged string
		code                        int
	}{
		{"127.0.0.2", proxy.URL, "kernel-amd64", "", 200},           // one replica's bucket
		{"127.0.0.2", proxy.URL, "initramfs-amd64.xz", "", 200},     // the other's
		{"127.0.0.2", proxy.URL, "cmdline-metal-amd64", "", 429},    // both empty
		{"127.0.0.3", proxy.URL, "cmdline-metal-amd64", "", 200},    // another client behind the proxy
		{"127.0.0.2", c.URL, "metal-amd64.qcow2", "127.0.0.9", 429}, // forged, not from the proxy
		{"127.0.0.4", c.URL, "metal-amd64.qcow2", "127.0.0.2", 200}, // forged again: its own bucket
	} {
		code, got := testutil.GetFrom(t, s.from, s.via+base+s.artifact, s.forged)
		if code != s.code {
			t.Errorf("%d: %s through %s: %d %q, want %d", i, s.from, s.via, code, got, s.code)
		}
		if code == 429 && !strings.Contains(got, s.from+" asked for too many builds") {
			t.Errorf("%d: the refusal names another client: %q", i, got)
		}
	}
	for _, want := range []string{"user=127.0.0.2 ", "user=127.0.0.3 ", "user=127.0.0.4 ", "via=127.0.0.1"} {
		if !logs.Await(want) {
			t.Errorf("the replicas' logs lack %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs.String(), "127.0.0.9") {
		t.Errorf("a forged address reached the logs:\n%s", logs)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
