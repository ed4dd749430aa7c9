package factory

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/release"
)

// TalosctlPath is where a release's installer image carries talosctl
// when its spec names one (image.talosctl): in the image's first layer,
// beside usr/bin/installer, so the installer's signature covers it.
const TalosctlPath = "usr/bin/talosctl"

// TalosctlPrefix starts a talosctl download's name, upstream's:
// talosctl-linux-amd64 (the release's talosctl runs where its packages
// run: Linux, on the release's architectures).
const TalosctlPrefix = "talosctl-linux-"

// ErrNoTalosctl: the release's installer carries no talosctl.
var ErrNoTalosctl = errors.New("the release ships no talosctl binaries (image.talosctl)")

// maxTalosctl bounds the binary read into memory before it is served.
const maxTalosctl = 1 << 30

// hasTalosctl says whether arch's installer image carries talosctl,
// reading its first layer's headers once per release and architecture.
func (r *VerifiedRelease) hasTalosctl(ctx context.Context, arch string) (bool, error) {
	r.mu.Lock()
	known, ok := r.talosctl[arch]
	r.mu.Unlock()
	if ok {
		return known, nil
	}
	var err error = ErrNoTalosctl // a release without an installer has none
	if _, ok := r.Digests[release.RepoInstaller]; ok {
		_, err = r.readTalosctl(ctx, arch, false)
	}
	if err != nil && !errors.Is(err, ErrNoTalosctl) && !errors.Is(err, errNoArch) {
		return false, err
	}
	r.mu.Lock()
	if r.talosctl == nil {
		r.talosctl = map[string]bool{}
	}
	r.talosctl[arch] = err == nil
	r.mu.Unlock()
	return err == nil, nil
}

// Talosctl is arch's talosctl, from the release's installer image: read
// whole, and only returned once the layer it came from matched its
// digest; errNoTalosctl when the image has none.
func (r *VerifiedRelease) Talosctl(ctx context.Context, arch string) ([]byte, error) {
	return r.readTalosctl(ctx, arch, true)
}

// readTalosctl finds talosctl in arch's installer image's first layer;
// with data, it reads the file and checks the layer's digest.
func (r *VerifiedRelease) readTalosctl(ctx context.Context, arch string, data bool) ([]byte, error) {
	img, err := r.Image(ctx, release.RepoInstaller, arch)
	if err != nil {
		return nil, err
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	if len(layers) == 0 || len(m.Layers) == 0 {
		return nil, ErrNoTalosctl
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	vr := newVerifiedReader(rc, m.Layers[0])
	tr, err := layerTar(vr)
	if err != nil {
		return nil, fmt.Errorf("installer layer %s: %w", m.Layers[0].Digest, err)
	}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, ErrNoTalosctl
		}
		if err != nil {
			return nil, fmt.Errorf("installer layer %s: %w", m.Layers[0].Digest, err)
		}
		if h.Typeflag != tar.TypeReg || path.Clean(strings.TrimPrefix(h.Name, "./")) != TalosctlPath {
			continue
		}
		if !data {
			return nil, nil
		}
		if h.Size > maxTalosctl {
			return nil, fmt.Errorf("installer layer %s: %s is %d bytes, more than %d", m.Layers[0].Digest, TalosctlPath, h.Size, maxTalosctl)
		}
		b := make([]byte, h.Size)
		if _, err := io.ReadFull(tr, b); err != nil {
			return nil, fmt.Errorf("installer layer %s: %w", m.Layers[0].Digest, err)
		}
		// The rest of the layer, so that its digest is checked before a
		// byte is served.
		if _, err := io.Copy(io.Discard, vr); err != nil {
			return nil, err
		}
		return b, nil
	}
}

// layerTar reads a layer's tar, gzip-compressed or not.
func layerTar(r io.Reader) (*tar.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(2)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		return tar.NewReader(zr), nil
	}
	return tar.NewReader(br), nil
}

// TalosctlArches are the architectures (Go's names) whose installer
// carries talosctl, in the release's order.
func (r *VerifiedRelease) TalosctlArches(ctx context.Context) ([]string, error) {
	var out []string
	for _, arch := range r.Params.Architectures {
		ok, err := r.hasTalosctl(ctx, arch)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, specs.GoArch(arch))
		}
	}
	return out, nil
}
