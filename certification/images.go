package certification

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/release"
)

// ContainerImage is one container image of the release (the spec's
// images section), as published and as the build report describes it.
type ContainerImage struct {
	Name          string      `json:"name"`
	Ref           string      `json:"ref"`
	Digest        string      `json:"digest"` // the index
	Verified      bool        `json:"verified"`
	Architectures []ImageArch `json:"architectures"`
}

// ImageArch is one architecture's image of a container image.
type ImageArch struct {
	Arch     string `json:"arch"`
	Digest   string `json:"digest"` // the image manifest
	Layer    string `json:"layer"`
	Packages int    `json:"packages"`
	Files    int    `json:"files"`
	// Unpacked counts the paths of the published layer that were read
	// and compared with the build report's entries.
	Unpacked int `json:"unpacked"`
}

// containerImages fills the images section: each published container
// image's index and children (from the artifacts section) against the
// build report, and every layer read from the store (its digest checked
// as it streams), unpacked and compared path by path with the report's
// files, as the root filesystem is. It returns the paths compared.
func containerImages(ctx context.Context, st oci.Reader, r *Report, rel *auditedRelease, fail func(string, ...any)) int {
	r.Images = []ContainerImage{}
	if rel.report == nil {
		return 0
	}
	byName := map[string]*ContainerImage{}
	n := 0
	for _, a := range r.Artifacts {
		name, ok := strings.CutPrefix(a.Repository, release.RepoImage)
		if !ok {
			continue
		}
		im := byName[name]
		if im == nil {
			im = &ContainerImage{Name: name, Ref: a.Ref, Verified: true, Architectures: []ImageArch{}}
			byName[name] = im
		}
		im.Verified = im.Verified && a.Verified
		if a.Kind == "index" {
			im.Digest = a.Digest
			if want := rel.report.Images[name]; want != a.Digest {
				fail("%s: the index is %s, the build report says %q", a.Ref, a.Digest, want)
			}
			continue
		}
		ia, got := imageArch(ctx, st, a, rel.report, name, fail)
		n += got
		im.Architectures = append(im.Architectures, ia)
	}
	for _, name := range slices.Sorted(maps.Keys(rel.report.Images)) {
		if byName[name] == nil {
			fail("the build report names container image %s, which the release does not publish", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		im := byName[name]
		slices.SortFunc(im.Architectures, func(x, y ImageArch) int { return strings.Compare(x.Arch, y.Arch) })
		r.Images = append(r.Images, *im)
	}
	return n
}

// imageArch checks one architecture's image of container image name: its
// one layer is the report's, and holds the report's files.
func imageArch(ctx context.Context, st oci.Reader, a Artifact, rep *report.Report, name string, fail func(string, ...any)) (ImageArch, int) {
	_, goarch, _ := strings.Cut(a.Platform, "/")
	arch := rpmArch(rep, goarch)
	ia := ImageArch{Arch: arch, Digest: a.Digest}
	var ir *report.ImageReport
	if ar := rep.Architectures[arch]; ar != nil {
		ir = ar.Images[name]
	}
	if ir == nil {
		fail("%s: the build report has no image %s for %s", a.Ref, name, arch)
		return ia, 0
	}
	ia.Packages, ia.Files = len(ir.Packages), len(ir.Files)
	mf, err := readManifest(ctx, st, a.Repository, a.Digest)
	if err != nil {
		return ia, 0 // the artifacts section failed it already
	}
	if len(mf.Layers) != 1 {
		fail("%s: %d layers, the build made one", a.Ref, len(mf.Layers))
		return ia, 0
	}
	l := mf.Layers[0]
	ia.Layer = l.Digest.String()
	if ia.Layer != ir.Layer {
		fail("%s: layer %s, the build report says %s", a.Ref, ia.Layer, ir.Layer)
	}
	got, err := readImageLayer(ctx, st, a.Repository, a.Digest, ia.Layer, string(l.MediaType))
	if err != nil {
		fail("%s: layer %s: %v", a.Ref, ia.Layer, err)
		return ia, 0
	}
	ia.Unpacked = len(got)
	if diffs := compareTree(got, ir.Files); len(diffs) > 0 {
		fail("%s: layer %s differs from the attested build report in %d paths: %s", a.Ref, ia.Layer, len(diffs), strings.Join(diffs[:min(10, len(diffs))], "; "))
	}
	return ia, len(got)
}

// readImageLayer reads a container image's layer (a tar, gzip or zstd),
// checking its digest, and lists every path in it as the squashfs reader
// does.
func readImageLayer(ctx context.Context, st oci.Reader, repo, manifest, digest, mediaType string) (map[string]sqEntry, error) {
	rc, err := openLayer(ctx, st, repo, manifest, digest)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	sum := sha256.New()
	in := io.TeeReader(rc, sum)
	var data io.Reader
	switch {
	case strings.HasSuffix(mediaType, "+gzip"):
		zr, err := gzip.NewReader(in)
		if err != nil {
			return nil, fmt.Errorf("not gzip (damaged or tampered): %w", err)
		}
		defer zr.Close()
		data = zr
	case strings.HasSuffix(mediaType, "+zstd"):
		zr, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		data = zr
	default:
		return nil, fmt.Errorf("media type %s: not a layer the build writes", mediaType)
	}
	got, err := listTar(ctx, data)
	if _, cerr := io.Copy(io.Discard, in); err == nil {
		err = cerr
	}
	if d := "sha256:" + hex.EncodeToString(sum.Sum(nil)); d != digest {
		return nil, fmt.Errorf("read %s (damaged or tampered)", d)
	}
	return got, err
}

// listTar lists every path of a layer's tar with its content's sha256 (a
// hard link has its target's).
func listTar(ctx context.Context, r io.Reader) (map[string]sqEntry, error) {
	out := map[string]sqEntry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("tar: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p := path.Clean("/" + h.Name)
		e := sqEntry{mode: fmt.Sprintf("%04o", h.Mode&0o7777), uid: h.Uid, gid: h.Gid}
		switch h.Typeflag {
		case tar.TypeDir:
			e.typ = "dir"
		case tar.TypeSymlink:
			e.typ, e.target = "symlink", h.Linkname
		case tar.TypeLink:
			t, ok := out[path.Clean("/"+h.Linkname)]
			if !ok {
				return nil, fmt.Errorf("tar: %s links to %s, not before it", p, h.Linkname)
			}
			e.typ, e.size, e.sha256 = "file", t.size, t.sha256
		case tar.TypeReg:
			s := sha256.New()
			n, err := io.Copy(s, tr)
			if err != nil {
				return nil, fmt.Errorf("tar: %s: %w", p, err)
			}
			e.typ, e.size, e.sha256 = "file", n, hex.EncodeToString(s.Sum(nil))
		case tar.TypeChar:
			e.typ = "chardev"
		case tar.TypeBlock:
			e.typ = "blockdev"
		case tar.TypeFifo:
			e.typ = "fifo"
		default:
			return nil, fmt.Errorf("tar: %s: entry type %q", p, h.Typeflag)
		}
		out[p] = e
	}
}
