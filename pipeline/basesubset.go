package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ProtonMail/go-crypto/openpgp"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/subset"
	"github.com/nodeforge/builder/release"
)

// BaseSubsetOptions say how a release's package base subset is made.
type BaseSubsetOptions struct {
	// Spec is the release's spec (its repositories and channels).
	Spec *specs.Spec
	// Signer is the perimeter's OpenPGP key, which signs the subset's
	// regenerated indexes.
	Signer *openpgp.Entity
	// Cache holds (or fetches) the locked packages.
	Cache *cache.Cache
	// Work is where the subset is written before it is mirrored ("" is
	// the temporary directory).
	Work string
	Log  func(string, ...any)
}

// BaseSubset writes the package base subset of release version in st (the
// locked RPMs as ALT repositories with regenerated indexes, the spec and
// the lock) into a temporary directory and returns it as a file artifact,
// for release.MirrorOptions.Base; cleanup removes the directory once it is copied.
func BaseSubset(ctx context.Context, st oci.Reader, version string, o BaseSubsetOptions) (img v1.Image, cleanup func(), err error) {
	lockBytes, err := release.LockBytes(ctx, st, version)
	if err != nil {
		return nil, nil, err
	}
	l, err := lock.Parse(lockBytes, st.Ref(release.RepoLock, version))
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp(o.Work, "nodeforge-base-")
	if err != nil {
		return nil, nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if o.Log != nil {
		o.Log("writing the package base subset of %s %s", o.Spec.Name, version)
	}
	files, err := subset.Write(ctx, dir, subset.Options{Spec: o.Spec, Lock: l, LockBytes: lockBytes, Cache: o.Cache, Signer: o.Signer})
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("package base subset: %w", err)
	}
	layers := make([]oci.FileLayer, 0, len(files))
	for _, fl := range files {
		layers = append(layers, oci.FileLayer{Title: fl.Path, MediaType: subsetMediaType(fl.Kind), Path: filepath.Join(dir, filepath.FromSlash(fl.Path))})
	}
	img, err = oci.NewFileArtifact(release.BaseArtifactType, layers, map[string]string{
		"org.opencontainers.image.title":   o.Spec.Name + " " + version + " package base subset",
		"org.opencontainers.image.version": version,
	})
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return img, cleanup, nil
}

// subsetMediaType is the media type of a subset file's layer by its kind.
func subsetMediaType(kind string) string {
	switch kind {
	case "rpm":
		return "application/x-rpm"
	case "spec":
		return "application/yaml"
	case "lock":
		return "application/json"
	case "key":
		return "application/pgp-keys"
	case "readme":
		return "text/plain"
	}
	return "application/octet-stream"
}

// ExtractBaseSubset writes the package base subset artifact of release
// version in st into dir, and says how many files it wrote.
func ExtractBaseSubset(ctx context.Context, st oci.Reader, version, dir string) (int, error) {
	img, err := st.Image(ctx, release.RepoBase, version)
	if err != nil {
		return 0, fmt.Errorf("no package base subset in this mirror (mirror it with --include-base): %w", err)
	}
	files, err := oci.ExtractFiles(img, dir)
	if err != nil {
		return 0, err
	}
	return len(files), nil
}
