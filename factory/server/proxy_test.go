package server

import (
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/nodeforge/builder/attest/signing/signingtest"
	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/testutil"
)

// TestTrustedProxiesClient: who the client is, for each peer and header.
func TestTrustedProxiesClient(t *testing.T) {
	tp, err := parseTrustedProxies([]string{"10.0.0.0/8", " 192.0.2.1", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, peer  string
		xff, fwd    []string
		client, via string
	}{
		{name: "no header", peer: "10.1.1.1:5000", client: "10.1.1.1"},
		{name: "untrusted peer spoofing", peer: "203.0.113.9:4000", xff: []string{"198.51.100.1"}, fwd: []string{"for=198.51.100.2"}, client: "203.0.113.9"},
		{name: "one trusted proxy", peer: "10.1.1.1:5000", xff: []string{"198.51.100.1"}, client: "198.51.100.1", via: "10.1.1.1"},
		{name: "a single trusted address", peer: "192.0.2.1:80", xff: []string{"198.51.100.1"}, client: "198.51.100.1", via: "192.0.2.1"},
		{name: "a neighbour of it is not", peer: "192.0.2.2:80", xff: []string{"198.51.100.1"}, client: "192.0.2.2"},
		{name: "the client's own header kept left", peer: "10.1.1.1:5000", xff: []string{"6.6.6.6, 198.51.100.1"}, client: "198.51.100.1", via: "10.1.1.1"},
		{name: "two trusted proxies", peer: "10.1.1.1:5000", xff: []string{"6.6.6.6, 198.51.100.1, 10.2.2.2"}, client: "198.51.100.1", via: "10.1.1.1"},
		{name: "two header lines", peer: "10.1.1.1:5000", xff: []string{"6.6.6.6, 198.51.100.1", "10.2.2.2"}, client: "198.51.100.1", via: "10.1.1.1"},
		{name: "every hop trusted", peer: "10.1.1.1:5000", xff: []string{"10.3.3.3, 10.2.2.2"}, client: "10.3.3.3", via: "10.1.1.1"},
		{name: "a hop with a port", peer: "10.1.1.1:5000", xff: []string{"198.51.100.1:61000"}, client: "198.51.100.1", via: "10.1.1.1"},
		{name: "IPv6 through IPv6", peer: "[fd00::1]:5000", xff: []string{"2001:db8::7, fd00::2"}, client: "2001:db8::7", via: "fd00::1"},
		{name: "IPv6 in brackets with a port", peer: "[fd00::1]:5000", xff: []string{"[2001:db8::7]:443"}, client: "2001:db8::7", via: "fd00::1"},
		{name: "IPv4 mapped in IPv6", peer: "[::ffff:10.1.1.1]:5000", xff: []string{"::ffff:198.51.100.1"}, client: "198.51.100.1", via: "::ffff:10.1.1.1"},
		{name: "untrusted IPv6 peer", peer: "[2001:db8::9]:5000", xff: []string{"2001:db8::7"}, client: "2001:db8::9"},
		{name: "malformed rightmost hop", peer: "10.1.1.1:5000", xff: []string{"198.51.100.1, not-an-address"}, client: "10.1.1.1"},
		{name: "malformed behind a trusted hop", peer: "10.1.1.1:5000", xff: []string{"garbage, 10.2.2.2"}, client: "10.2.2.2", via: "10.1.1.1"},
		{name: "malformed left of the client", peer: "10.1.1.1:5000", xff: []string{"garbage, 198.51.100.1"}, client: "198.51.100.1", via: "10.1.1.1"},
		{name: "empty header", peer: "10.1.1.1:5000", xff: []string{""}, client: "10.1.1.1"},
		{name: "a zone", peer: "[fd00::1]:5000", xff: []string{"fe80::1%eth0"}, client: "fe80::1", via: "fd00::1"},
		{name: "Forwarded", peer: "10.1.1.1:5000", fwd: []string{`for=198.51.100.1;proto=https;by=10.1.1.1`}, client: "198.51.100.1", via: "10.1.1.1"},
		{name: "Forwarded, IPv6 quoted with a port", peer: "10.1.1.1:5000", fwd: []string{`for="[2001:db8:cafe::17]:4711"`}, client: "2001:db8:cafe::17", via: "10.1.1.1"},
		{name: "Forwarded through two", peer: "10.1.1.1:5000", fwd: []string{`for=6.6.6.6, For="198.51.100.1";proto="a,b", for=10.2.2.2`}, client: "198.51.100.1", via: "10.1.1.1"},
		{name: "Forwarded unknown", peer: "10.1.1.1:5000", fwd: []string{`for=unknown`}, client: "10.1.1.1"},
		{name: "Forwarded obfuscated", peer: "10.1.1.1:5000", fwd: []string{`for=_hidden, for=10.2.2.2`}, client: "10.2.2.2", via: "10.1.1.1"},
		{name: "Forwarded without for", peer: "10.1.1.1:5000", fwd: []string{`proto=https`}, client: "10.1.1.1"},
		{name: "X-Forwarded-For first", peer: "10.1.1.1:5000", xff: []string{"198.51.100.1"}, fwd: []string{"for=6.6.6.6"}, client: "198.51.100.1", via: "10.1.1.1"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = c.peer
		for _, v := range c.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		for _, v := range c.fwd {
			r.Header.Add("Forwarded", v)
		}
		if client, via := tp.client(r); client != c.client || via != c.via {
			t.Errorf("%s: client %q via %q, want %q via %q", c.name, client, via, c.client, c.via)
		}
		if client, via := trustedProxies(nil).client(r); client != remoteHost(c.peer) || via != "" {
			t.Errorf("%s, no trusted proxies: client %q via %q, want the peer", c.name, client, via)
		}
	}
}

func TestTrustedProxiesParse(t *testing.T) {
	for _, bad := range []string{"10.0.0.0/33", "10.0.0", "proxy.example", "fe80::1%eth0", "10.0.0.0/8/8"} {
		if _, err := parseTrustedProxies([]string{bad}); err == nil || !strings.Contains(err.Error(), `trusted proxy "`+bad+`": want an address range (CIDR`) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	f := newAccessFactory(t, Options{})
	if _, err := newServer(Options{Service: factory.Options{Cache: f.o.Cache, Releases: f.o.Releases}, TrustedProxies: []string{"10.0.0.0/8", "lb"}}); err == nil || !strings.Contains(err.Error(), `trusted proxy "lb"`) {
		t.Errorf("newServer with a bad trusted proxy: %v", err)
	}
	tp, err := parseTrustedProxies([]string{"10.1.2.3/8", "::1", ""})
	if err != nil || len(tp) != 2 || tp[0].String() != "10.0.0.0/8" || tp[1].String() != "::1/128" {
		t.Errorf("%v %v", tp, err)
	}
}

// TestTrustedProxiesBuckets: anonymous clients behind a reverse proxy
// (Go's httputil, appending X-Forwarded-For as nginx and HAProxy do) on
// loopback, from addresses of their own, get a build-rate bucket each;
// a client reaching the factory directly with a forged header keeps its
// own address; a chain through two trusted proxies names its client.
func TestTrustedProxiesBuckets(t *testing.T) {
	f := newAccessFactory(t, Options{Service: factory.Options{Signer: signingtest.Signer(t)}, TrustedProxies: []string{"127.0.0.1"}, Access: Access{BuildRate: 1, BuildBurst: 1}})
	proxy := startProxy(t, f.url)
	outer := startProxy(t, proxy)
	base := "/image/" + f.id + "/1.0/"
	for i, c := range []struct {
		from, via, artifact, forged string
		code                        int
	}{
		{"127.0.0.2", proxy, "kernel-amd64", "", 200},
		{"127.0.0.2", proxy, "initramfs-amd64.xz", "", 429}, // its bucket is empty
		{"127.0.0.3", proxy, "initramfs-amd64.xz", "", 200}, // another client behind the proxy
		{"127.0.0.2", f.url, "cmdline-metal-amd64", "198.51.100.7", 429},
		{"127.0.0.4", outer, "cmdline-metal-amd64", "198.51.100.8", 200},
	} {
		code, body := testutil.GetFrom(t, c.from, c.via+base+c.artifact, c.forged)
		if code != c.code {
			t.Errorf("%d: %s through %s: %d %q, want %d", i, c.from, c.via, code, body, c.code)
		}
		if code == 429 && !strings.Contains(body, c.from+" asked for too many builds") {
			t.Errorf("%d: the refusal names another client: %q", i, body)
		}
	}
	logs := f.log.String()
	for _, want := range []string{"user=127.0.0.3 ", "address=127.0.0.4 via=127.0.0.1", "user=127.0.0.2 method=GET path=/image/" + f.id + "/1.0/cmdline-metal-amd64 status=429"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "198.51.100.") {
		t.Errorf("a forged address reached the log:\n%s", logs)
	}
}

// startProxy serves a reverse proxy to target on 127.0.0.1.
func startProxy(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(httputil.NewSingleHostReverseProxy(u))
	t.Cleanup(hs.Close)
	return hs.URL
}
