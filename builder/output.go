package builder

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/internal/direntries"
	"github.com/nodeforge/builder/internal/ocilayout"
)

// ResolveOutput says where a build to out may go, or why it may not: a
// build replaces its output directory as a whole, so out must be missing,
// an empty directory, or the output of an earlier build (recognised by its
// report.json) holding nothing, at any depth, that the build did not
// write. A symlink is followed: its target is replaced, never the link.
// Anything else is refused with a message naming what is there.
func ResolveOutput(out string) (string, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	if fi, err := os.Lstat(abs); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return "", fmt.Errorf("--out %s is a symlink to something that does not exist (%v): give a directory", out, err)
		}
		abs = target
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return abs, nil
	}
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("--out %s is a file: a build writes a directory and will not replace a file; give a missing or empty directory", out)
	}
	ents, err := os.ReadDir(abs)
	if err != nil {
		return "", err
	}
	if len(ents) == 0 {
		return abs, nil
	}
	rep, err := readOutputReport(filepath.Join(abs, "report.json"))
	if err != nil {
		return "", fmt.Errorf("--out %s holds %s and is not a build output (%v): a build replaces its output directory as a whole, so it refuses one with other files; give a missing or empty directory, or an earlier build's output", out, direntries.Describe(ents), err)
	}
	// Only manifests are read (index.json leads to the blobs): a few small
	// local files, not worth a caller's context.
	foreign, err := rep.foreign(context.Background(), abs)
	if err != nil {
		return "", fmt.Errorf("--out %s is an earlier build's output, but %v: what the build wrote there cannot be told from the rest, so it is not replaced; move it away or give another directory", out, err)
	}
	if len(foreign) > 0 {
		return "", fmt.Errorf("--out %s is an earlier build's output, but it also holds %s, which the build did not write: refusing to replace it; move them away or give another directory", out, direntries.DescribeNames(foreign))
	}
	return abs, nil
}

// outputReport is what ResolveOutput reads of a build report: enough to
// name every file the build wrote (the architectures' file lists, the
// bulk of a report, are skipped).
type outputReport struct {
	Spec       *report.SpecInfo               `json:"spec"`
	LockSHA256 string                         `json:"lockSha256"`
	OCIIndex   string                         `json:"ociIndex"`
	Installer  string                         `json:"installer"`
	Extensions map[string]string              `json:"extensions"`
	Images     map[string]string              `json:"images"`
	Artifacts  map[string]report.ArtifactInfo `json:"artifacts"`
	Media      *report.MediaReport            `json:"media"`
}

// readOutputReport reads the report of the build that wrote an output.
func readOutputReport(file string) (*outputReport, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errors.New("no report.json")
	}
	if err != nil {
		return nil, err
	}
	var r outputReport
	if err := json.Unmarshal(b, &r); err != nil || r.Spec == nil || r.LockSHA256 == "" {
		return nil, errors.New("its report.json is not a build report")
	}
	return &r, nil
}

// layouts are the OCI layouts the build wrote, directory (relative to the
// output) to the digest of its index.json.
func (r *outputReport) layouts() map[string]string {
	l := map[string]string{"oci": r.OCIIndex, "installer": r.Installer}
	for name, d := range r.Extensions {
		l[path.Join("extensions", name)] = d
	}
	for name, d := range r.Images {
		l[ImagesDir(name)] = d
	}
	if m := r.Media; m != nil {
		l[MediaInstallerDir(m.Schematic, false)] = m.Installer
		if m.SecureBoot != nil {
			l[MediaInstallerDir(m.Schematic, true)] = m.SecureBoot.Installer
		}
	}
	return l
}

// MediaInstallerDir is the OCI layout of a schematic's installer (the
// Secure Boot one with secureBoot) in a build's output, slash-separated:
// media/<schematic id>/installer[-secureboot]. The build writes it there,
// and an earlier output is checked for it there.
func MediaInstallerDir(schematicID string, secureBoot bool) string {
	name := "installer"
	if secureBoot {
		name += compose.SecureBootSuffix
	}
	return path.Join("media", schematicID, name)
}

// foreign lists what is under out that the build of r did not write, as
// direntries.Unlisted does. The build wrote report.json, the files of its
// artifacts and media, and its OCI layouts: oci-layout, the index.json the
// report names and the blobs that index leads to.
func (r *outputReport) foreign(ctx context.Context, out string) ([]string, error) {
	files := map[string]bool{"report.json": true}
	dirs := map[string]bool{}
	for name := range r.Artifacts {
		files[name] = true
	}
	if r.Media != nil {
		for name := range r.Media.Files {
			files[name] = true
		}
	}
	for dir, want := range r.layouts() {
		if want == "" {
			continue
		}
		lf, err := layoutFiles(ctx, out, dir, want)
		if err != nil {
			return nil, err
		}
		for f := range lf {
			files[path.Join(dir, f)] = true
		}
		dirs[path.Join(dir, "blobs", "sha256")] = true
	}
	return direntries.Unlisted(out, files, dirs)
}

// layoutFiles lists the files of the layout dir (relative to out) the
// build wrote, its index.json the report's want. Without that index.json
// (changed, or removed with blobs left) which blobs are the build's cannot
// be told: an error.
func layoutFiles(ctx context.Context, out, dir, want string) (map[string]bool, error) {
	abs := filepath.Join(out, filepath.FromSlash(dir))
	index := path.Join(dir, ocilayout.IndexFile)
	raw, err := os.ReadFile(filepath.Join(abs, ocilayout.IndexFile))
	if errors.Is(err, fs.ErrNotExist) {
		if ents, _ := os.ReadDir(filepath.Join(abs, "blobs", "sha256")); len(ents) > 0 {
			return nil, fmt.Errorf("%s is gone, but %d blobs beside it are not", index, len(ents))
		}
		return map[string]bool{ocilayout.LayoutFile: true}, nil
	}
	if err != nil {
		return nil, err
	}
	if h, _, err := v1.SHA256(bytes.NewReader(raw)); err != nil || h.String() != want {
		return nil, fmt.Errorf("%s is not the index the build wrote (%v, its report names %s)", index, h, want)
	}
	d, err := ocilayout.Open(abs)
	if err != nil {
		return nil, err
	}
	return d.Files(ctx)
}
