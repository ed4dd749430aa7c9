package server

import (
	"fmt"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/nodeforge/builder/api/target"
)

// What upstream's factory says in HTTP beyond its routes' bodies: the
// Server header, CORS, content types and download names.

// serverName names the factory in every answer's Server header, as
// upstream's names itself ("Image Factory v0.8.0").
const serverName = "Nodeforge Image Factory"

// corsOrigins are upstream's default allowed origins: any.
var corsOrigins = []string{"*"}

// checkOrigins refuses an allowed origin that no Origin header can be:
// "*", or scheme://host[:port] with at most one "*" in it.
func checkOrigins(origins []string) error {
	for _, o := range origins {
		if o == "*" {
			continue
		}
		scheme, host, ok := strings.Cut(o, "://")
		if !ok || scheme == "" || host == "" || strings.ContainsAny(o, " \t\r\n") || strings.Contains(host, "/") || strings.Count(o, "*") > 1 {
			return fmt.Errorf("allowed origin %q: want * or SCHEME://HOST[:PORT] (one * may stand for any part)", o)
		}
	}
	return nil
}

// corsHeadersAllowed are the request headers a preflight may announce
// (upstream's list).
var corsHeadersAllowed = []string{"cache-control"}

// corsExposed are the response headers a page may read.
const corsExposed = "Content-Disposition, Content-Length, Content-Type"

// cors answers CORS as upstream's factory does (rs/cors with GET, HEAD and
// OPTIONS, Cache-Control, and the download headers exposed): a preflight
// is answered 204 here, before any login is asked (a browser sends none
// with it); other requests get the headers and go on.
func (s *Server) cors(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		origin := r.Header.Get("Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			hdr.Add("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers")
			method := r.Header.Get("Access-Control-Request-Method")
			reqHeaders, announced := r.Header["Access-Control-Request-Headers"]
			if origin != "" && s.originAllowed(origin) && corsMethod(method) && (!announced || corsHeadersOK(reqHeaders)) {
				hdr.Set("Access-Control-Allow-Origin", s.allowOrigin(origin))
				hdr.Set("Access-Control-Allow-Methods", method)
				if announced && reqHeaders[0] != "" {
					hdr["Access-Control-Allow-Headers"] = reqHeaders
				}
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if r.Method != http.MethodOptions {
			hdr.Add("Vary", "Origin")
			if origin != "" && s.originAllowed(origin) && corsMethod(r.Method) {
				hdr.Set("Access-Control-Allow-Origin", s.allowOrigin(origin))
				hdr.Set("Access-Control-Expose-Headers", corsExposed)
			}
		}
		h.ServeHTTP(w, r)
	})
}

// corsMethod: upstream allows GET and HEAD across origins (and OPTIONS),
// not POST.
func corsMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// corsHeadersOK says whether every header a preflight announces is
// allowed.
func corsHeadersOK(lists []string) bool {
	for _, l := range lists {
		for _, name := range strings.Split(l, ",") {
			name = strings.ToLower(strings.TrimSpace(name))
			if name != "" && !slices.Contains(corsHeadersAllowed, name) {
				return false
			}
		}
	}
	return true
}

func (s *Server) origins() []string {
	if s.front.AllowedOrigins == nil {
		return corsOrigins
	}
	return s.front.AllowedOrigins
}

// originAllowed matches an Origin header against the allowed origins,
// ignoring case; one "*" in an origin stands for any run of characters.
func (s *Server) originAllowed(origin string) bool {
	origin = strings.ToLower(origin)
	for _, o := range s.origins() {
		o = strings.ToLower(o)
		if o == "*" || o == origin {
			return true
		}
		if pre, post, ok := strings.Cut(o, "*"); ok && len(origin) >= len(pre)+len(post) && strings.HasPrefix(origin, pre) && strings.HasSuffix(origin, post) {
			return true
		}
	}
	return false
}

// allowOrigin is what Access-Control-Allow-Origin says: "*" when any
// origin is allowed, else the origin itself.
func (s *Server) allowOrigin(origin string) string {
	if slices.Contains(s.origins(), "*") {
		return "*"
	}
	return origin
}

// contentType is an artifact's media type by its name's last extension:
// upstream's table, and for what upstream leaves to the host's MIME
// database the types a desktop Linux host gives (tar, ova, zst) or none
// (raw and vhd, which the host's database mistypes as a camera raw and
// VHDL source): a fixed table, so every factory answers alike.
func contentType(name string) string {
	switch strings.TrimPrefix(path.Ext(name), ".") {
	case "efi":
		return "application/efi"
	case "iso":
		return "application/x-iso9660-image"
	case "xz":
		return "application/x-xz"
	case "gz":
		return "application/gzip"
	case "qcow2":
		return "application/x-qemu-disk"
	case "tar":
		return "application/x-tar"
	case "ova":
		return "application/ovf"
	case "zst":
		return "application/zstd"
	}
	return "application/octet-stream"
}

// contentDisposition names a download: the artifact's name, or the one
// ?filename= asks for (as upstream); a name that cannot stand in quotes
// as it is gets RFC 6266's encoding rather than breaking the header.
func contentDisposition(name string) string {
	plain := true
	for _, c := range name {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			plain = false
		}
	}
	if plain {
		return `attachment; filename="` + name + `"`
	}
	if v := mime.FormatMediaType("attachment", map[string]string{"filename": name}); v != "" {
		return v
	}
	return "attachment"
}

// archAsked reads an architecture a URL names as upstream does: amd64 or
// arm64, their RPM names, and iPXE's i386 for amd64 (iPXE names its build
// that on 32-bit firmware). ok is false for anything else.
func archAsked(a string) (goArch string, ok bool) {
	if a == "i386" {
		a = "amd64"
	}
	t, err := target.Lookup(a)
	if err != nil {
		return "", false
	}
	return t.OCI, true
}
