package release

import (
	"archive/tar"
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/oci"
)

// An archive is an OCI image layout (every repository of a release, as
// Layout writes it) sealed by a manifest: a signed in-toto statement whose
// subjects are every file of the layout by sha256. On disk it is a
// directory or a tar file (oci-archive), optionally split into parts.
const (
	// ArchiveManifestName is the DSSE envelope of the archive's statement;
	// it is the first entry of a tar archive and, in a directory, the
	// file written last (its presence says the archive is complete).
	ArchiveManifestName = "nodeforge-mirror.json"
	// ArchiveKeyName is the PEM public key the manifest was signed with.
	ArchiveKeyName = "nodeforge-mirror.pub"
	// PredicateArchive is the predicate type of the archive's statement.
	PredicateArchive = "https://nodeforge.dev/mirror-archive/v1"
	// maxArchiveManifest bounds the manifest read from an archive.
	maxArchiveManifest = 64 << 20
)

// ArchiveFile is one file of an archive's layout.
type ArchiveFile struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Kind is "layout" (oci-layout, index.json), "manifest", "config" or
	// "layer".
	Kind string `json:"kind"`
	// InPrevious is set when an earlier archive carried this layer and
	// this (incremental) one does not.
	InPrevious bool `json:"inPrevious,omitempty"`
}

// ArchivePredicate is what an archive's statement says.
type ArchivePredicate struct {
	Version string        `json:"version,omitempty"`
	Source  string        `json:"source"`
	Items   []Item        `json:"items"`
	Files   []ArchiveFile `json:"files"`
	// Previous is the sha256 of the previous archive's manifest for an
	// incremental archive.
	Previous string `json:"previous,omitempty"`
}

// ArchiveManifest is an archive's verified manifest.
type ArchiveManifest struct {
	Predicate ArchivePredicate
	// Envelope is the DSSE envelope as stored; Digest its sha256.
	Envelope []byte
	Digest   string
	// KeyID names the key that signed it; Pinned says it was one of the
	// keys the caller trusts rather than the key inside the archive.
	KeyID  string
	Pinned bool
	pub    signature.Verifier
}

// ArchiveInfo describes an archive a mirror wrote or read.
type ArchiveInfo struct {
	Path     string   `json:"path"`
	Manifest string   `json:"manifest"`
	KeyID    string   `json:"keyId"`
	Pinned   bool     `json:"signerPinned"`
	Files    int      `json:"files"`
	Carried  int      `json:"carried"`
	Bytes    int64    `json:"bytes"`
	Previous string   `json:"previous,omitempty"`
	Parts    []string `json:"parts,omitempty"`
}

// Info summarises m for a report.
func (m *ArchiveManifest) Info(path string) *ArchiveInfo {
	in := &ArchiveInfo{Path: path, Manifest: m.Digest, KeyID: m.KeyID, Pinned: m.Pinned, Files: len(m.Predicate.Files), Previous: m.Predicate.Previous}
	for _, f := range m.Predicate.Files {
		if !f.InPrevious {
			in.Carried++
			in.Bytes += f.Size
		}
	}
	return in
}

// SealOptions say how an archive is sealed.
type SealOptions struct {
	Version, Source string
	// Signer signs the manifest; nil signs it with a key made for this
	// archive alone (integrity only: importers should pin a key).
	Signer *signing.Signer
	// Previous is the manifest of an earlier archive: layers it carried
	// are left out of this one.
	Previous *ArchiveManifest
}

// SealArchive lists and hashes every file of the layout that items need,
// and signs the list. A staged blob whose content does not match its name
// (an interrupted earlier run) is removed and reported.
func SealArchive(lay *oci.Layout, items []Item, o SealOptions) (*ArchiveManifest, error) {
	files := []ArchiveFile{{Path: "oci-layout", Kind: "layout"}, {Path: "index.json", Kind: "layout"}}
	seen := map[string]bool{}
	add := func(h v1.Hash, kind string) {
		p := "blobs/" + h.Algorithm + "/" + h.Hex
		if !seen[p] {
			seen[p] = true
			files = append(files, ArchiveFile{Path: p, Kind: kind})
		}
	}
	for _, it := range items {
		h, err := v1.NewHash(it.Digest)
		if err != nil {
			return nil, err
		}
		add(h, "manifest")
		raw, err := lay.Blob(h)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lay.Ref(it.Repo, it.Digest), err)
		}
		var m v1.Manifest
		if types.MediaType(it.MediaType).IsIndex() || json.Unmarshal(raw, &m) != nil {
			continue
		}
		if m.Config.Digest.Hex != "" {
			add(m.Config.Digest, "config")
		}
		for _, l := range m.Layers {
			add(l.Digest, "layer")
		}
	}
	prev := map[string]bool{}
	if o.Previous != nil {
		for _, f := range o.Previous.Predicate.Files {
			prev[f.SHA256] = true
		}
	}
	var subjects []signing.Subject
	for i := range files {
		f := &files[i]
		sum, n, err := hashFile(filepath.Join(lay.Dir, f.Path))
		if err != nil {
			return nil, fmt.Errorf("archive %s: %w", lay.Dir, err)
		}
		if strings.HasPrefix(f.Path, "blobs/sha256/") && sum != strings.TrimPrefix(f.Path, "blobs/sha256/") {
			os.Remove(filepath.Join(lay.Dir, f.Path))
			return nil, fmt.Errorf("archive %s: staged blob %s was damaged (an interrupted run?) and is removed: run again", lay.Dir, f.Path)
		}
		f.SHA256, f.Size = sum, n
		f.InPrevious = f.Kind == "layer" && prev[sum]
		subjects = append(subjects, signing.Subject{Name: f.Path, Digest: map[string]string{"sha256": sum}})
	}
	pred := ArchivePredicate{Version: o.Version, Source: o.Source, Items: items, Files: files}
	if o.Previous != nil {
		pred.Previous = o.Previous.Digest
	}
	pb, err := json.Marshal(pred)
	if err != nil {
		return nil, err
	}
	st, err := signing.NewStatement(subjects, PredicateArchive, pb)
	if err != nil {
		return nil, err
	}
	signer := o.Signer
	if signer == nil {
		if signer, err = ephemeralSigner(); err != nil {
			return nil, err
		}
	}
	env, err := signer.Envelope(st)
	if err != nil {
		return nil, fmt.Errorf("signing the archive manifest: %w", err)
	}
	sum := sha256.Sum256(env)
	return &ArchiveManifest{Predicate: pred, Envelope: env, Digest: "sha256:" + hex.EncodeToString(sum[:]), KeyID: signer.KeyID, Pinned: o.Signer != nil, pub: signer.Verifier()}, nil
}

// ephemeralSigner makes a P-256 key for one archive.
func ephemeralSigner() (*signing.Signer, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	sv, err := signature.LoadECDSASignerVerifier(k, crypto.SHA256)
	if err != nil {
		return nil, err
	}
	return signing.NewSigner(sv)
}

func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// publicKeyPEM is the PEM of the manifest's signing key, stored beside it.
func (m *ArchiveManifest) publicKeyPEM() ([]byte, error) {
	pub, err := m.pub.PublicKey()
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// WriteArchiveDir completes a directory archive: the layout is in place,
// the key and then the manifest are written (each through a temporary
// file and a rename), so a directory with a manifest is complete.
func WriteArchiveDir(dir string, m *ArchiveManifest) error {
	pub, err := m.publicKeyPEM()
	if err != nil {
		return err
	}
	if err := atomicfile.Put(filepath.Join(dir, ArchiveKeyName), pub); err != nil {
		return err
	}
	return atomicfile.Put(filepath.Join(dir, ArchiveManifestName), m.Envelope)
}

// WriteArchiveTar writes the archive as a tar stream to path: the
// manifest, its key, the layout's files in the manifest's order, leaving
// out layers a previous archive carried. With partSize > 0 the stream is
// split into path.000, path.001, ... of at most partSize bytes each. The
// output appears under its final names only when complete.
func WriteArchiveTar(path, layoutDir string, m *ArchiveManifest, partSize int64) ([]string, error) {
	w, err := newPartWriter(path, partSize)
	if err != nil {
		return nil, err
	}
	defer w.abort()
	tw := tar.NewWriter(w)
	put := func(name string, size int64, r io.Reader) error {
		hdr := &tar.Header{Name: name, Size: size, Mode: 0o644, Typeflag: tar.TypeReg, Format: tar.FormatPAX, ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		n, err := io.Copy(tw, r)
		if err == nil && n != size {
			err = fmt.Errorf("%s: %d bytes, want %d", name, n, size)
		}
		return err
	}
	pub, err := m.publicKeyPEM()
	if err != nil {
		return nil, err
	}
	if err := put(ArchiveManifestName, int64(len(m.Envelope)), bytes.NewReader(m.Envelope)); err != nil {
		return nil, err
	}
	if err := put(ArchiveKeyName, int64(len(pub)), bytes.NewReader(pub)); err != nil {
		return nil, err
	}
	for _, f := range m.Predicate.Files {
		if f.InPrevious {
			continue
		}
		fh, err := os.Open(filepath.Join(layoutDir, f.Path))
		if err != nil {
			return nil, err
		}
		err = put(f.Path, f.Size, fh)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return w.commit()
}

// OpenArchiveOptions say how an archive is opened.
type OpenArchiveOptions struct {
	// Keys, when set, are the keys one of which must have signed the
	// manifest; without them the key stored in the archive is used
	// (integrity, not authenticity).
	Keys []signature.Verifier
	// Work is where a tar archive is unpacked (it is removed and written
	// again); a directory archive is read in place.
	Work string
}

// OpenArchive verifies an archive and returns its layout: the manifest's
// signature, then every file against the manifest (a tar archive is
// unpacked into o.Work while hashing; files it should not hold, files
// larger than listed, and missing files are refused).
func OpenArchive(path string, isDir bool, o OpenArchiveOptions) (*oci.Layout, *ArchiveManifest, error) {
	if isDir {
		m, err := readDirManifest(path, o.Keys)
		if err != nil {
			return nil, nil, err
		}
		for _, f := range m.Predicate.Files {
			if f.InPrevious {
				continue
			}
			sum, n, err := hashFile(filepath.Join(path, filepath.FromSlash(f.Path)))
			if err != nil {
				return nil, nil, fmt.Errorf("archive %s: %w", path, err)
			}
			if sum != f.SHA256 || n != f.Size {
				return nil, nil, fmt.Errorf("archive %s: %s does not match the manifest (sha256 %s, %d bytes; want %s, %d bytes): damaged or tampered", path, f.Path, sum, n, f.SHA256, f.Size)
			}
		}
		lay, err := oci.OpenLayout(path)
		return lay, m, err
	}
	r, closer, err := openParts(path)
	if err != nil {
		return nil, nil, err
	}
	defer closer()
	tr := tar.NewReader(r)
	m, err := readTarManifest(path, tr, o.Keys)
	if err != nil {
		return nil, nil, err
	}
	// Empty the work directory, not remove it: the caller may hold a lock
	// on it.
	if err := emptyDir(o.Work); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(filepath.Join(o.Work, "blobs", "sha256"), 0o755); err != nil {
		return nil, nil, err
	}
	want := map[string]ArchiveFile{}
	for _, f := range m.Predicate.Files {
		if !f.InPrevious {
			want[f.Path] = f
		}
	}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("archive %s: %w (a part missing or cut short?)", path, err)
		}
		f, ok := want[hdr.Name]
		if !ok || hdr.Typeflag != tar.TypeReg {
			return nil, nil, fmt.Errorf("archive %s: entry %q is not in its manifest: refused", path, hdr.Name)
		}
		delete(want, hdr.Name)
		if hdr.Size != f.Size {
			return nil, nil, fmt.Errorf("archive %s: %s is %d bytes, the manifest says %d: damaged or tampered", path, f.Path, hdr.Size, f.Size)
		}
		if err := extractVerified(tr, filepath.Join(o.Work, filepath.FromSlash(f.Path)), f); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, nil, fmt.Errorf("archive %s: %s: %w (a part missing or cut short?)", path, f.Path, err)
			}
			return nil, nil, fmt.Errorf("archive %s: %w", path, err)
		}
	}
	if len(want) > 0 {
		missing := slices.Sorted(func(yield func(string) bool) {
			for p := range want {
				if !yield(p) {
					return
				}
			}
		})
		return nil, nil, fmt.Errorf("archive %s lacks %d files of its manifest (%s): a part missing or cut short?", path, len(missing), strings.Join(missing[:min(3, len(missing))], ", "))
	}
	lay, err := oci.OpenLayout(o.Work)
	return lay, m, err
}

// extractVerified writes one file of a tar archive, refusing content
// that does not match the manifest.
func extractVerified(r io.Reader, name string, f ArchiveFile) error {
	out, err := os.Create(name)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(r, f.Size+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 || n != f.Size {
		os.Remove(name)
		return fmt.Errorf("%s: sha256 %s, the manifest says %s: damaged or tampered", f.Path, got, f.SHA256)
	}
	return nil
}

func readLimited(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxArchiveManifest+1))
	if err == nil && len(b) > maxArchiveManifest {
		err = fmt.Errorf("%s: more than %d bytes", name, maxArchiveManifest)
	}
	return b, err
}

// openArchiveManifest verifies the envelope with keys, or with the key
// stored in the archive when none are given, and reads the statement.
func openArchiveManifest(path string, env, pubPEM []byte, keys []signature.Verifier) (*ArchiveManifest, error) {
	m := &ArchiveManifest{Envelope: env}
	sum := sha256.Sum256(env)
	m.Digest = "sha256:" + hex.EncodeToString(sum[:])
	var payload []byte
	var lastErr error
	if len(keys) > 0 {
		for _, k := range keys {
			if payload, lastErr = signing.OpenEnvelope(k, env); lastErr == nil {
				m.Pinned = true
				m.pub = k
				break
			}
		}
	} else {
		block, _ := pem.Decode(pubPEM)
		if block == nil {
			return nil, fmt.Errorf("archive %s: %s holds no PEM public key", path, ArchiveKeyName)
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("archive %s: %s: %w", path, ArchiveKeyName, err)
		}
		v, err := signature.LoadVerifier(pub, crypto.SHA256)
		if err != nil {
			return nil, fmt.Errorf("archive %s: %s: %w", path, ArchiveKeyName, err)
		}
		payload, lastErr = signing.OpenEnvelope(v, env)
		m.pub = v
	}
	if payload == nil {
		return nil, fmt.Errorf("archive %s: its manifest %s does not verify: %v: damaged or tampered", path, ArchiveManifestName, lastErr)
	}
	if pub, err := m.pub.PublicKey(); err == nil {
		m.KeyID, _ = signing.KeyID(pub)
	}
	var st struct {
		Type          string            `json:"_type"`
		PredicateType string            `json:"predicateType"`
		Subject       []signing.Subject `json:"subject"`
		Predicate     json.RawMessage   `json:"predicate"`
	}
	if err := json.Unmarshal(payload, &st); err != nil {
		return nil, fmt.Errorf("archive %s: manifest statement: %w", path, err)
	}
	if st.PredicateType != PredicateArchive {
		return nil, fmt.Errorf("archive %s: manifest predicate type %q, want %s", path, st.PredicateType, PredicateArchive)
	}
	if err := json.Unmarshal(st.Predicate, &m.Predicate); err != nil {
		return nil, fmt.Errorf("archive %s: manifest predicate: %w", path, err)
	}
	// The subjects and the file list must agree, and every path must be
	// one a layout holds (no traversal).
	if len(st.Subject) != len(m.Predicate.Files) {
		return nil, fmt.Errorf("archive %s: manifest lists %d subjects and %d files", path, len(st.Subject), len(m.Predicate.Files))
	}
	for i, f := range m.Predicate.Files {
		if st.Subject[i].Name != f.Path || st.Subject[i].Digest["sha256"] != f.SHA256 {
			return nil, fmt.Errorf("archive %s: manifest subject %d does not match file %s", path, i, f.Path)
		}
		if !validArchivePath(f.Path) || f.Size < 0 {
			return nil, fmt.Errorf("archive %s: manifest names %q: not a file of an OCI layout", path, f.Path)
		}
	}
	return m, nil
}

// validArchivePath admits oci-layout, index.json and blobs/sha256/<hex>.
func validArchivePath(p string) bool {
	if p == "oci-layout" || p == "index.json" {
		return true
	}
	hexPart, ok := strings.CutPrefix(p, "blobs/sha256/")
	if !ok || len(hexPart) != 64 {
		return false
	}
	_, err := hex.DecodeString(hexPart)
	return err == nil && strings.ToLower(hexPart) == hexPart
}

// ReadArchiveManifest reads and verifies only the manifest of an archive
// (for an incremental export's previous archive).
func ReadArchiveManifest(path string, isDir bool, keys []signature.Verifier) (*ArchiveManifest, error) {
	if isDir {
		return readDirManifest(path, keys)
	}
	r, closer, err := openParts(path)
	if err != nil {
		return nil, err
	}
	defer closer()
	return readTarManifest(path, tar.NewReader(r), keys)
}

// readDirManifest reads and verifies the manifest of a directory archive.
func readDirManifest(path string, keys []signature.Verifier) (*ArchiveManifest, error) {
	env, err := readLimited(filepath.Join(path, ArchiveManifestName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("archive %s has no %s: not an archive, or its export did not finish (run it again)", path, ArchiveManifestName)
	}
	if err != nil {
		return nil, err
	}
	pub, err := readLimited(filepath.Join(path, ArchiveKeyName))
	if err != nil && len(keys) == 0 {
		return nil, err
	}
	return openArchiveManifest(path, env, pub, keys)
}

// readTarManifest reads the first two entries of a tar archive, the
// manifest and its key, and verifies the manifest.
func readTarManifest(path string, tr *tar.Reader, keys []signature.Verifier) (*ArchiveManifest, error) {
	next := func(want string) ([]byte, error) {
		hdr, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("archive %s: reading %s: %w", path, want, err)
		}
		if hdr.Name != want {
			return nil, fmt.Errorf("archive %s: first entries must be %s and %s, found %q", path, ArchiveManifestName, ArchiveKeyName, hdr.Name)
		}
		if hdr.Size > maxArchiveManifest {
			return nil, fmt.Errorf("archive %s: %s is %d bytes, more than %d", path, want, hdr.Size, maxArchiveManifest)
		}
		return io.ReadAll(tr)
	}
	env, err := next(ArchiveManifestName)
	if err != nil {
		return nil, err
	}
	pub, err := next(ArchiveKeyName)
	if err != nil {
		return nil, err
	}
	return openArchiveManifest(path, env, pub, keys)
}

// emptyDir removes everything inside dir.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
