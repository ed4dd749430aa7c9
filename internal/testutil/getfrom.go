package testutil

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
)

// GetFrom GETs rawURL from the loopback address from (127.0.0.2, say: a
// client of its own), with a forged X-Forwarded-For when one is given, and
// returns the status and body. An address the machine cannot bind is
// Missing.
func GetFrom(t testing.TB, from, rawURL, forged string) (int, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	if c, err := d.Dial("tcp", u.Host); err != nil {
		Missing(t, "the loopback address "+from+" ("+err.Error()+")")
	} else {
		c.Close()
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}}
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest("GET", rawURL, nil)
	if forged != "" {
		req.Header.Set("X-Forwarded-For", forged)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
