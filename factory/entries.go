package factory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/release"
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

// RawManifest is a manifest as served.
type RawManifest struct {
	Raw       []byte
	MediaType types.MediaType
	Digest    v1.Hash
}

// BlobSource opens one blob of a cached installer.
type BlobSource struct {
	Size int64
	Open func(context.Context) (io.ReadCloser, error) // within the reader's context
}

// ImageEntry is an image the front serves, checked: its manifests by
// digest (and its signature's by cosign's tag) and its blobs; a cached
// installer, or a release's extension.
type ImageEntry struct {
	Repo      string // where in st: RepoInstallers, or the release's extension repository
	Key       string
	Digest    string // the index's
	Manifests map[string]RawManifest
	Blobs     map[v1.Hash]BlobSource
	st        oci.Store // the cache, where blobs are read anew by each reader
	check     bool      // its blobs are read through when it is made
}

// installers remembers the entries checked by this process.
type installers struct {
	mu      sync.Mutex
	checked map[string]*ImageEntry // cache key -> entry
}

func (s *Service) ForgetInstaller(key string) {
	s.inst.mu.Lock()
	delete(s.inst.checked, key)
	s.inst.mu.Unlock()
}

func (s *Service) rememberedInstaller(key string) *ImageEntry {
	s.inst.mu.Lock()
	defer s.inst.mu.Unlock()
	return s.inst.checked[key]
}

// CachedEntry finds the installer of a repository that has what has
// looks for: first among the entries this process has checked, then
// (after a restart, say) among the others, checked one at a time until one
// has it; nothing is built.
func (s *Service) CachedEntry(ctx context.Context, sch *schematic.Schematic, k InstallerKind, has func(*ImageEntry) bool) *ImageEntry {
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

// Installer returns the checked entry of a schematic's Installer for a
// release, building it on a miss (see flight).
func (s *Service) Installer(ctx context.Context, rel *VerifiedRelease, sch *schematic.Schematic, k InstallerKind, host string) (*ImageEntry, error) {
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
			work, err := os.MkdirTemp(s.o.Work, "installer-")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(work) // the layers' files, once stored
			o := InstallerOptions{Schematic: sch, Platform: k.Platform, Work: work, Layers: s.layerCache()}
			if k.SecureBoot {
				o.SecureBoot = s.o.SecureBoot
			}
			idx, err := rel.Installer(bctx, o)
			if err != nil {
				return nil, err
			}
			if err := s.putInstaller(bctx, key, s.PullRef(host, k, id, rel.Version), idx); err != nil {
				return nil, err
			}
			// Just written and signed here: its blobs are not read back.
			return s.loadInstaller(bctx, key, false)
		},
	})
	if err != nil {
		return nil, err
	}
	return v.(*ImageEntry), nil
}

// installerKey is the cache key of an installer image; a Secure Boot
// installer's names the certificate that signs it: another key set,
// another entry.
func (s *Service) installerKey(rel *VerifiedRelease, id string, k InstallerKind) string {
	name := k.Repo()
	if k.SecureBoot {
		name += "\x00" + s.o.SecureBoot.CertSHA256()
	}
	return cacheKey(rel, id, name, s.o.BuilderVersion)
}

// PullRef is the reference users pull an installer by, HOST/REPO/ID:vV
// (Talos's tag), the identity its signature claims: HOST is
// --external-url's, else the request's.
func (s *Service) PullRef(host string, k InstallerKind, id, version string) string {
	if host = s.PublicHost(host); host != "" {
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
func (s *Service) loadInstaller(ctx context.Context, key string, check bool) (*ImageEntry, error) {
	st := s.o.Cache
	desc, err := st.Head(ctx, RepoInstallers, key)
	if err != nil {
		return nil, err
	}
	idx, err := st.Index(ctx, RepoInstallers, desc.Digest.String())
	if err != nil {
		return nil, err
	}
	e := &ImageEntry{Repo: RepoInstallers, Key: key, Digest: desc.Digest.String(), Manifests: map[string]RawManifest{}, Blobs: map[v1.Hash]BlobSource{}, st: st, check: check}
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
		s.inst.checked = map[string]*ImageEntry{}
	}
	s.inst.checked[key] = e
	s.inst.mu.Unlock()
	return e, nil
}

// addIndex adds an index and its images, checking the index's digest.
func (e *ImageEntry) addIndex(idx v1.ImageIndex, d v1.Hash) error {
	raw, err := idx.RawManifest()
	if err != nil {
		return err
	}
	if got := digest.OCI(raw); got != d {
		return fmt.Errorf("index %s hashes to %s", d, got)
	}
	e.Manifests[d.String()] = RawManifest{Raw: raw, MediaType: types.OCIImageIndex, Digest: d}
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
		if _, ok := e.Manifests[c.Digest.String()]; !ok {
			return fmt.Errorf("image %s: its manifest does not hash to its digest", c.Digest)
		}
	}
	return nil
}

// addImage adds an image's manifest (under its digest, and tag when not
// empty), its config and its layers, each read once to check its digest.
func (e *ImageEntry) addImage(img v1.Image, tag string) error {
	raw, err := img.RawManifest()
	if err != nil {
		return err
	}
	mt, err := img.MediaType()
	if err != nil {
		return err
	}
	rm := RawManifest{Raw: raw, MediaType: mt, Digest: digest.OCI(raw)}
	e.Manifests[rm.Digest.String()] = rm
	if tag != "" {
		e.Manifests[tag] = rm
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
	e.Blobs[m.Config.Digest] = BlobSource{Size: int64(len(cfg)), Open: func(context.Context) (io.ReadCloser, error) {
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
		st, repo, md, ldd := e.st, e.Repo, rm.Digest.String(), ld.Digest
		e.Blobs[ld.Digest] = BlobSource{Size: ld.Size, Open: func(ctx context.Context) (io.ReadCloser, error) {
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

// extensionImages remembers the extension entries read by this process.
type extensionImages struct {
	mu sync.Mutex
	by map[string]*ImageEntry // version \x00 name -> entry
}

// ExtensionImage reads a release's extension image for the registry front: its
// index, children and the release's signature of it.
func (s *Service) ExtensionImage(ctx context.Context, rel *VerifiedRelease, name string) (*ImageEntry, error) {
	key := rel.Version + "\x00" + name
	s.exts.mu.Lock()
	e := s.exts.by[key]
	s.exts.mu.Unlock()
	if e != nil {
		return e, nil
	}
	repo := release.RepoExtension + name
	d, err := v1.NewHash(rel.Digests[repo])
	if err != nil {
		return nil, err
	}
	idx, err := rel.Store.Index(ctx, repo, d.String())
	if err != nil {
		return nil, err
	}
	e = &ImageEntry{Repo: repo, Key: key, Digest: d.String(), Manifests: map[string]RawManifest{}, Blobs: map[v1.Hash]BlobSource{}, st: rel.Store}
	if err := e.addIndex(idx, d); err != nil {
		return nil, err
	}
	sig, layers, err := signing.ReadSigs(ctx, rel.Store, repo, oci.SigTag(d))
	if err != nil {
		return nil, err
	}
	if len(layers) > 0 {
		if err := e.addImage(sig, oci.SigTag(d)); err != nil {
			return nil, err
		}
	}
	s.exts.mu.Lock()
	if s.exts.by == nil {
		s.exts.by = map[string]*ImageEntry{}
	}
	s.exts.by[key] = e
	s.exts.mu.Unlock()
	return e, nil
}
