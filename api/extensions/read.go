package extensions

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// maxManifest bounds the manifest.yaml read from an image.
const maxManifest = 1 << 20

// ReadDir lists an extension laid out as a directory (manifest.yaml and
// rootfs/) and returns its manifest (nil when absent).
func ReadDir(dir string) ([]Entry, []byte, error) {
	var es []Entry
	var manifest []byte
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := Entry{Path: filepath.ToSlash(rel), Mode: uint32(fi.Mode().Perm())}
		if fi.Mode()&fs.ModeSetuid != 0 {
			e.Mode |= 0o4000
		}
		if fi.Mode()&fs.ModeSetgid != 0 {
			e.Mode |= 0o2000
		}
		if fi.Mode()&fs.ModeSticky != 0 {
			e.Mode |= 0o1000
		}
		switch m := fi.Mode(); {
		case m.IsRegular():
			e.Type = TypeFile
		case m.IsDir():
			e.Type = TypeDir
		case m&fs.ModeSymlink != 0:
			e.Type = TypeSymlink
		case m&fs.ModeCharDevice != 0:
			e.Type = TypeCharDev
		case m&fs.ModeDevice != 0:
			e.Type = TypeBlockDev
		case m&fs.ModeNamedPipe != 0:
			e.Type = TypeFifo
		default:
			e.Type = TypeSocket
		}
		if e.Path == "manifest.yaml" && e.Type == TypeFile {
			if fi.Size() > maxManifest {
				return fmt.Errorf("manifest.yaml is %d bytes, more than %d", fi.Size(), maxManifest)
			}
			if manifest, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		es = append(es, e)
		return nil
	})
	return es, manifest, err
}

// ReadTar lists an extension's filesystem from a tar stream (a flattened
// image).
func ReadTar(r io.Reader) ([]Entry, []byte, error) {
	tr := tar.NewReader(r)
	var es []Entry
	var manifest []byte
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return es, manifest, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading the image's files: %w", err)
		}
		e := Entry{Path: h.Name, Mode: uint32(h.Mode) & 0o7777}
		switch h.Typeflag {
		case tar.TypeReg:
			e.Type = TypeFile
		case tar.TypeDir:
			e.Type = TypeDir
		case tar.TypeSymlink:
			e.Type = TypeSymlink
		case tar.TypeLink:
			e.Type = TypeHardlink
		case tar.TypeChar:
			e.Type = TypeCharDev
		case tar.TypeBlock:
			e.Type = TypeBlockDev
		case tar.TypeFifo:
			e.Type = TypeFifo
		default:
			return nil, nil, fmt.Errorf("%s: tar entry type %q", h.Name, h.Typeflag)
		}
		if p := trimDot(h.Name); p == "manifest.yaml" && e.Type == TypeFile {
			if h.Size > maxManifest {
				return nil, nil, fmt.Errorf("manifest.yaml is %d bytes, more than %d", h.Size, maxManifest)
			}
			if manifest, err = io.ReadAll(io.LimitReader(tr, maxManifest)); err != nil {
				return nil, nil, err
			}
		}
		es = append(es, e)
	}
}

func trimDot(p string) string {
	for len(p) > 2 && p[:2] == "./" {
		p = p[2:]
	}
	return p
}

// Result is the validation of one image (one platform of an index).
type Result struct {
	Image      string    `json:"image"` // platform or directory
	Manifest   *Manifest `json:"manifest,omitempty"`
	Violations []string  `json:"violations"`
	// Hints say how to mend them (not counted as violations).
	Hints []string `json:"hints"`
}

// ValidatePath validates an extension directory (manifest.yaml and
// rootfs/) or an OCI image layout (every image of its index).
func ValidatePath(p string) ([]Result, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: want a directory (an extension's manifest.yaml and rootfs/, or an OCI image layout)", p)
	}
	if _, err := os.Stat(filepath.Join(p, "oci-layout")); err != nil {
		es, man, err := ReadDir(p)
		if err != nil {
			return nil, err
		}
		return []Result{result(p, es, man)}, nil
	}
	idx, err := layout.ImageIndexFromPath(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	var out []Result
	for _, d := range im.Manifests {
		name := d.Digest.String()
		if d.Platform != nil {
			name = d.Platform.OS + "/" + d.Platform.Architecture + " " + name
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", p, name, err)
		}
		rc := mutate.Extract(img)
		es, man, err := ReadTar(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", p, name, err)
		}
		out = append(out, result(name, es, man))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: the index holds no image", p)
	}
	return out, nil
}

func result(name string, es []Entry, man []byte) Result {
	r := Result{Image: name, Violations: Validate(es, man)}
	if r.Violations == nil {
		r.Violations = []string{} // a list, never null
	}
	r.Hints = Hints(r.Violations)
	if man != nil {
		r.Manifest, _ = ParseManifest(man)
	}
	return r
}
