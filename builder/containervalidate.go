package builder

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/api/target"
	"github.com/nodeforge/builder/builder/rootfs"
)

// ValidateOptions say what an image of ValidateLayout may hold beyond
// the checks.
type ValidateOptions struct {
	// Arch selects the images of one architecture (amd64 or x86_64);
	// default every image of the layout.
	Arch string
	// Setuid are the paths allowed to keep setuid/setgid bits.
	Setuid []string
	// Paths are paths the image's consumers expect (a spec's links:
	// /usr/local/bin/etcd); each must resolve inside the image.
	Paths []string
}

// ValidatedImage is one image ValidateLayout checked.
type ValidatedImage struct {
	Platform string // linux/amd64
	Digest   string // the manifest's
	Files    int    // paths of the merged layers
	Program  string // the entrypoint's (or cmd's) program
}

// ValidateLayout applies the build's container checks (checkContainer)
// to every image of an OCI layout, whoever made it: its layers merged as
// a runtime merges them (whiteouts and opaque directories), the
// entrypoint (or cmd) and the health check's program present, executable
// and code for the image's architecture, their ELF interpreter and
// DT_NEEDED libraries found as the dynamic loader would (the directories
// of the ld.so.cache ldconfig would write from the image's ld.so.conf,
// when the image has a cache), the config's user in the image's passwd,
// no setuid/setgid file but those allowed, and the expected paths there.
// The error lists every problem of every image, each naming the image's
// platform, the file and the layer it came from.
func ValidateLayout(dir string, o ValidateOptions) ([]ValidatedImage, error) {
	if _, err := os.Stat(filepath.Join(dir, "index.json")); errors.Is(err, fs.ErrNotExist) {
		if _, derr := os.Stat(dir); derr != nil {
			return nil, fmt.Errorf("%s: %w", dir, derr)
		}
		return nil, fmt.Errorf("%s: not an OCI layout (no index.json)", dir)
	}
	var out []ValidatedImage
	var bad []string
	idx, err := layout.ImageIndexFromPath(dir)
	if err == nil {
		err = validateIndex(idx, o, &out, &bad)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("%s: %s", dir, strings.Join(bad, "\n"))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no image for architecture %q", dir, o.Arch)
	}
	return out, nil
}

// validateIndex checks the images of an index (and of the indexes it
// holds), skipping what is not an image of an OS (attestations).
func validateIndex(idx v1.ImageIndex, o ValidateOptions, out *[]ValidatedImage, bad *[]string) error {
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range m.Manifests {
		if d.MediaType.IsIndex() {
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return err
			}
			if err := validateIndex(child, o, out, bad); err != nil {
				return err
			}
			continue
		}
		if !d.MediaType.IsImage() || (d.Platform != nil && d.Platform.OS == "unknown") {
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		v, problems, err := validateImage(img, o)
		if err != nil {
			return fmt.Errorf("image %s: %w", d.Digest, err)
		}
		if v == nil {
			continue // another architecture
		}
		v.Digest = d.Digest.String()
		for _, p := range problems {
			*bad = append(*bad, fmt.Sprintf("%s (%s): %s", v.Platform, d.Digest.Hex[:12], p))
		}
		*out = append(*out, *v)
	}
	return nil
}

// validateImage checks one image; nil when it is not of o.Arch.
func validateImage(img v1.Image, o ValidateOptions) (*ValidatedImage, []string, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, nil, err
	}
	a, err := target.Lookup(cf.Architecture)
	if err != nil {
		return nil, nil, fmt.Errorf("architecture %q: %w", cf.Architecture, err)
	}
	if o.Arch != "" && o.Arch != a.RPM && o.Arch != a.OCI {
		return nil, nil, nil
	}
	t, err := mergeLayers(img)
	if err != nil {
		return nil, nil, err
	}
	v := &ValidatedImage{Platform: cf.OS + "/" + cf.Architecture, Files: t.Len()}
	im, problems := configImage(cf.Config)
	if len(im.Entrypoint) > 0 {
		v.Program = im.Entrypoint[0]
	} else if len(im.Cmd) > 0 {
		v.Program = im.Cmd[0]
	}
	var libs []string
	if t.Get("/etc/ld.so.cache") != nil {
		if _, libs, err = t.LdSoCache(rootfs.LdCacheOptions{Arch: a.RPM}); err != nil {
			problems = append(problems, fmt.Sprintf("/etc/ld.so.conf: %v", err))
		}
	}
	acc, err := imageAccounts(t)
	if err != nil {
		problems = append(problems, err.Error())
	}
	if v.Program != "" && acc != nil {
		if err := checkContainer(t, acc, im, libs, a.Machines()); err != nil {
			problems = append(problems, strings.TrimPrefix(err.Error(), "the image would not run: "))
		}
	}
	return v, append(problems, imagePaths(t, o)...), nil
}

// configImage is the part of an image's config the checks read, as a
// spec's image says it; and what is wrong with the config itself.
func configImage(c v1.Config) (specs.ContainerImage, []string) {
	im := specs.ContainerImage{Entrypoint: c.Entrypoint, Cmd: c.Cmd, User: c.User, Env: map[string]string{}}
	var problems []string
	if len(c.Entrypoint) == 0 && len(c.Cmd) == 0 {
		problems = append(problems, "the config names no entrypoint and no cmd: nothing to run")
	}
	for _, e := range c.Env {
		if k, v, ok := strings.Cut(e, "="); ok {
			im.Env[k] = v
		}
	}
	if h := c.Healthcheck; h != nil && len(h.Test) > 1 {
		switch h.Test[0] {
		case "CMD":
			im.Healthcheck = &specs.Healthcheck{Command: h.Test[1:]}
		case "CMD-SHELL":
			im.Healthcheck = &specs.Healthcheck{Command: []string{"/bin/sh"}}
		}
	}
	if im.Healthcheck != nil && !path.IsAbs(im.Healthcheck.Command[0]) {
		problems = append(problems, fmt.Sprintf("healthcheck %q: not an absolute path (the runtime does not search PATH for it)", im.Healthcheck.Command[0]))
		im.Healthcheck = nil
	}
	argv, what := c.Entrypoint, "entrypoint"
	if len(argv) == 0 {
		argv, what = c.Cmd, "cmd" // no entrypoint: the cmd's first item is the program
	}
	if len(argv) > 0 && !path.IsAbs(argv[0]) {
		problems = append(problems, fmt.Sprintf("%s %q is not an absolute path (the runtime would search PATH): name the file", what, argv[0]))
	}
	return im, problems
}

// imageAccounts reads the image's /etc/passwd and /etc/group.
func imageAccounts(t *rootfs.Tree) (*rootfs.Accounts, error) {
	var files [2][]byte
	for i, p := range []string{"/etc/passwd", "/etc/group"} {
		if _, n := t.Resolve(p); n != nil && n.Kind == rootfs.KindFile {
			files[i] = n.Data
		}
	}
	acc, err := rootfs.ParseAccounts(files[0], files[1])
	if err != nil {
		return nil, fmt.Errorf("/etc/passwd, /etc/group: %w", err)
	}
	return acc, nil
}

// imagePaths checks the setuid files and the expected paths.
func imagePaths(t *rootfs.Tree, o ValidateOptions) []string {
	var problems []string
	for _, n := range t.Nodes() {
		if n.Kind != rootfs.KindSymlink && n.Mode&0o6000 != 0 && !slices.Contains(o.Setuid, n.Path) {
			problems = append(problems, fmt.Sprintf("%s is setuid/setgid (mode %04o) from %s (allow it with --allow-setuid %s)", n.Path, n.Mode, n.Origin, n.Path))
		}
	}
	for _, p := range o.Paths {
		if _, n := t.Resolve(p); n == nil {
			problems = append(problems, fmt.Sprintf("%s is not in the image (or is a link to nothing there)", p))
		}
	}
	return problems
}

// mergeLayers lays the image's layers in order into one tree, each file's
// origin its layer.
func mergeLayers(img v1.Image) (*rootfs.Tree, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	t := rootfs.New()
	for i, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, err
		}
		origin := report.Origin{Package: fmt.Sprintf("layer %d (%s)", i+1, d.Hex[:12])}
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", origin.Package, err)
		}
		err = applyLayer(t, rc, origin)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", origin.Package, err)
		}
	}
	return t, nil
}

// applyLayer applies one layer's tar to the tree as a runtime does: an
// entry replaces what was at its path, .wh.NAME removes NAME, and
// .wh..wh..opq hides what the lower layers have in its directory.
func applyLayer(t *rootfs.Tree, r io.Reader, origin report.Origin) error {
	tr := tar.NewReader(r)
	added := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tar: %w", err)
		}
		p := path.Clean("/" + h.Name)
		dir, base := path.Dir(p), path.Base(p)
		switch {
		case p == "/":
			continue
		case base == ".wh..wh..opq":
			for _, q := range t.Paths() {
				if strings.HasPrefix(q, strings.TrimSuffix(dir, "/")+"/") && !added[q] {
					t.Remove(q)
				}
			}
			continue
		case strings.HasPrefix(base, ".wh."):
			t.Remove(path.Join(dir, strings.TrimPrefix(base, ".wh.")))
			continue
		}
		n, err := layerNode(t, h, tr, p)
		if err != nil {
			return err
		}
		n.Origin = origin
		if old := t.Get(p); old != nil && (old.Kind != rootfs.KindDir || n.Kind != rootfs.KindDir) {
			t.Remove(p)
		}
		if err := t.Replace(n); err != nil {
			return err
		}
		added[p] = true
	}
}

// layerNode is the node of one tar entry.
func layerNode(t *rootfs.Tree, h *tar.Header, r io.Reader, p string) (*rootfs.Node, error) {
	n := &rootfs.Node{Path: p, Mode: uint32(h.Mode) & 0o7777, User: strconv.Itoa(h.Uid), Group: strconv.Itoa(h.Gid)}
	switch h.Typeflag {
	case tar.TypeDir:
		n.Kind = rootfs.KindDir
	case tar.TypeReg:
		n.Kind, n.Data = rootfs.KindFile, make([]byte, h.Size)
		if _, err := io.ReadFull(r, n.Data); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	case tar.TypeLink:
		to := t.Get(path.Clean("/" + h.Linkname))
		if to == nil || to.Kind != rootfs.KindFile {
			return nil, fmt.Errorf("%s: a hard link to %s, which is not a file before it", p, h.Linkname)
		}
		n.Kind, n.Data, n.Mode = rootfs.KindFile, to.Data, to.Mode
	case tar.TypeSymlink:
		n.Kind, n.Target = rootfs.KindSymlink, h.Linkname
	case tar.TypeChar:
		n.Kind = rootfs.KindCharDev
	case tar.TypeBlock:
		n.Kind = rootfs.KindBlockDev
	case tar.TypeFifo:
		n.Kind = rootfs.KindFifo
	default:
		return nil, fmt.Errorf("%s: tar entry type %q", p, h.Typeflag)
	}
	return n, nil
}
