package server

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// trustedProxies are the peers whose forwarding headers (X-Forwarded-For,
// Forwarded) say who the client is; nil believes no header.
type trustedProxies []netip.Prefix

// parseTrustedProxies reads CIDR ranges and single addresses (a /32 or
// /128).
func parseTrustedProxies(list []string) (trustedProxies, error) {
	var tp trustedProxies
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			tp = append(tp, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("trusted proxy %q: want an address range (CIDR, 10.0.0.0/8 or fd00::/8) or one address", s)
		}
		a = a.Unmap()
		tp = append(tp, netip.PrefixFrom(a, a.BitLen()))
	}
	return tp, nil
}

// trusts says whether a is one of the proxies.
func (tp trustedProxies) trusts(a netip.Addr) bool {
	for _, p := range tp {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// client is the address of r's client, and the peer that forwarded it
// ("" when the client is the peer). A peer that is not a trusted proxy
// is the client, whatever its headers say. From a trusted one, the
// forwarding chain is read from its right end, the hop the trusted peer
// appended, leftwards while the hops are trusted proxies: the first
// that is not is the client (what hops further left say is the
// client's own word). X-Forwarded-For is read, or Forwarded when a
// request has none. A hop that is not an address (malformed, unknown,
// an obfuscated name) ends the walk: the last trusted hop is the
// client, so a damaged header keys no bucket of its own choosing.
func (tp trustedProxies) client(r *http.Request) (client, via string) {
	peer := remoteHost(r.RemoteAddr)
	pa, err := netip.ParseAddr(peer)
	if err != nil || len(tp) == 0 || !tp.trusts(pa.Unmap()) {
		return peer, ""
	}
	hops, ok := forwardedFor(r.Header)
	if !ok {
		return peer, ""
	}
	client = pa.Unmap().String()
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := hopAddr(hops[i])
		if !ok {
			break
		}
		client = a.String()
		if !tp.trusts(a) {
			break
		}
	}
	if client == pa.Unmap().String() {
		return peer, ""
	}
	return client, peer
}

// remoteHost is RemoteAddr's host (RemoteAddr itself when it has no
// port).
func remoteHost(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// forwardedFor is the chain of client addresses a request's headers
// carry, leftmost the first client: X-Forwarded-For's entries, or the
// for= of Forwarded's elements when there is no X-Forwarded-For (an
// element without one is an empty hop). Several header lines make one
// list, in order.
func forwardedFor(h http.Header) ([]string, bool) {
	if xff := h.Values("X-Forwarded-For"); len(xff) > 0 {
		var hops []string
		for _, line := range xff {
			for hop := range strings.SplitSeq(line, ",") {
				hops = append(hops, strings.TrimSpace(hop))
			}
		}
		return hops, true
	}
	fwd := h.Values("Forwarded")
	if len(fwd) == 0 {
		return nil, false
	}
	var hops []string
	for _, line := range fwd {
		for _, elem := range splitQuoted(line, ',') {
			hop := ""
			for _, pair := range splitQuoted(elem, ';') {
				k, v, _ := strings.Cut(strings.TrimSpace(pair), "=")
				if strings.EqualFold(strings.TrimSpace(k), "for") {
					hop = strings.Trim(strings.TrimSpace(v), `"`)
				}
			}
			hops = append(hops, hop)
		}
	}
	return hops, true
}

// splitQuoted splits s at sep outside double quotes.
func splitQuoted(s string, sep byte) []string {
	var parts []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == sep && !quoted:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// hopAddr reads one hop: an address, with a port or without (an IPv6
// address with one in brackets, as Forwarded writes it).
func hopAddr(hop string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(hop, "["), "]"))
	if err != nil {
		ap, perr := netip.ParseAddrPort(hop)
		if perr != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a.WithZone("").Unmap(), true
}
