package repo

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func srcString(t *testing.T, src Source, rel string) (string, error) {
	t.Helper()
	rc, err := src.Open(context.Background(), rel)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

func TestLocalSource(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "repodata"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "repodata", "repomd.xml"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, loc := range []string{dir, "file://" + filepath.ToSlash(dir), "file://" + filepath.ToSlash(dir) + "/"} {
		src, err := NewSource(loc, SourceOptions{})
		if err != nil {
			t.Fatalf("NewSource(%q): %v", loc, err)
		}
		if want := "file://" + filepath.ToSlash(dir); src.URL() != want {
			t.Errorf("URL() = %q, want %q", src.URL(), want)
		}
		got, err := srcString(t, src, "repodata/repomd.xml")
		if err != nil || got != "hello" {
			t.Errorf("%s: Open = %q, %v", loc, got, err)
		}
		_, err = srcString(t, src, "repodata/missing.xml")
		if !errors.Is(err, ErrNotFound) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("missing file: err = %v, want ErrNotFound and fs.ErrNotExist", err)
		}
		if err != nil && !strings.Contains(err.Error(), src.URL()+"/repodata/missing.xml") {
			t.Errorf("missing file: error %q does not name the URL", err)
		}
		if _, err := srcString(t, src, "repodata"); err == nil {
			t.Error("opening a directory succeeded")
		}
	}
	if _, err := NewSource(filepath.Join(dir, "nope"), SourceOptions{}); err == nil {
		t.Error("NewSource of a missing directory succeeded")
	}
	if _, err := NewSource("ftp://example.org/repo", SourceOptions{}); err == nil {
		t.Error("NewSource accepted ftp://")
	}
}

func TestPathTraversal(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ok"), []byte("x"), 0o644)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("x"))
	}))
	defer srv.Close()
	local, err := NewSource(dir, SourceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := NewSource(srv.URL+"/repo", SourceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bad := []string{"../etc/passwd", "a/../../b", "a/..", "..", "/etc/passwd", `..\x`, `a\..\..\b`, "", ".", "a\x00b"}
	for _, src := range []Source{local, remote} {
		for _, rel := range bad {
			if _, err := srcString(t, src, rel); err == nil {
				t.Errorf("%s: Open(%q) succeeded", src.URL(), rel)
			}
		}
		if _, err := srcString(t, src, "./ok"); err != nil {
			t.Errorf("%s: Open(./ok): %v", src.URL(), err)
		}
	}
	if hits.Load() != 1 {
		t.Errorf("server saw %d requests, want 1 (bad paths must not be requested)", hits.Load())
	}
}

func TestHTTPSourceRetries(t *testing.T) {
	var calls atomic.Int32
	var gotUA, gotAE string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/repo/flaky":
			if calls.Add(1) <= 2 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			gotUA, gotAE = r.Header.Get("User-Agent"), r.Header.Get("Accept-Encoding")
			w.Write([]byte("payload"))
		case "/repo/a?b": // the server decodes %3F
			w.Write([]byte("escaped"))
		case "/repo/forbidden":
			calls.Add(1)
			http.Error(w, "no", http.StatusForbidden)
		case "/repo/down":
			calls.Add(1)
			http.Error(w, "down", http.StatusBadGateway)
		default:
			calls.Add(1)
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	opts := SourceOptions{Backoff: time.Millisecond, UserAgent: "test-agent"}
	src, err := NewSource(srv.URL+"/repo/", opts)
	if err != nil {
		t.Fatal(err)
	}
	if src.URL() != srv.URL+"/repo" {
		t.Errorf("URL() = %q", src.URL())
	}

	got, err := srcString(t, src, "flaky")
	if err != nil || got != "payload" {
		t.Fatalf("flaky: %q, %v", got, err)
	}
	if calls.Load() != 3 {
		t.Errorf("flaky: %d calls, want 3", calls.Load())
	}
	if gotUA != "test-agent" || gotAE != "identity" {
		t.Errorf("headers: User-Agent %q, Accept-Encoding %q", gotUA, gotAE)
	}

	if got, err := srcString(t, src, "a?b"); err != nil || got != "escaped" {
		t.Errorf("a?b: %q, %v", got, err)
	}

	calls.Store(0)
	_, err = srcString(t, src, "missing.xml")
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("404: err = %v, want ErrNotFound", err)
	}
	if err != nil && !strings.Contains(err.Error(), srv.URL+"/repo/missing.xml") {
		t.Errorf("404: error %q does not name the URL", err)
	}
	if calls.Load() != 1 {
		t.Errorf("404 retried: %d calls", calls.Load())
	}

	calls.Store(0)
	_, err = srcString(t, src, "forbidden")
	if err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "403") {
		t.Errorf("403: err = %v", err)
	}
	if calls.Load() != 1 {
		t.Errorf("403 retried: %d calls", calls.Load())
	}

	calls.Store(0)
	_, err = srcString(t, src, "down")
	if err == nil || !strings.Contains(err.Error(), "502") || !strings.Contains(err.Error(), srv.URL+"/repo/down") {
		t.Errorf("502: err = %v", err)
	}
	if calls.Load() != 5 {
		t.Errorf("502: %d calls, want 1+4 retries", calls.Load())
	}

	// Retries < 0: a single attempt.
	calls.Store(0)
	src1, _ := NewSource(srv.URL+"/repo", SourceOptions{Retries: -1, Backoff: time.Millisecond})
	if _, err := srcString(t, src1, "down"); err == nil || calls.Load() != 1 {
		t.Errorf("Retries -1: err %v, %d calls", err, calls.Load())
	}
}

func TestHTTPSourceNetworkErrorAndCancel(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close() // connection refused from now on
	src, err := NewSource(u, SourceOptions{Retries: 2, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = srcString(t, src, "x")
	if err == nil || !strings.Contains(err.Error(), u+"/x") || !strings.Contains(err.Error(), "3 attempts") {
		t.Errorf("refused: err = %v", err)
	}

	// A cancelled context stops the backoff wait.
	src, _ = NewSource(u, SourceOptions{Backoff: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = src.Open(ctx, "x")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 10*time.Second {
		t.Errorf("cancel: err = %v after %v", err, time.Since(start))
	}
}

func TestRetryAfter(t *testing.T) {
	if d := retryAfter("3"); d != 3*time.Second {
		t.Errorf("3 → %v", d)
	}
	if d := retryAfter("99999"); d != maxBackoff {
		t.Errorf("99999 → %v", d)
	}
	if d := retryAfter("junk"); d != 0 {
		t.Errorf("junk → %v", d)
	}
}
