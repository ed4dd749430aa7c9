package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/nodeforge/builder/factory"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/builder/compose"
)

// registryError is an OCI distribution error answer.
func registryError(w http.ResponseWriter, status int, code, format string, a ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": fmt.Sprintf(format, a...)}}})
}

// registryRequest is a parsed /v2/ path.
type registryRequest struct {
	kind      factory.InstallerKind // the repository: [PLATFORM-]installer[-secureboot]/ID
	id        string
	extension string // or extensions/NAME
	op, ref   string // manifests, blobs, tags or referrers; the tag or digest
}

// parseRegistryPath reads /v2/NAME/(manifests|blobs|referrers)/REF and
// /v2/NAME/tags/list strictly; ok is false for a repository that is not
// an installer of a schematic.
func parseRegistryPath(p string) (registryRequest, bool) {
	parts := strings.Split(strings.TrimPrefix(p, "/v2/"), "/")
	if len(parts) != 4 {
		return registryRequest{}, false
	}
	rr := registryRequest{id: parts[1], op: parts[2], ref: parts[3]}
	if rr.op == "tags" && rr.ref != "list" || !slices.Contains([]string{"manifests", "blobs", "tags", "referrers"}, rr.op) {
		return registryRequest{}, false
	}
	if parts[0] == repoExtensions {
		if !extensionName.MatchString(rr.id) || rr.ref == "" {
			return registryRequest{}, false
		}
		rr.extension, rr.id = rr.id, ""
		return rr, true
	}
	if len(rr.id) != 64 || strings.Trim(rr.id, "0123456789abcdef") != "" {
		return registryRequest{}, false
	}
	var ok bool
	rr.kind, ok = factory.ParseInstallerRepo(parts[0])
	return rr, ok
}

// serveRegistry answers the /v2/ front.
func (s *Server) serveRegistry(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		registryError(w, http.StatusMethodNotAllowed, "UNSUPPORTED", "this registry is read-only")
		return
	}
	if r.URL.Path == "/v2/" || r.URL.Path == "/v2" {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("{}"))
		return
	}
	rr, ok := parseRegistryPath(r.URL.Path)
	if !ok || rr.kind.Platform != "" && !s.knownPlatform(rr.kind.Platform) {
		registryError(w, http.StatusNotFound, "NAME_UNKNOWN", "no such repository: this registry serves installer/SCHEMATIC_ID and PLATFORM-installer/SCHEMATIC_ID (-secureboot after either for the Secure Boot installers), and extensions/NAME")
		return
	}
	if rr.extension != "" {
		s.serveExtension(w, r, rr)
		return
	}
	if rr.kind.SecureBoot && s.o.SecureBoot == nil {
		registryError(w, http.StatusNotFound, "NAME_UNKNOWN", "this factory has no Secure Boot key: no %s", rr.kind.Repo())
		return
	}
	sch, err := s.schems.Schematic(r.Context(), rr.id)
	switch {
	case errors.Is(err, factory.ErrUnknownSchematic):
		registryError(w, http.StatusNotFound, "NAME_UNKNOWN", "schematic %s not found", rr.id)
		return
	case err != nil:
		s.o.Log.Error("reading a schematic", "id", rr.id, "err", err)
		registryError(w, http.StatusInternalServerError, "UNKNOWN", "reading schematic %s failed", rr.id)
		return
	}
	switch rr.op {
	case "tags":
		writeTags(w, r, rr.kind.Repo()+"/"+rr.id, s.rels.VersionTags())
	case "referrers":
		registryError(w, http.StatusNotFound, "UNSUPPORTED", "no referrers API: signatures are at the sha256-DIGEST.sig tags")
	case "manifests":
		s.serveManifest(w, r, rr, sch)
	case "blobs":
		s.serveBlob(w, r, rr, sch)
	}
}

// knownPlatform says whether a platform is Talos's or one a listed
// release's spec adds.
func (s *Server) knownPlatform(pl string) bool {
	if _, err := platform.Lookup(pl); err == nil {
		return true
	}
	return slices.ContainsFunc(s.rels.Listed(), func(rel *factory.VerifiedRelease) bool {
		_, err := rel.PlatformTable().Lookup(pl)
		return err == nil
	})
}

// writeTags answers tags/list as the distribution spec says: in lexical
// order, after ?last= and at most ?n= of them, a Link to the next page
// when cut short.
func writeTags(w http.ResponseWriter, r *http.Request, name string, tags []string) {
	tags = slices.Sorted(slices.Values(tags))
	if last := r.URL.Query().Get("last"); last != "" {
		tags = slices.DeleteFunc(tags, func(t string) bool { return t <= last })
	}
	if n, err := strconv.Atoi(r.URL.Query().Get("n")); err == nil && n >= 0 && n < len(tags) {
		tags = tags[:n]
		if n > 0 {
			w.Header().Set("Link", fmt.Sprintf(`</v2/%s/tags/list?n=%d&last=%s>; rel="next"`, name, n, url.QueryEscape(tags[n-1])))
		}
	}
	writeJSONAs(w, "application/json", map[string]any{"name": name, "tags": tags})
}

func writeJSONAs(w http.ResponseWriter, mediaType string, v any) {
	w.Header().Set("Content-Type", mediaType)
	json.NewEncoder(w).Encode(v)
}

// serveManifest answers a manifest by version (either spelling, or
// latest: built on demand), by digest, or by cosign's signature tag, of an
// image of the repository.
func (s *Server) serveManifest(w http.ResponseWriter, r *http.Request, rr registryRequest, sch *schematic.Schematic) {
	var e *factory.ImageEntry
	rel := s.rels.Available(rr.ref)
	if rr.ref == "latest" {
		if rel = s.rels.Latest(); rel == nil {
			registryError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "latest: no stable version is served (see tags/list)")
			return
		}
	}
	if rel != nil {
		if _, err := rel.PlatformTable().Lookup(rr.kind.Platform); err != nil {
			registryError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "release %s has no platform %s", factory.TalosVersion(rel.Version), rr.kind.Platform)
			return
		}
		if err := factory.Unhonoured(rel, sch, compose.Output{Kind: "installer", SecureBoot: rr.kind.SecureBoot}, rr.ref); err != nil {
			registryError(w, http.StatusBadRequest, "MANIFEST_INVALID", "%v", err)
			return
		}
		var err error
		if e, err = s.imgs.Installer(r.Context(), rel, sch, rr.kind, r.Host); s.refused(w, r, err) {
			return
		} else if err != nil {
			s.o.Log.Error("making an installer", "id", w.Header().Get("X-Request-Id"), "schematic", rr.id, "version", rel.Version, "err", err)
			registryError(w, http.StatusInternalServerError, "UNKNOWN", "making %s/%s:%s failed (request %s: the factory's log says why)", rr.kind.Repo(), rr.id, factory.TalosVersion(rel.Version), w.Header().Get("X-Request-Id"))
			return
		}
		s.writeManifest(w, r, e.Manifests[e.Digest])
		return
	}
	if _, err := v1.NewHash(rr.ref); err != nil && !factory.IsSigTag(rr.ref) {
		registryError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "%q is neither a served version (see tags/list) nor a digest", rr.ref)
		return
	}
	if e := s.imgs.CachedEntry(r.Context(), sch, rr.kind, func(e *factory.ImageEntry) bool { _, ok := e.Manifests[rr.ref]; return ok }); e != nil {
		s.writeManifest(w, r, e.Manifests[rr.ref])
		return
	}
	registryError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "manifest %s not found in %s", rr.ref, rr.kind.Repo()+"/"+rr.id)
}

func (s *Server) writeManifest(w http.ResponseWriter, r *http.Request, m factory.RawManifest) {
	w.Header().Set("Content-Type", string(m.MediaType))
	w.Header().Set("Docker-Content-Digest", m.Digest.String())
	w.Header().Set("Content-Length", strconv.Itoa(len(m.Raw)))
	w.Header().Set("ETag", `"`+m.Digest.String()+`"`)
	if r.Method == http.MethodHead {
		return
	}
	w.Write(m.Raw)
}

// serveBlob streams a blob of an image of the repository; a blob whose
// bytes do not match its digest breaks the response (the client's own
// check fails) and the entry is checked again on its next use.
func (s *Server) serveBlob(w http.ResponseWriter, r *http.Request, rr registryRequest, sch *schematic.Schematic) {
	h, err := v1.NewHash(rr.ref)
	if err != nil {
		registryError(w, http.StatusBadRequest, "DIGEST_INVALID", "%q is not a digest", rr.ref)
		return
	}
	e := s.imgs.CachedEntry(r.Context(), sch, rr.kind, func(e *factory.ImageEntry) bool { _, ok := e.Blobs[h]; return ok })
	if e == nil {
		registryError(w, http.StatusNotFound, "BLOB_UNKNOWN", "blob %s not found in %s", h, rr.kind.Repo()+"/"+rr.id)
		return
	}
	s.sendBlob(w, r, e, h, func() { s.imgs.ForgetInstaller(e.Key) })
}

// sendBlob streams a blob of e, verified as it streams: a damaged blob's
// end never leaves, the transfer is cut after failed is called (to check
// the entry again).
func (s *Server) sendBlob(w http.ResponseWriter, r *http.Request, e *factory.ImageEntry, h v1.Hash, failed func()) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Docker-Content-Digest", h.String())
	b := e.Blobs[h]
	w.Header().Set("Content-Length", strconv.FormatInt(b.Size, 10))
	w.Header().Set("ETag", `"`+h.String()+`"`)
	if r.Method == http.MethodHead {
		return
	}
	rc, err := b.Open(r.Context())
	if err == nil {
		_, err = io.Copy(w, factory.Verified(rc, v1.Descriptor{Digest: h, Size: b.Size}))
		rc.Close()
	}
	if err == nil {
		return
	}
	s.o.Log.Warn("serving a blob failed: the transfer is cut", "id", w.Header().Get("X-Request-Id"), "repository", e.Repo, "digest", h.String(), "err", err)
	if errors.Is(err, factory.ErrDamaged) {
		s.arts.CountDamaged()
	}
	failed()
	panic(http.ErrAbortHandler)
}
