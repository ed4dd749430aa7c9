package testutil

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// CheckNoLocalPaths fails the test when a response a client received
// (what: the request; text: its headers and body) carries the test's
// temporary directory or any of dirs: the client-side form of
// NoLocalPaths, for servers run as other processes.
func CheckNoLocalPaths(t testing.TB, what, text string, dirs ...string) {
	t.Helper()
	reportPaths(t, what, []byte(text), localPaths(t, dirs))
}

// localPaths are the directories a response must not show: dirs and the
// test's temporary directory.
func localPaths(t testing.TB, dirs []string) [][]byte {
	var out [][]byte
	for _, d := range append(dirs, filepath.Dir(t.TempDir())) {
		if d != "" && d != "/" && d != os.TempDir() {
			out = append(out, []byte(d))
		}
	}
	return out
}

// reportPaths fails the test for each of paths that b holds.
func reportPaths(t testing.TB, what string, b []byte, paths [][]byte) {
	t.Helper()
	for _, n := range paths {
		if i := bytes.Index(b, n); i >= 0 {
			ctx := b[max(0, i-60):min(len(b), i+len(n)+20)]
			t.Errorf("%s: the response shows a local path: %q", what, strings.ToValidUTF8(string(ctx), "?"))
		}
	}
}

// NoLocalPaths wraps a server's handler so that the test fails when any
// response (status line aside: its headers and its body) carries the
// test's temporary directory, or any of dirs: a server must not tell its
// clients where its files are.
func NoLocalPaths(t testing.TB, h http.Handler, dirs ...string) http.Handler {
	t.Helper()
	needles := localPaths(t, dirs)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pw := &pathWatch{ResponseWriter: w, t: t, needles: needles, what: r.Method + " " + r.URL.Path}
		h.ServeHTTP(pw, r)
		pw.headers()
	})
}

// pathWatch looks for needles in what a handler writes, across the
// boundaries of its writes.
type pathWatch struct {
	http.ResponseWriter
	t       testing.TB
	needles [][]byte
	what    string
	once    sync.Once
	tail    []byte
}

func (p *pathWatch) headers() {
	p.once.Do(func() {
		for k, vs := range p.ResponseWriter.Header() {
			for _, v := range vs {
				p.check([]byte(k + ": " + v))
			}
		}
	})
}

func (p *pathWatch) check(b []byte) { reportPaths(p.t, p.what, b, p.needles) }

func (p *pathWatch) WriteHeader(code int) {
	p.headers()
	p.ResponseWriter.WriteHeader(code)
}

func (p *pathWatch) Write(b []byte) (int, error) {
	p.headers()
	// Only what could hold a path is kept between writes.
	window := append(p.tail, b...)
	p.check(window)
	keep := 256
	if len(window) > keep {
		window = window[len(window)-keep:]
	}
	p.tail = append(p.tail[:0], window...)
	return p.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (p *pathWatch) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// Flush passes a flush on.
func (p *pathWatch) Flush() {
	if f, ok := p.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
