package release

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/nodeforge/builder/internal/workdir"
	"github.com/nodeforge/builder/oci"
)

// MirrorEndOptions are how the ends of a mirror are opened.
type MirrorEndOptions struct {
	Remote oci.RemoteOptions
	// ArchiveKeys pin the key an archive's seal must be made with (none:
	// the key the archive carries, which proves integrity, not origin).
	ArchiveKeys []signature.Verifier
	// Work is where an archive file is unpacked, and where the staging
	// layout of an archive file goes (default: TempDir, and beside the
	// archive).
	Work string
	// TempDir is where an archive is unpacked without Work (the command
	// gives the system's temporary directory).
	TempDir string
	Log     func(format string, args ...any)
}

// MirrorSource is a mirror's source, opened: the store to copy from and, for an
// archive, its verified manifest.
type MirrorSource struct {
	Store   oci.Store
	Archive *ArchiveManifest
	close   func()
}

// Close removes what opening the source unpacked.
func (s *MirrorSource) Close() {
	if s.close != nil {
		s.close()
	}
}

// OpenMirrorSource opens a registry (and checks that it answers), a local
// layout, or a sealed archive: a file, or a directory holding an archive
// manifest, whose seal is checked before anything in it is trusted.
func OpenMirrorSource(ctx context.Context, l oci.Location, o MirrorEndOptions) (*MirrorSource, error) {
	logf := o.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	switch l.Kind {
	case oci.KindRegistry:
		r, err := openRegistry(ctx, l, o)
		if err != nil {
			return nil, err
		}
		return &MirrorSource{Store: r}, nil
	case oci.KindLayout:
		if _, err := os.Stat(filepath.Join(l.Path, "index.json")); err != nil {
			return nil, fmt.Errorf("%s: no OCI layout or archive there", l)
		}
		if _, err := os.Stat(filepath.Join(l.Path, ArchiveManifestName)); err != nil {
			lay, err := oci.OpenLayout(l.Path)
			if err != nil {
				return nil, err
			}
			return &MirrorSource{Store: lay}, nil
		}
	}
	src := &MirrorSource{}
	work := ""
	if l.Kind == oci.KindArchive {
		// Unpacked into a locked work directory: removed when done or
		// interrupted, swept by the next import if this one is killed.
		parent := o.Work
		if parent == "" {
			parent = o.TempDir
		}
		wd, err := workdir.New(parent, "nodeforge-import-")
		if err != nil {
			return nil, err
		}
		src.close, work = func() { wd.Close() }, wd.Path
	}
	logf("verifying the archive %s", l)
	lay, m, err := OpenArchive(l.Path, l.Kind == oci.KindLayout, OpenArchiveOptions{Keys: o.ArchiveKeys, Work: work})
	if err != nil {
		src.Close()
		return nil, err
	}
	if !m.Pinned {
		logf("note: the archive's manifest is signed by a key it carries itself (%s): its integrity is checked, not its origin; pin a key with --archive-key", m.KeyID)
	}
	src.Store, src.Archive = lay, m
	return src, nil
}

// MirrorDestination is a mirror's destination, opened: a registry, or the
// staging layout of an archive, sealed once the copy is complete.
type MirrorDestination struct {
	Store oci.Store
	// Staging and Layout are the archive's staging layout, its directory
	// and the layout itself (sealed once the copy is complete); "" and nil
	// for a registry.
	Staging string
	Layout  *oci.Layout
	// Location is the destination as the user named it.
	Location oci.Location
}

// OpenMirrorDestination opens a registry (and checks that it answers), or makes
// the staging layout of an archive: the directory itself for oci:DIR (an
// earlier export's seal removed, to be written again at the end), or
// FILE.staging for oci-archive:FILE, which must not be anything but an
// earlier archive.
func OpenMirrorDestination(ctx context.Context, l oci.Location, o MirrorEndOptions) (*MirrorDestination, error) {
	var staging string
	switch l.Kind {
	case oci.KindRegistry:
		r, err := openRegistry(ctx, l, o)
		if err != nil {
			return nil, err
		}
		return &MirrorDestination{Store: r, Location: l}, nil
	case oci.KindLayout:
		staging = l.Path
		if err := os.Remove(filepath.Join(staging, ArchiveManifestName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	case oci.KindArchive:
		if err := archiveReplaceable(l.Path); err != nil {
			return nil, err
		}
		staging = l.Path + ".staging"
		if o.Work != "" {
			staging = filepath.Join(o.Work, filepath.Base(l.Path)+".staging")
		}
	}
	lay, err := oci.CreateLayout(staging)
	if err != nil {
		return nil, err
	}
	return &MirrorDestination{Store: lay, Staging: staging, Layout: lay, Location: l}, nil
}

// openRegistry opens a registry and checks that it answers as one, before
// any work.
func openRegistry(ctx context.Context, l oci.Location, o MirrorEndOptions) (*oci.Remote, error) {
	r, err := oci.NewRemote(l.Path, o.Remote)
	if err != nil {
		return nil, err
	}
	return r, r.Ping(ctx)
}

// archiveReplaceable refuses to overwrite a file (or the first part of a
// split one) that is not a mirror archive.
func archiveReplaceable(path string) error {
	for _, p := range []string{path, path + ".000"} {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		hdr, err := tar.NewReader(f).Next()
		f.Close()
		if err != nil || hdr.Name != ArchiveManifestName {
			return fmt.Errorf("%s exists and is not a mirror archive: refusing to replace it; give another file name or remove it", p)
		}
	}
	return nil
}

// Seal seals an archive's staged layout once the copy is complete and
// writes the archive (parts of partSize bytes, 0 for one file): it appears
// under its name only now. For oci:DIR the seal is written into the
// directory. A registry destination has nothing to seal.
func (d *MirrorDestination) Seal(items []Item, o SealOptions, partSize int64, logf func(string, ...any)) (*ArchiveInfo, error) {
	if d.Layout == nil {
		return nil, fmt.Errorf("%s is a registry: nothing to seal", d.Location.String())
	}
	m, err := SealArchive(d.Layout, items, o)
	if err != nil {
		return nil, err
	}
	info := m.Info(d.Location.String())
	if d.Location.Kind == oci.KindLayout {
		err = WriteArchiveDir(d.Staging, m)
	} else {
		logf("writing %s", d.Location.String())
		info.Parts, err = WriteArchiveTar(d.Location.Path, d.Staging, m, partSize)
		if err == nil {
			err = os.RemoveAll(d.Staging)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("writing %s: %w", d.Location.String(), err)
	}
	return info, nil
}
