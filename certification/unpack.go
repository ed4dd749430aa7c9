package certification

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/CalebQ42/squashfs"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/oci"
)

// unpacked checks the attested file trace against what was published:
// every rootfs.sqsh of the release is read from the store (its digest
// checked as it streams), unpacked, and each of its paths compared with
// the build report's entry (type, permission bits, owner, size, content
// sha256, symlink target); a path on one side only fails as well. It
// returns the number of paths compared.
func unpacked(ctx context.Context, st oci.Reader, r *Report, rel *auditedRelease, fail func(string, ...any)) int {
	if rel.report == nil {
		return 0
	}
	n := 0
	for _, a := range r.Artifacts {
		if a.Kind != "boot-asset" || a.Name != "rootfs.sqsh" || a.manifest == "" {
			continue
		}
		_, goarch, _ := strings.Cut(a.Platform, "/")
		arch := rpmArch(rel.report, goarch)
		ar := rel.report.Architectures[arch]
		if ar == nil {
			fail("%s: the build report has no architecture %s", a.Ref, goarch)
			continue
		}
		got, err := readSquashfs(ctx, st, a.Repository, a.manifest, a.Digest)
		if err != nil {
			fail("%s: rootfs.sqsh %s: %v", a.Ref, a.Digest, err)
			continue
		}
		diffs := compareTree(got, ar.Rootfs)
		n += len(got)
		if len(diffs) > 0 {
			fail("%s: rootfs.sqsh %s differs from the attested build report in %d paths: %s", a.Ref, a.Digest, len(diffs), strings.Join(diffs[:min(10, len(diffs))], "; "))
		}
	}
	return n
}

// sqEntry is one path of an unpacked squashfs image.
type sqEntry struct {
	typ, mode, target, sha256 string
	uid, gid                  int
	size                      int64
}

// readSquashfs reads a squashfs layer into a temporary file (checking its
// digest) and lists every path in it.
func readSquashfs(ctx context.Context, st oci.Reader, repo, manifest, digest string) (map[string]sqEntry, error) {
	f, err := fetchSquashfs(ctx, st, repo, manifest, digest)
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	return listSquashfs(ctx, f)
}

// fetchSquashfs copies a squashfs layer into a temporary file, checking
// its digest; the caller removes it.
func fetchSquashfs(ctx context.Context, st oci.Reader, repo, manifest, digest string) (*os.File, error) {
	rc, err := openLayer(ctx, st, repo, manifest, digest)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	f, err := os.CreateTemp("", "nodeforge-audit-*.sqsh")
	if err != nil {
		return nil, err
	}
	sum := sha256.New()
	if _, err = io.Copy(io.MultiWriter(f, sum), rc); err == nil {
		if got := "sha256:" + hex.EncodeToString(sum.Sum(nil)); got != digest {
			err = fmt.Errorf("read %s (damaged or tampered)", got)
		}
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// listSquashfs lists every path of a squashfs image with its content's
// sha256.
func listSquashfs(ctx context.Context, img io.ReaderAt) (map[string]sqEntry, error) {
	sq, err := squashfs.NewReader(img)
	if err != nil {
		return nil, fmt.Errorf("not a squashfs image: %w", err)
	}
	out := map[string]sqEntry{}
	err = fs.WalkDir(sq, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		e := sqEntry{typ: fileType(fi.Mode()), mode: fmt.Sprintf("%04o", permBits(fi.Mode()))}
		if sfi, ok := fi.(squashfs.FileInfo); ok {
			e.uid, e.gid, e.target = sfi.Uid(), sfi.Gid(), sfi.SymlinkPath()
		}
		if e.typ == "file" {
			e.size = fi.Size()
			file, err := sq.Open(p)
			if err != nil {
				return err
			}
			h := sha256.New()
			_, err = io.Copy(h, file)
			file.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			e.sha256 = hex.EncodeToString(h.Sum(nil))
		}
		out[path.Join("/", p)] = e
		return nil
	})
	return out, err
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeCharDevice != 0:
		return "chardev"
	case m&fs.ModeDevice != 0:
		return "device" // the reader does not tell character from block devices
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "file"
}

// permBits are the permission bits with setuid, setgid and sticky, as the
// build report writes them (the squashfs reader keeps the inode's raw
// bits in the low twelve; fs's own flags are honoured too).
func permBits(m fs.FileMode) uint32 {
	b := uint32(m) & 0o7777
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// compareTree lists every difference between an unpacked image and the
// report's entries.
func compareTree(got map[string]sqEntry, want []report.FileEntry) []string {
	var diffs []string
	seen := map[string]bool{}
	for _, w := range want {
		seen[w.Path] = true
		g, ok := got[w.Path]
		if !ok {
			diffs = append(diffs, w.Path+": in the report, not in the image")
			continue
		}
		var d []string
		if g.typ != w.Type && (g.typ != "device" || (w.Type != "chardev" && w.Type != "blockdev")) {
			d = append(d, fmt.Sprintf("type %s, report %s", g.typ, w.Type))
		}
		// Symlinks have no permission bits of their own.
		if g.typ != "symlink" && g.mode != w.Mode {
			d = append(d, fmt.Sprintf("mode %s, report %s", g.mode, w.Mode))
		}
		if g.uid != w.UID || g.gid != w.GID {
			d = append(d, fmt.Sprintf("owner %d:%d, report %d:%d", g.uid, g.gid, w.UID, w.GID))
		}
		if g.typ == "file" && (g.size != w.Size || g.sha256 != w.SHA256) {
			d = append(d, fmt.Sprintf("content sha256:%s (%d bytes), report sha256:%s (%d bytes)", g.sha256, g.size, w.SHA256, w.Size))
		}
		if g.target != w.Target {
			d = append(d, fmt.Sprintf("target %q, report %q", g.target, w.Target))
		}
		if len(d) > 0 {
			diffs = append(diffs, w.Path+": "+strings.Join(d, ", "))
		}
	}
	var extra []string
	for p := range got {
		if !seen[p] {
			extra = append(extra, p+": in the image, not in the report")
		}
	}
	sort.Strings(extra)
	return append(diffs, extra...)
}

// openLayer opens a layer of a manifest by digest, as stored.
func openLayer(ctx context.Context, st oci.Reader, repo, manifest, digest string) (io.ReadCloser, error) {
	img, err := st.Image(ctx, repo, manifest)
	if err != nil {
		return nil, err
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return nil, err
	}
	l, err := img.LayerByDigest(h)
	if err != nil {
		return nil, err
	}
	return l.Compressed()
}
