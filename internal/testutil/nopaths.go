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
	for _, d := range append(dirs, filepath.Dir(t.TempDir())) {
		if d != "" && d != "/" && d != os.TempDir() && strings.Contains(text, d) {
			i := strings.Index(text, d)
			t.Errorf("%s: the response shows a local path: %q", what, text[max(0, i-60):min(len(text), i+len(d)+20)])
		}
	}
}

// NoLocalPaths wraps a server's handler so that the test fails when any
// response (status line aside: its headers and its body) carries the
// test's temporary directory, or any of dirs: a server must not tell its
// clients where its files are.
func NoLocalPaths(t testing.TB, h http.Handler, dirs ...string) http.Handler {
	t.Helper()
	dirs = append(dirs, filepath.Dir(t.TempDir()))
	var needles [][]byte
	for _, d := range dirs {
		if d != "" && d != "/" && d != os.TempDir() {
			needles = append(needles, []byte(d))
		}
	}
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

func (p *pathWatch) check(b []byte) {
	for _, n := range p.needles {
		if bytes.Contains(b, n) {
			i := bytes.Index(b, n)
			ctx := b[max(0, i-60):min(len(b), i+len(n)+20)]
			p.t.Errorf("%s: the response shows a local path: %q", p.what, strings.ToValidUTF8(string(ctx), "?"))
		}
	}
}

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
