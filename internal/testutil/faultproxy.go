package testutil

import (
	"io"
	"math/rand"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// FaultProxy stands between a client and a registry on loopback and
// injects faults: 5xx answers, connections cut in the middle of a blob
// (uploads and downloads), and slow answers.
type FaultProxy struct {
	Host     string // 127.0.0.1:PORT to give the client
	upstream string

	mu   sync.Mutex
	rng  *rand.Rand
	rate float64 // chance of a fault per request
	// Counts of injected faults by kind: "5xx", "cut", "slow".
	Counts map[string]int
}

// StartFaultProxy proxies to upstream (HOST:PORT, plain HTTP), injecting a
// fault into a share rate of the requests, chosen by a seeded generator.
func StartFaultProxy(t testing.TB, upstream string, rate float64, seed int64) *FaultProxy {
	t.Helper()
	p := &FaultProxy{upstream: upstream, rng: rand.New(rand.NewSource(seed)), rate: rate, Counts: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.Host = ln.Addr().String()
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return p
}

// SetRate changes the share of faulty requests.
func (p *FaultProxy) SetRate(rate float64) {
	p.mu.Lock()
	p.rate = rate
	p.mu.Unlock()
}

// Total is the number of faults injected.
func (p *FaultProxy) Total() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.Counts {
		n += c
	}
	return n
}

func (p *FaultProxy) pick() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rng.Float64() >= p.rate {
		return ""
	}
	kind := []string{"5xx", "cut", "slow"}[p.rng.Intn(3)]
	p.Counts[kind]++
	return kind
}

func (p *FaultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fault := p.pick()
	switch fault {
	case "5xx":
		io.Copy(io.Discard, r.Body)
		code := []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}[len(r.URL.Path)%3]
		http.Error(w, "injected fault", code)
		return
	case "slow":
		time.Sleep(150 * time.Millisecond)
	case "cut":
		if r.ContentLength != 0 && r.Body != nil && (r.Method == http.MethodPatch || r.Method == http.MethodPut) {
			// Take part of the upload, then drop the connection.
			io.CopyN(io.Discard, r.Body, 512)
			panic(http.ErrAbortHandler)
		}
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+p.upstream+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.Host = r.Host // the registry builds upload URLs from it
	out.ContentLength = r.ContentLength
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if fault == "cut" && resp.ContentLength > 64 {
		// A download cut after half its bytes.
		io.CopyN(w, resp.Body, resp.ContentLength/2)
		panic(http.ErrAbortHandler)
	}
	io.Copy(w, resp.Body)
}
