package certification

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	squashfslow "github.com/CalebQ42/squashfs/low"
	"github.com/CalebQ42/squashfs/low/inode"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/release"
)

// SizeReport says where a release's bytes go: each artifact that holds
// files (the root filesystem, the initramfs, each extension's tree, each
// container image) by package and by directory, installed and, for a
// squashfs image, as stored in it.
type SizeReport struct {
	Source    string         `json:"source"`
	Artifacts []SizeArtifact `json:"artifacts"`
}

// SizeArtifact is one artifact's size picture.
type SizeArtifact struct {
	Name      string `json:"name"` // "<arch>/rootfs.sqsh", "<arch>/extensions/<name>", "<arch>/images/<name>"
	Files     int    `json:"files"`
	Installed int64  `json:"installed"` // the bytes of its regular files
	// Squashfs is the size of the image's data (file blocks and
	// fragments, what the per-file squashfs bytes sum to); Image is the
	// whole image file with its metadata. Both 0 when not a squashfs or
	// not read.
	Squashfs  int64               `json:"squashfs"`
	Image     int64               `json:"image"`
	ByPackage []SizeRow           `json:"byPackage"`
	ByDir     []SizeRow           `json:"byDir"`
	Largest   []SizeFile          `json:"largest"`
	Dropped   []report.DropResult `json:"dropped"` // what each drop rule saved (the root filesystem)
}

// SizeRow is the bytes of a package or a directory.
type SizeRow struct {
	Name      string `json:"name"` // a NEVRA, a generator ("generator:passwd") or a directory
	Files     int    `json:"files"`
	Installed int64  `json:"installed"`
	Squashfs  int64  `json:"squashfs"`
}

// SizeFile is one file.
type SizeFile struct {
	Path      string `json:"path"`
	Origin    string `json:"origin"`
	Installed int64  `json:"installed"`
	Squashfs  int64  `json:"squashfs"`
}

// SizeOptions shape a size report.
type SizeOptions struct {
	Top   int // rows per list (the rest summed in one "(others)" row); 0: all
	Depth int // path components that name a directory (default 2: /usr/lib)
	// Squashfs opens the squashfs image of an artifact by name, or gives
	// nil when there is none to read.
	Squashfs func(name string) (io.ReaderAt, int64, error)
}

// Sizes makes the size report of a build from its report (and its
// squashfs images when opts.Squashfs gives them).
func Sizes(ctx context.Context, source string, rep *report.Report, opts SizeOptions) (*SizeReport, error) {
	if opts.Depth <= 0 {
		opts.Depth = 2
	}
	out := &SizeReport{Source: source, Artifacts: []SizeArtifact{}}
	groups := map[string][]File{}
	for _, f := range reportFiles(rep) {
		n := groupArtifact(f.Artifact)
		groups[n] = append(groups[n], f)
	}
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		a := SizeArtifact{Name: name, Dropped: []report.DropResult{}}
		var stored map[string]int64
		if opts.Squashfs != nil {
			img, size, err := opts.Squashfs(name)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if img != nil {
				if stored, a.Squashfs, err = squashfsFileBytes(ctx, img); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				a.Image = size
			}
		}
		if arch, ok := strings.CutSuffix(name, "/rootfs.sqsh"); ok && rep.Architectures[arch] != nil && rep.Architectures[arch].Dropped != nil {
			a.Dropped = rep.Architectures[arch].Dropped
		}
		fillSizes(&a, groups[name], stored, opts)
		out.Artifacts = append(out.Artifacts, a)
	}
	return out, nil
}

// fillSizes sums an artifact's files by package and by directory.
func fillSizes(a *SizeArtifact, files []File, stored map[string]int64, opts SizeOptions) {
	byPkg, byDir := map[string]*SizeRow{}, map[string]*SizeRow{}
	var largest []SizeFile
	add := func(m map[string]*SizeRow, key string, installed, sq int64) {
		r := m[key]
		if r == nil {
			r = &SizeRow{Name: key}
			m[key] = r
		}
		r.Files++
		r.Installed += installed
		r.Squashfs += sq
	}
	for _, f := range files {
		if f.Type != "file" {
			continue
		}
		origin := f.Package
		if origin == "" {
			origin = "generator:" + f.Generator
		}
		sq := stored[f.Path]
		a.Files++
		a.Installed += f.Size
		add(byPkg, origin, f.Size, sq)
		add(byDir, dirOf(f.Path, opts.Depth), f.Size, sq)
		largest = append(largest, SizeFile{Path: f.Path, Origin: origin, Installed: f.Size, Squashfs: sq})
	}
	a.ByPackage, a.ByDir = topRows(byPkg, opts.Top), topRows(byDir, opts.Top)
	slices.SortFunc(largest, func(x, y SizeFile) int {
		return cmp.Or(cmp.Compare(y.Installed, x.Installed), strings.Compare(x.Path, y.Path))
	})
	n := opts.Top
	if n <= 0 || n > 20 {
		n = 20
	}
	a.Largest = append([]SizeFile{}, largest[:min(n, len(largest))]...)
}

// dirOf is the directory of the first depth components of p: "/usr/lib"
// for /usr/lib/x/y at depth 2; a file above that depth counts under its
// own directory.
func dirOf(p string, depth int) string {
	parts := strings.Split(strings.Trim(path.Dir(p), "/"), "/")
	if len(parts) > depth {
		parts = parts[:depth]
	}
	return "/" + strings.Join(parts, "/")
}

// topRows sorts rows by installed bytes, largest first, and keeps the top
// n with the rest summed into one "(others)" row, so every list sums to
// the artifact's totals.
func topRows(m map[string]*SizeRow, n int) []SizeRow {
	rows := make([]SizeRow, 0, len(m))
	for _, r := range m {
		rows = append(rows, *r)
	}
	slices.SortFunc(rows, func(x, y SizeRow) int {
		return cmp.Or(cmp.Compare(y.Installed, x.Installed), strings.Compare(x.Name, y.Name))
	})
	if n <= 0 || len(rows) <= n {
		return rows
	}
	rest := SizeRow{Name: "(others)"}
	for _, r := range rows[n:] {
		rest.Files += r.Files
		rest.Installed += r.Installed
		rest.Squashfs += r.Squashfs
	}
	return append(rows[:n:n], rest)
}

// squashfsFileBytes gives each regular file of a squashfs image the bytes
// it takes in the image's data: its own blocks as stored, and its share
// of the fragment blocks in proportion to its tail. Files that share
// blocks (hard links, deduplicated contents) are counted once, under the
// first path in walk order. The data size is everything between the
// superblock and the inode table, so the per-file bytes sum to it.
func squashfsFileBytes(ctx context.Context, img io.ReaderAt) (map[string]int64, int64, error) {
	sq, err := squashfslow.NewReader(img)
	if err != nil {
		return nil, 0, fmt.Errorf("not a squashfs image: %w", err)
	}
	sb := sq.Superblock
	const superblockSize = 96
	dataSize := int64(sb.InodeTableStart) - superblockSize
	if dataSize < 0 {
		return nil, 0, fmt.Errorf("inode table at %d, inside the superblock", sb.InodeTableStart)
	}
	type extent struct {
		start uint64
		frag  uint32
		off   uint32
		size  uint64
	}
	own, tails := map[string]int64{}, map[string]int64{}
	seen := map[extent]bool{}
	var blocks, tailTotal int64
	// The directory tree through the low-level reader: each inode is read
	// from its directory entry, not found again by its path.
	var walk func(dir squashfslow.Directory, prefix string, depth int) error
	walk = func(dir squashfslow.Directory, prefix string, depth int) error {
		if depth > 256 {
			return errors.New("directories nested deeper than 256")
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, ent := range dir.Entries {
			b, err := sq.BaseFromEntry(ent)
			if err != nil {
				return fmt.Errorf("%s/%s: %w", prefix, ent.Name, err)
			}
			name := prefix + "/" + ent.Name
			if b.IsDir() {
				sub, err := b.ToDir(sq)
				if err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
				if err := walk(sub, name, depth+1); err != nil {
					return err
				}
				continue
			}
			var e extent
			var sizes []uint32
			switch in := b.Inode.Data.(type) {
			case inode.File:
				e, sizes = extent{uint64(in.BlockStart), in.FragInd, in.FragOffset, uint64(in.Size)}, in.BlockSizes
			case inode.EFile:
				e, sizes = extent{in.BlockStart, in.FragInd, in.FragOffset, in.Size}, in.BlockSizes
			default:
				continue
			}
			if seen[e] {
				continue // the same data as a file counted already
			}
			seen[e] = true
			for _, s := range sizes {
				own[name] += int64(s & 0xFFFFFF) // bit 24: stored uncompressed
			}
			blocks += own[name]
			if e.frag != 0xFFFFFFFF {
				tails[name] = int64(e.size % uint64(sb.BlockSize))
				tailTotal += tails[name]
			}
		}
		return nil
	}
	err = walk(sq.Root, "", 0)
	if err != nil {
		return nil, 0, err
	}
	// The fragment blocks are the rest of the data; shared in proportion
	// to the tails, the last file takes the rounding.
	frags := dataSize - blocks
	names := slices.Sorted(maps.Keys(tails))
	var given int64
	for i, n := range names {
		share := int64(0)
		if tailTotal > 0 {
			share = frags * tails[n] / tailTotal
		}
		if i == len(names)-1 {
			share = frags - given
		}
		given += share
		own[n] += share
	}
	return own, dataSize, nil
}

// ReleaseSizes is the size report of a published release: its build
// report from a verified attestation, each root filesystem image read
// from the store (its digest checked).
func ReleaseSizes(ctx context.Context, st oci.Reader, version string, keys []signing.Verifier, opts SizeOptions) (*SizeReport, error) {
	r := &Report{}
	var problems []string
	rel, err := readRelease(ctx, st, version, keys, nil, r, func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) })
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 || rel.report == nil {
		return nil, fmt.Errorf("%s does not verify:\n  %s", st.Ref(release.RepoLock, version), strings.Join(problems, "\n  "))
	}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	opts.Squashfs = func(name string) (io.ReaderAt, int64, error) {
		arch, ok := strings.CutSuffix(name, "/rootfs.sqsh")
		if !ok {
			return nil, 0, nil
		}
		for _, a := range r.Artifacts {
			_, goarch, _ := strings.Cut(a.Platform, "/")
			if a.Kind != "boot-asset" || a.Name != "rootfs.sqsh" || a.manifest == "" || rpmArch(rel.report, goarch) != arch {
				continue
			}
			f, err := fetchSquashfs(ctx, st, a.Repository, a.manifest, a.Digest)
			if err != nil {
				return nil, 0, err
			}
			files = append(files, f)
			fi, err := f.Stat()
			if err != nil {
				return nil, 0, err
			}
			return f, fi.Size(), nil
		}
		return nil, 0, nil
	}
	return Sizes(ctx, st.Ref(release.RepoLock, version), rel.report, opts)
}
