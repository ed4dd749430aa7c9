package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	ocilayout "github.com/nodeforge/builder/internal/ocilayout"
)

// BlobChecker reads every blob of the manifests it is given, once each,
// and names each one that is missing or does not match its descriptor: a
// release is vouched for only after every byte of it was read.
type BlobChecker struct {
	st   Reader
	repo string
	seen map[v1.Hash]bool
}

// NewBlobChecker returns a checker of repo in st, for a verifier that
// reads every byte of what it vouches for.
func NewBlobChecker(st Reader, repo string) *BlobChecker {
	return &BlobChecker{st: st, repo: repo, seen: map[v1.Hash]bool{}}
}

// Check reads the manifest desc names and everything below it: an index's
// children, an image's config and layers. It returns the problems found.
// A nil checker checks nothing.
func (b *BlobChecker) Check(ctx context.Context, desc v1.Descriptor) []string {
	if b == nil || b.seen[desc.Digest] {
		return nil
	}
	b.seen[desc.Digest] = true
	name := b.st.Ref(b.repo, desc.Digest.String())
	if err := ctx.Err(); err != nil {
		return []string{fmt.Sprintf("%s: %v", name, err)}
	}
	if desc.MediaType.IsIndex() {
		idx, err := b.st.Index(ctx, b.repo, desc.Digest.String())
		if err != nil {
			return []string{fmt.Sprintf("%s: index: %s", name, blobReason(err))}
		}
		raw, err := idx.RawManifest()
		if p := digestProblem(name, "index", desc, raw, err); p != "" {
			return []string{p}
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return []string{fmt.Sprintf("%s: index: %v", name, err)}
		}
		var out []string
		for _, c := range m.Manifests {
			out = append(out, b.Check(ctx, c)...)
		}
		return out
	}
	img, err := b.st.Image(ctx, b.repo, desc.Digest.String())
	if err != nil {
		return []string{fmt.Sprintf("%s: manifest: %s", name, blobReason(err))}
	}
	raw, err := img.RawManifest()
	if p := digestProblem(name, "manifest", desc, raw, err); p != "" {
		return []string{p}
	}
	m, err := img.Manifest()
	if err != nil {
		return []string{fmt.Sprintf("%s: manifest: %v", name, err)}
	}
	var out []string
	cfg, err := img.RawConfigFile()
	if p := digestProblem(name, "config", m.Config, cfg, err); p != "" {
		out = append(out, p)
	}
	for _, ld := range m.Layers {
		if err := readLayer(img, ld); err != nil {
			out = append(out, fmt.Sprintf("%s: layer %s (%d bytes): %s", name, ld.Digest, ld.Size, blobReason(err)))
		}
	}
	return out
}

// readLayer reads one layer through and checks its size and digest (the
// store's reader checks too; this does not depend on it).
func readLayer(img v1.Image, d v1.Descriptor) error {
	l, err := img.LayerByDigest(d.Digest)
	if err != nil {
		return err
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(rc, d.Size+1))
	if err != nil {
		return err
	}
	if n != d.Size {
		return fmt.Errorf("%d bytes read, the manifest says %d", n, d.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != d.Digest.Hex {
		return fmt.Errorf("content hashes to sha256:%s (damaged or tampered)", got)
	}
	return nil
}

// digestProblem checks bytes read for a descriptor.
func digestProblem(name, kind string, d v1.Descriptor, b []byte, err error) string {
	if err != nil {
		return fmt.Sprintf("%s: %s %s: %s", name, kind, d.Digest, blobReason(err))
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != d.Digest.Hex {
		return fmt.Sprintf("%s: %s %s: content hashes to sha256:%s (damaged or tampered)", name, kind, d.Digest, got)
	}
	if d.Size > 0 && int64(len(b)) != d.Size {
		return fmt.Sprintf("%s: %s %s: %d bytes, its descriptor says %d", name, kind, d.Digest, len(b), d.Size)
	}
	return ""
}

// blobReason shortens a layout's blob error to its reason (the caller
// names the blob already).
func blobReason(err error) string {
	var be *ocilayout.BlobError
	if errors.As(err, &be) {
		return fmt.Sprintf("blob %s %s", be.Digest, be.Reason)
	}
	return err.Error()
}
