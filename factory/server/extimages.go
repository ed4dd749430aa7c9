package server

import (
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/nodeforge/builder/factory"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/release"
)

// The registry front also serves each served release's extension images,
// extensions/NAME:VERSION, from the release store by the digests that
// verified, with the release's signatures: the pullable reference
// /version/V/extensions/official gives, whatever the release store is (a
// local layout has no reference a client could pull).

// repoExtensions is the front's repository prefix of extension images.
const repoExtensions = "extensions"

// extensionName is what an extension's name may be in a path.
var extensionName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// extensionRef is the reference a client pulls a release's extension by,
// pinned to its digest.
func (s *Server) extensionRef(requestHost string, rel *factory.VerifiedRelease, name string) string {
	return s.imgs.PublicHost(requestHost) + "/" + repoExtensions + "/" + name + ":" + rel.Version + "@" + rel.Digests[release.RepoExtension+name]
}

// serveExtension answers /v2/extensions/NAME/...: tags (the listed
// versions that have it, Talos's way), manifests by version (either
// spelling), digest or signature tag, blobs of its images.
func (s *Server) serveExtension(w http.ResponseWriter, r *http.Request, rr registryRequest) {
	var rels []*factory.VerifiedRelease // listed (served, not broken), as the installers' tags
	for _, rel := range s.rels.Listed() {
		if slices.Contains(rel.Extensions, rr.extension) {
			rels = append(rels, rel)
		}
	}
	name := repoExtensions + "/" + rr.extension
	if len(rels) == 0 {
		registryError(w, http.StatusNotFound, "NAME_UNKNOWN", "no served release has the extension %s", rr.extension)
		return
	}
	switch rr.op {
	case "tags":
		tags := []string{}
		for _, rel := range rels {
			tags = append(tags, factory.TalosVersion(rel.Version))
		}
		writeJSONAs(w, "application/json", map[string]any{"name": name, "tags": tags})
		return
	case "referrers":
		registryError(w, http.StatusNotFound, "UNSUPPORTED", "no referrers API: signatures are at the sha256-DIGEST.sig tags")
		return
	}
	h, _ := v1.NewHash(rr.ref)
	for _, rel := range rels {
		byVersion := factory.SameVersion(rr.ref, rel.Version) // either spelling
		if rr.op == "manifests" && !byVersion && !strings.HasPrefix(rr.ref, "sha256") {
			continue
		}
		e, err := s.imgs.ExtensionImage(r.Context(), rel, rr.extension)
		if err != nil {
			s.o.Log.Error("reading an extension image", "id", w.Header().Get("X-Request-Id"), "extension", rr.extension, "version", rel.Version, "err", err)
			registryError(w, http.StatusInternalServerError, "UNKNOWN", "reading %s:%s failed (request %s)", name, rel.Version, w.Header().Get("X-Request-Id"))
			return
		}
		switch {
		case rr.op == "manifests" && byVersion:
			s.writeManifest(w, r, e.Manifests[e.Digest])
			return
		case rr.op == "manifests":
			if m, ok := e.Manifests[rr.ref]; ok {
				s.writeManifest(w, r, m)
				return
			}
		case rr.op == "blobs":
			if _, ok := e.Blobs[h]; ok {
				s.sendBlob(w, r, e, h, func() {})
				return
			}
		}
	}
	if rr.op == "blobs" {
		registryError(w, http.StatusNotFound, "BLOB_UNKNOWN", "blob %s not found in %s", rr.ref, name)
		return
	}
	registryError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "manifest %s not found in %s", rr.ref, name)
}
