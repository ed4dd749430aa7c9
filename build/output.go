package build

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/internal/direntries"
)

// outputNames are the top-level entries a build writes besides one
// directory per architecture.
var outputNames = []string{"report.json", "oci", "installer", "extensions", "media"}

// ResolveOutput says where a build to out may go, or why it may not: a
// build replaces its output directory as a whole, so out must be missing,
// an empty directory, or the output of an earlier build (recognised by its
// report.json, with nothing beside what a build writes). A symlink is
// followed: its target is replaced, never the link. Anything else is
// refused with a message naming what is there.
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
	arches, err := reportArches(filepath.Join(abs, "report.json"))
	if err != nil {
		return "", fmt.Errorf("--out %s holds %s and is not a build output (%v): a build replaces its output directory as a whole, so it refuses one with other files; give a missing or empty directory, or an earlier build's output", out, direntries.Describe(ents), err)
	}
	var foreign []fs.DirEntry
	for _, e := range ents {
		if !slices.Contains(outputNames, e.Name()) && !slices.Contains(arches, e.Name()) {
			foreign = append(foreign, e)
		}
	}
	if len(foreign) > 0 {
		return "", fmt.Errorf("--out %s is an earlier build's output, but it also holds %s, which a build does not write: refusing to replace it; move them away or give another directory", out, direntries.Describe(foreign))
	}
	return abs, nil
}

// reportArches reads the architectures of a build report.
func reportArches(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errors.New("no report.json")
	}
	if err != nil {
		return nil, err
	}
	var r struct {
		Spec          *report.SpecInfo           `json:"spec"`
		LockSHA256    string                     `json:"lockSha256"`
		Architectures map[string]json.RawMessage `json:"architectures"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Spec == nil || r.LockSHA256 == "" {
		return nil, errors.New("its report.json is not a build report")
	}
	var out []string
	for a := range r.Architectures {
		out = append(out, a)
	}
	return out, nil
}
