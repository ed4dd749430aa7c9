package factory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/api/platform"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/build/compose"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/oci"
)

// RepoInstallers is the cache store's repository of built installer
// images, each index tagged with its cache key and signed by the factory.
const RepoInstallers = "installers"

// The registry front (/v2/) serves a schematic's installer images,
// installer/ID:VERSION and PLATFORM-installer/ID:VERSION, built on demand
// as multi-arch indexes and kept in the cache store, read-only: it is the
// registry for these images, so no other is needed. Manifests and blobs
// are served only when they belong to an image of the repository asked
// for; each cached index is checked (its signature, every blob's digest)
// before it is first served.

// registryError is an OCI distribution error answer.
func registryError(w http.ResponseWriter, status int, code, format string, a ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": fmt.Sprintf(format, a...)}}})
}

// registryRequest is a parsed /v2/ path.
type registryRequest struct {
	kind      installerKind // the repository: [PLATFORM-]installer[-secureboot]/ID
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
	rr.kind, ok = parseInstallerRepo(parts[0])
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
	if !ok || rr.kind.platform != "" && !s.knownPlatform(rr.kind.platform) {
		registryError(w, http.StatusNotFound, "NAME_UNKNOWN", "no such repository: this registry serves installer/SCHEMATIC_ID and PLATFORM-installer/SCHEMATIC_ID (-secureboot after either for the Secure Boot installers), and extensions/NAME")
		return
	}
	if rr.extension != "" {
		s.serveExtension(w, r, rr)
		return
	}
	if rr.kind.secureBoot && s.o.SecureBoot == nil {
		registryError(w, http.StatusNotFound, "NAME_UNKNOWN", "this factory has no Secure Boot key: no %s", rr.kind.repo())
		return
	}
	sch, err := s.schematics.get(r.Context(), rr.id)
	switch {
	case errors.Is(err, errUnknownSchematic):
		registryError(w, http.StatusNotFound, "NAME_UNKNOWN", "schematic %s not found", rr.id)
		return
	case err != nil:
		s.o.Log.Error("reading a schematic", "id", rr.id, "err", err)
		registryError(w, http.StatusInternalServerError, "UNKNOWN", "reading schematic %s failed", rr.id)
		return
	}
	switch rr.op {
	case "tags":
		writeTags(w, r, rr.kind.repo()+"/"+rr.id, s.versionTags())
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
	return slices.ContainsFunc(s.listed(), func(rel *Release) bool {
		_, err := rel.platforms().Lookup(pl)
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
	var e *frontEntry
	rel := s.available(rr.ref)
	if rr.ref == "latest" {
		if rel = s.latest(); rel == nil {
			registryError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "latest: no stable version is served (see tags/list)")
			return
		}
	}
	if rel != nil {
		if _, err := rel.platforms().Lookup(rr.kind.platform); err != nil {
			registryError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "release %s has no platform %s", TalosVersion(rel.Version), rr.kind.platform)
			return
		}
		if err := unhonoured(rel, sch, compose.Output{Kind: "installer", SecureBoot: rr.kind.secureBoot}, rr.ref); err != nil {
			registryError(w, http.StatusBadRequest, "MANIFEST_INVALID", "%v", err)
			return
		}
		var err error
		if e, err = s.installer(r.Context(), rel, sch, rr.kind, r.Host); s.refused(w, r, err) {
			return
		} else if err != nil {
			s.o.Log.Error("making an installer", "id", w.Header().Get("X-Request-Id"), "schematic", rr.id, "version", rel.Version, "err", err)
			registryError(w, http.StatusInternalServerError, "UNKNOWN", "making %s/%s:%s failed (request %s: the factory's log says why)", rr.kind.repo(), rr.id, TalosVersion(rel.Version), w.Header().Get("X-Request-Id"))
			return
		}
		s.writeManifest(w, r, e.manifests[e.digest])
		return
	}
	if _, err := v1.NewHash(rr.ref); err != nil && !isSigTag(rr.ref) {
		registryError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "%q is neither a served version (see tags/list) nor a digest", rr.ref)
		return
	}
	if e := s.cachedEntry(r.Context(), sch, rr.kind, func(e *frontEntry) bool { _, ok := e.manifests[rr.ref]; return ok }); e != nil {
		s.writeManifest(w, r, e.manifests[rr.ref])
		return
	}
	registryError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", "manifest %s not found in %s", rr.ref, rr.kind.repo()+"/"+rr.id)
}

// isSigTag says whether ref is cosign's tag of a signature.
func isSigTag(ref string) bool {
	hexPart, ok := strings.CutSuffix(strings.TrimPrefix(ref, "sha256-"), ".sig")
	return ok && strings.HasPrefix(ref, "sha256-") && len(hexPart) == 64 && strings.Trim(hexPart, "0123456789abcdef") == ""
}

func (s *Server) writeManifest(w http.ResponseWriter, r *http.Request, m rawManifest) {
	w.Header().Set("Content-Type", string(m.mediaType))
	w.Header().Set("Docker-Content-Digest", m.digest.String())
	w.Header().Set("Content-Length", strconv.Itoa(len(m.raw)))
	w.Header().Set("ETag", `"`+m.digest.String()+`"`)
	if r.Method == http.MethodHead {
		return
	}
	w.Write(m.raw)
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
	e := s.cachedEntry(r.Context(), sch, rr.kind, func(e *frontEntry) bool { _, ok := e.blobs[h]; return ok })
	if e == nil {
		registryError(w, http.StatusNotFound, "BLOB_UNKNOWN", "blob %s not found in %s", h, rr.kind.repo()+"/"+rr.id)
		return
	}
	s.sendBlob(w, r, e, h, func() { s.forgetInstaller(e.key) })
}

// sendBlob streams a blob of e, verified as it streams: a damaged blob's
// end never leaves, the transfer is cut after failed is called (to check
// the entry again).
func (s *Server) sendBlob(w http.ResponseWriter, r *http.Request, e *frontEntry, h v1.Hash, failed func()) {
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Docker-Content-Digest", h.String())
	b := e.blobs[h]
	w.Header().Set("Content-Length", strconv.FormatInt(b.size, 10))
	w.Header().Set("ETag", `"`+h.String()+`"`)
	if r.Method == http.MethodHead {
		return
	}
	rc, err := b.open(r.Context())
	if err == nil {
		_, err = io.Copy(w, verified(rc, v1.Descriptor{Digest: h, Size: b.size}))
		rc.Close()
	}
	if err == nil {
		return
	}
	s.o.Log.Warn("serving a blob failed: the transfer is cut", "id", w.Header().Get("X-Request-Id"), "repository", e.repo, "digest", h.String(), "err", err)
	if errors.Is(err, errDamaged) {
		s.cache.countDamaged()
	}
	failed()
	panic(http.ErrAbortHandler)
}

// rawManifest is a manifest as served.
type rawManifest struct {
	raw       []byte
	mediaType types.MediaType
	digest    v1.Hash
}

// blobSource opens one blob of a cached installer.
type blobSource struct {
	size int64
	open func(context.Context) (io.ReadCloser, error) // within the reader's context
}

// frontEntry is an image the front serves, checked: its manifests by
// digest (and its signature's by cosign's tag) and its blobs; a cached
// installer, or a release's extension.
type frontEntry struct {
	repo      string // where in st: RepoInstallers, or the release's extension repository
	key       string
	digest    string // the index's
	manifests map[string]rawManifest
	blobs     map[v1.Hash]blobSource
	st        oci.Store // the cache, where blobs are read anew by each reader
	check     bool      // its blobs are read through when it is made
}

// installers remembers the entries checked by this process.
type installers struct {
	mu      sync.Mutex
	checked map[string]*frontEntry // cache key -> entry
}

func (s *Service) forgetInstaller(key string) {
	s.inst.mu.Lock()
	delete(s.inst.checked, key)
	s.inst.mu.Unlock()
}

func (s *Service) rememberedInstaller(key string) *frontEntry {
	s.inst.mu.Lock()
	defer s.inst.mu.Unlock()
	return s.inst.checked[key]
}

// cachedEntry finds the installer of a repository that has what has
// looks for: first among the entries this process has checked, then
// (after a restart, say) among the others, checked one at a time until one
// has it; nothing is built.
func (s *Service) cachedEntry(ctx context.Context, sch *schematic.Schematic, k installerKind, has func(*frontEntry) bool) *frontEntry {
	id, err := sch.ID()
	if err != nil {
		return nil
	}
	var unchecked []string
	for _, v := range s.served().versions {
		key := s.installerKey(s.served().releases[v], id, k)
		if e := s.rememberedInstaller(key); e == nil {
			unchecked = append(unchecked, key)
		} else if has(e) {
			return e
		}
	}
	for _, key := range unchecked {
		if e, err := s.loadInstaller(ctx, key, true); err == nil && has(e) {
			return e
		}
	}
	return nil
}

// installer returns the checked entry of a schematic's installer for a
// release, building it on a miss (see flight).
func (s *Service) installer(ctx context.Context, rel *Release, sch *schematic.Schematic, k installerKind, host string) (*frontEntry, error) {
	id, err := sch.ID()
	if err != nil {
		return nil, err
	}
	key := s.installerKey(rel, id, k)
	if e := s.rememberedInstaller(key); e != nil {
		return e, nil
	}
	v, err := s.flight(ctx, flightJob{
		key:    "installer\x00" + key,
		labels: []string{rel.Version, "installer", "all"},
		lookup: func(bctx context.Context) (any, bool, bool) {
			e, err := s.loadInstaller(bctx, key, true)
			switch {
			case err == nil:
				s.cache.hits.Add(1)
				return e, true, false
			case errors.Is(err, oci.ErrNotFound):
				return nil, false, false
			}
			s.cache.errors.Add(1)
			s.o.Log.Warn("cached installer refused: building it again", "key", key, "err", err)
			return nil, false, true
		},
		build: func(bctx context.Context) (any, error) {
			o := InstallerOptions{Schematic: sch, Platform: k.platform, Work: s.o.Work}
			if k.secureBoot {
				o.SecureBoot = s.o.SecureBoot
			}
			idx, err := rel.Installer(bctx, o)
			if err != nil {
				return nil, err
			}
			if err := s.putInstaller(bctx, key, s.pullRef(host, k, id, rel.Version), idx); err != nil {
				return nil, err
			}
			// Just written and signed here: its blobs are not read back.
			return s.loadInstaller(bctx, key, false)
		},
	})
	if err != nil {
		return nil, err
	}
	return v.(*frontEntry), nil
}

// installerKey is the cache key of an installer image; a Secure Boot
// installer's names the certificate that signs it: another key set,
// another entry.
func (s *Service) installerKey(rel *Release, id string, k installerKind) string {
	name := k.repo()
	if k.secureBoot {
		name += "\x00" + s.o.SecureBoot.CertSHA256()
	}
	return cacheKey(rel, id, name, s.o.BuilderVersion)
}

// pullRef is the reference users pull an installer by, HOST/REPO/ID:vV
// (Talos's tag), the identity its signature claims: HOST is
// --external-url's, else the request's.
func (s *Service) pullRef(host string, k installerKind, id, version string) string {
	if host = s.publicHost(host); host != "" {
		return host + "/" + k.ref(id, version)
	}
	return k.ref(id, version)
}

// putInstaller stores an installer index: untagged, then signed (the
// signature is the one stock cosign verifies at the front, claiming the
// reference users pull and the cache key), then tagged with its key, so
// no tag names an unsigned index.
func (s *Service) putInstaller(ctx context.Context, key, identity string, idx v1.ImageIndex) error {
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	st := s.o.Cache
	if err := st.WriteIndex(ctx, RepoInstallers, "", idx); err != nil {
		return err
	}
	if s.o.Signer != nil {
		// The claim of the key it was made for: the index's digest alone
		// does not say which builder made it, and the index (pulled by
		// users, equal to builder image's) carries no key.
		o := signing.SignOptions{Identity: identity, Claims: map[string]string{AnnotationEntryKey: key}}
		if _, err := s.o.Signer.SignWith(ctx, st, RepoInstallers, d, o); err != nil {
			return err
		}
	}
	return st.WriteIndex(ctx, RepoInstallers, key, idx)
}

// loadInstaller reads the cached installer of key and, with check, checks
// it: the factory's signature on its index (when the factory signs), every
// manifest and blob against its digest. Without, only the manifests are
// read (an entry this process has just written). A key with no entry is
// an oci.ErrNotFound.
func (s *Service) loadInstaller(ctx context.Context, key string, check bool) (*frontEntry, error) {
	st := s.o.Cache
	desc, err := st.Head(ctx, RepoInstallers, key)
	if err != nil {
		return nil, err
	}
	idx, err := st.Index(ctx, RepoInstallers, desc.Digest.String())
	if err != nil {
		return nil, err
	}
	e := &frontEntry{repo: RepoInstallers, key: key, digest: desc.Digest.String(), manifests: map[string]rawManifest{}, blobs: map[v1.Hash]blobSource{}, st: st, check: check}
	if err := e.addIndex(idx, desc.Digest); err != nil {
		return nil, err
	}
	if s.o.Signer != nil {
		sig, layers, err := signing.ReadSigs(ctx, st, RepoInstallers, oci.SigTag(desc.Digest))
		if err != nil {
			return nil, err
		}
		// A signature by the factory's key that names this key: an index
		// tagged for another request (or by another builder) is refused.
		signed, claimed := !check, ""
		for _, l := range layers {
			p, err := signing.SignedPayload(s.o.Signer.Verifier(), l, desc.Digest)
			if err != nil {
				continue
			}
			if claimed = signing.Claims(p)[AnnotationEntryKey]; claimed == key {
				signed = true
			}
		}
		switch {
		case !signed && claimed != "":
			s.metrics.mismatches.Inc()
			return nil, fmt.Errorf("the installer index %s tagged %s is signed for the cache key %s: another request's", desc.Digest, key, claimed)
		case !signed:
			return nil, errors.New("no signature by the factory's key")
		}
		if err := e.addImage(sig, oci.SigTag(desc.Digest)); err != nil {
			return nil, fmt.Errorf("signature: %w", err)
		}
	}
	s.inst.mu.Lock()
	if s.inst.checked == nil {
		s.inst.checked = map[string]*frontEntry{}
	}
	s.inst.checked[key] = e
	s.inst.mu.Unlock()
	return e, nil
}

// addIndex adds an index and its images, checking the index's digest.
func (e *frontEntry) addIndex(idx v1.ImageIndex, d v1.Hash) error {
	raw, err := idx.RawManifest()
	if err != nil {
		return err
	}
	if got := digest.OCI(raw); got != d {
		return fmt.Errorf("index %s hashes to %s", d, got)
	}
	e.manifests[d.String()] = rawManifest{raw: raw, mediaType: types.OCIImageIndex, digest: d}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, c := range m.Manifests {
		img, err := idx.Image(c.Digest)
		if err != nil {
			return err
		}
		if err := e.addImage(img, ""); err != nil {
			return fmt.Errorf("image %s: %w", c.Digest, err)
		}
		if _, ok := e.manifests[c.Digest.String()]; !ok {
			return fmt.Errorf("image %s: its manifest does not hash to its digest", c.Digest)
		}
	}
	return nil
}

// addImage adds an image's manifest (under its digest, and tag when not
// empty), its config and its layers, each read once to check its digest.
func (e *frontEntry) addImage(img v1.Image, tag string) error {
	raw, err := img.RawManifest()
	if err != nil {
		return err
	}
	mt, err := img.MediaType()
	if err != nil {
		return err
	}
	rm := rawManifest{raw: raw, mediaType: mt, digest: digest.OCI(raw)}
	e.manifests[rm.digest.String()] = rm
	if tag != "" {
		e.manifests[tag] = rm
	}
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	if got := digest.OCI(cfg); got != m.Config.Digest {
		return fmt.Errorf("config %s hashes to %s", m.Config.Digest, got)
	}
	e.blobs[m.Config.Digest] = blobSource{size: int64(len(cfg)), open: func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(string(cfg))), nil
	}}
	for _, ld := range m.Layers {
		l, err := img.LayerByDigest(ld.Digest)
		if err != nil {
			return err
		}
		if e.check {
			if err := checkBlob(l.Compressed, ld); err != nil {
				return err
			}
		}
		// Read anew when served: what read it here ends with its context.
		st, repo, md, ldd := e.st, e.repo, rm.digest.String(), ld.Digest
		e.blobs[ld.Digest] = blobSource{size: ld.Size, open: func(ctx context.Context) (io.ReadCloser, error) {
			img, err := st.Image(ctx, repo, md)
			if err != nil {
				return nil, err
			}
			l, err := img.LayerByDigest(ldd)
			if err != nil {
				return nil, err
			}
			return l.Compressed()
		}}
	}
	return nil
}

// checkBlob reads a blob through and compares it with its descriptor.
func checkBlob(open func() (io.ReadCloser, error), d v1.Descriptor) error {
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		return fmt.Errorf("blob %s: %w", d.Digest, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != d.Size || got != d.Digest.Hex {
		return fmt.Errorf("blob %s: read %d bytes hashing to sha256:%s (damaged or tampered)", d.Digest, n, got)
	}
	return nil
}
