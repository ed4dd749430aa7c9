package httptimeout

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A server that accepts and never answers fails within the timeout, with
// an error naming the host, and is not retried by a library that retries
// temporary errors.
func TestSilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	start := time.Now()
	_, err = Client(300 * time.Millisecond).Get("http://" + ln.Addr().String() + "/v2/")
	took := time.Since(start)
	var s *StallError
	if !errors.As(err, &s) || !strings.Contains(err.Error(), ln.Addr().String()) || !strings.Contains(err.Error(), "an answer") {
		t.Fatalf("err = %v, want a StallError naming the host", err)
	}
	if took > 2*time.Second {
		t.Errorf("took %v", took)
	}
	var temp interface{ Temporary() bool }
	if errors.As(err, &temp) && temp.Temporary() {
		t.Error("a stall must not look temporary")
	}
}

func TestStalledBodyAndSlowProgress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f := w.(http.Flusher)
		switch r.URL.Path {
		case "/stall":
			w.Write([]byte("some"))
			f.Flush()
			<-r.Context().Done()
		case "/slow": // a byte every 50ms for a second: slow, never stalled
			for range 20 {
				w.Write([]byte("x"))
				f.Flush()
				time.Sleep(50 * time.Millisecond)
			}
		case "/upload":
			n, _ := io.Copy(io.Discard, r.Body)
			w.Write([]byte(strings.Repeat("y", int(n))))
		}
	}))
	defer srv.Close()
	c := Client(300 * time.Millisecond)
	resp, err := c.Get(srv.URL + "/stall")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	var s *StallError
	if !errors.As(err, &s) || s.While != "the response body" {
		t.Fatalf("stalled body: %v", err)
	}
	resp, err = c.Get(srv.URL + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(b) != 20 {
		t.Fatalf("slow body: %d bytes, %v", len(b), err)
	}
	// A slow upload that keeps moving is fine too.
	pr, pw := io.Pipe()
	go func() {
		for range 20 {
			pw.Write([]byte("z"))
			time.Sleep(50 * time.Millisecond)
		}
		pw.Close()
	}()
	resp, err = c.Post(srv.URL+"/upload", "application/octet-stream", pr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(b) != 20 {
		t.Fatalf("upload echoed %d bytes", len(b))
	}
}
