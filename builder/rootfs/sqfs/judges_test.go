package sqfs

// The judges: squashfs-tools' unsquashfs (list and extract),
// squashfs-tools-ng's sqfs2tar and sqfsdiff, and the Linux kernel through a
// loop mount. Each skips when its tool or privilege is missing.

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodeforge/builder/internal/testutil"
)

func unixTime(s int64) time.Time { return time.Unix(s, 0).UTC() }

// needTool skips on a workstation without the tool and fails in CI.
func needTool(t *testing.T, name string) {
	t.Helper()
	testutil.NeedTool(t, name)
}

func needRoot(t *testing.T) {
	t.Helper()
	testutil.NeedRoot(t)
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func compressors() []string { return []string{"zstd", "xz", "gzip"} }

// judgedOptions are the options of the fixture's image the judges read:
// one worker (TestReproducible shows that every worker count and entry
// order, in memory or streamed into a file, gives these bytes).
func judgedOptions(comp string) Options {
	return Options{Compressor: comp, Workers: 1, MkfsTime: 42}
}

var judged struct {
	sync.Mutex
	images map[string][]byte
}

// judgedBytes is the fixture's image with comp, written once for the
// package (an xz image takes half a minute under the race detector).
func judgedBytes(t *testing.T, comp string) []byte {
	t.Helper()
	judged.Lock()
	defer judged.Unlock()
	if b, ok := judged.images[comp]; ok {
		return b
	}
	b := imageBytes(t, fixture(), judgedOptions(comp))
	if judged.images == nil {
		judged.images = map[string][]byte{}
	}
	judged.images[comp] = b
	return b
}

// judgedImage writes judgedBytes into a file for a judge to read.
func judgedImage(t *testing.T, comp string) string {
	t.Helper()
	p := t.TempDir() + "/image.sqfs"
	if err := os.WriteFile(p, judgedBytes(t, comp), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUnsquashfsList: unsquashfs -lln lists exactly the entries, with their
// modes, owners, sizes, device numbers and link targets.
func TestUnsquashfsList(t *testing.T) {
	// The judges read one image per compressor; the writer's concurrency
	// is TestReproducible's and TestStreamFails's, under -race.
	testutil.NoRace(t)
	needTool(t, "unsquashfs")
	es := fixture()
	wants := expectations(es)
	for _, comp := range compressors() {
		t.Run(comp, func(t *testing.T) {
			img := judgedImage(t, comp)
			out := run(t, "unsquashfs", "-lln", "-UTC", img)
			got := map[string]bool{}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				i := strings.Index(line, " squashfs-root")
				if i < 0 {
					continue
				}
				head, name := strings.Fields(line[:i]), strings.TrimPrefix(line[i+1:], "squashfs-root")
				if name == "" {
					name = "/"
				}
				var target string
				if head[0][0] == 'l' {
					name, target, _ = strings.Cut(name, " -> ")
				}
				w := wants[name]
				if w != nil && w.kind() == sIFLNK && target != w.target {
					t.Errorf("%s: target %q", name, target)
				}
				if w == nil {
					t.Errorf("unexpected entry %q", name)
					continue
				}
				got[name] = true
				if head[0] != modeString(w.mode) {
					t.Errorf("%s: mode %s, want %s", name, head[0], modeString(w.mode))
				}
				if head[1] != fmt.Sprintf("%d/%d", w.uid, w.gid) {
					t.Errorf("%s: owner %s, want %d/%d", name, head[1], w.uid, w.gid)
				}
				size := strings.Join(head[2:len(head)-2], "")
				var wantSize string
				switch w.kind() {
				case sIFREG:
					wantSize = fmt.Sprint(len(w.data))
				case sIFLNK:
					wantSize = fmt.Sprint(len(w.target))
				case sIFCHR, sIFBLK:
					// unsquashfs 4.5.1 lists rdev>>8, rdev&0xff; it
					// extracts (and the kernel reads) the full encoding.
					wantSize = fmt.Sprintf("%d,%d", w.rdev>>8, w.rdev&0xff)
				case sIFIFO, sIFSOCK:
					wantSize = "0"
				default:
					wantSize = size // directory sizes are the listing's
				}
				if size != wantSize {
					t.Errorf("%s: size %s, want %s", name, size, wantSize)
				}
			}
			for p := range wants {
				if !got[p] {
					t.Errorf("%s: not listed", p)
				}
			}
		})
	}
}

// TestUnsquashfsExtract: unsquashfs extracts identical bytes, modes,
// owners, times, device numbers, hard links and xattrs.
func TestUnsquashfsExtract(t *testing.T) {
	// The judges read one image per compressor; the writer's concurrency
	// is TestReproducible's and TestStreamFails's, under -race.
	testutil.NoRace(t)
	needTool(t, "unsquashfs")
	needRoot(t)
	es := fixture()
	wants := expectations(es)
	for _, comp := range compressors() {
		t.Run(comp, func(t *testing.T) {
			img := judgedImage(t, comp)
			dst := t.TempDir() + "/root"
			run(t, "unsquashfs", "-q", "-n", "-d", dst, img)
			compareTree(t, dst, wants, false)
		})
	}
}

// TestKernelMount: the kernel mounts the image and reads every entry.
func TestKernelMount(t *testing.T) {
	testutil.Slow(t)
	// The judges read one image per compressor; the writer's concurrency
	// is TestReproducible's and TestStreamFails's, under -race.
	testutil.NoRace(t)
	needRoot(t)
	es := fixture()
	wants := expectations(es)
	for _, comp := range compressors() {
		t.Run(comp, func(t *testing.T) {
			img := judgedImage(t, comp)
			mnt := t.TempDir()
			if out, err := exec.Command("mount", "-o", "loop,ro", "-t", "squashfs", img, mnt).CombinedOutput(); err != nil {
				testutil.Missing(t, fmt.Sprintf("a loop mount (%v: %s)", err, out))
			}
			t.Cleanup(func() {
				if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
					t.Errorf("umount: %v: %s", err, out)
				}
			})
			compareTree(t, mnt, wants, true)
			// readdir returns names in the image's order: sorted bytes.
			f, err := os.Open(mnt + "/huge")
			if err != nil {
				t.Fatal(err)
			}
			names, err := f.Readdirnames(-1)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !sort.StringsAreSorted(names) || len(names) != 2500 {
				t.Errorf("readdir of /huge: %d names, sorted %v", len(names), sort.StringsAreSorted(names))
			}
		})
	}
}

// compareTree checks a directory tree (extracted or mounted) against the
// expectations. kernel adds what only a mount shows: directory link
// counts, inode numbers, sockets.
func compareTree(t *testing.T, root string, wants map[string]*want, kernel bool) {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, root)
		if rel == "" {
			rel = "/"
		}
		seen[rel] = true
		if wants[rel] == nil {
			t.Errorf("unexpected %s", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[uint64]string{}
	for p, w := range wants {
		if w.kind() == sIFSOCK && !kernel {
			continue // unsquashfs does not create sockets
		}
		if !seen[p] {
			t.Errorf("%s: missing", p)
			continue
		}
		full := root + p
		var st syscall.Stat_t
		if err := syscall.Lstat(full, &st); err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if st.Mode != w.mode {
			t.Errorf("%s: mode %o, want %o", p, st.Mode, w.mode)
		}
		if st.Uid != w.uid || st.Gid != w.gid {
			t.Errorf("%s: owner %d:%d, want %d:%d", p, st.Uid, st.Gid, w.uid, w.gid)
		}
		if w.kind() != sIFLNK && st.Mtim.Sec != fixtureMtime {
			t.Errorf("%s: mtime %d", p, st.Mtim.Sec)
		}
		if w.kind() != sIFDIR || kernel {
			if uint32(st.Nlink) != w.nlink {
				t.Errorf("%s: %d links, want %d", p, st.Nlink, w.nlink)
			}
		}
		if kernel {
			if other, ok := inodes[st.Ino]; ok && wants[other].linkOf != w.linkOf {
				t.Errorf("%s: inode %d also used by %s", p, st.Ino, other)
			}
			inodes[st.Ino] = p
		}
		switch w.kind() {
		case sIFREG:
			b, err := os.ReadFile(full)
			if err != nil {
				t.Errorf("%s: %v", p, err)
			} else if sha256.Sum256(b) != w.sum {
				t.Errorf("%s: content differs (%d bytes, want %d)", p, len(b), len(w.data))
			}
		case sIFLNK:
			if tg, err := os.Readlink(full); err != nil || tg != w.target {
				t.Errorf("%s: target %q, %v", p, tg, err)
			}
		case sIFCHR, sIFBLK:
			if uint32(st.Rdev) != w.rdev {
				t.Errorf("%s: rdev %#x, want %#x", p, st.Rdev, w.rdev)
			}
		}
		if w.kind() == sIFREG || w.kind() == sIFDIR {
			got := readXattrs(t, full)
			if len(got) != len(w.xattrs) {
				t.Errorf("%s: xattrs %q, want %q", p, got, w.xattrs)
			}
			for k, v := range w.xattrs {
				if !bytes.Equal(got[k], v) {
					t.Errorf("%s: xattr %s = %q, want %q", p, k, got[k], v)
				}
			}
		}
	}
	// Hard links: every name of a group is the same file.
	first := map[string]os.FileInfo{}
	for p, w := range wants {
		if w.nlink < 2 || w.kind() == sIFDIR {
			continue
		}
		fi, err := os.Lstat(root + p)
		if err != nil {
			continue
		}
		if f, ok := first[w.linkOf]; ok && !os.SameFile(f, fi) {
			t.Errorf("%s: not the same file as %s", p, w.linkOf)
		}
		first[w.linkOf] = fi
	}
}

func readXattrs(t *testing.T, p string) map[string][]byte {
	buf := make([]byte, 4096)
	n, err := syscall.Listxattr(p, buf)
	if err != nil {
		t.Errorf("%s: listxattr: %v", p, err)
		return nil
	}
	out := map[string][]byte{}
	for _, k := range strings.Split(string(buf[:n]), "\x00") {
		if k == "" {
			continue
		}
		v := make([]byte, 65536)
		m, err := syscall.Getxattr(p, k, v)
		if err != nil {
			t.Errorf("%s: getxattr %s: %v", p, k, err)
			continue
		}
		out[k] = v[:m]
	}
	return out
}

// TestSqfs2tar: squashfs-tools-ng reads the image into a tar carrying
// every entry, hard links and xattrs (as PAX records).
func TestSqfs2tar(t *testing.T) {
	// The judges read one image per compressor; the writer's concurrency
	// is TestReproducible's and TestStreamFails's, under -race.
	testutil.NoRace(t)
	needTool(t, "sqfs2tar")
	es := fixture()
	wants := expectations(es)
	for _, comp := range compressors() {
		t.Run(comp, func(t *testing.T) {
			img := judgedImage(t, comp)
			cmd := exec.Command("sqfs2tar", "--root-becomes", ".", img)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("sqfs2tar: %v: %s", err, stderr.String())
			}
			tr := tar.NewReader(bytes.NewReader(out))
			seen := map[string]bool{}
			for {
				h, err := tr.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				p := "/" + strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(h.Name, "."), "/"), "/")
				w := wants[p]
				if w == nil {
					t.Errorf("unexpected %q", h.Name)
					continue
				}
				seen[p] = true
				if uint32(h.Mode)&permMask != w.mode&permMask || uint32(h.Uid) != w.uid || uint32(h.Gid) != w.gid {
					t.Errorf("%s: mode %o %d:%d, want %o %d:%d", p, h.Mode, h.Uid, h.Gid, w.mode&permMask, w.uid, w.gid)
				}
				if h.ModTime.Unix() != fixtureMtime {
					t.Errorf("%s: mtime %v", p, h.ModTime)
				}
				switch h.Typeflag {
				case tar.TypeReg:
					b, _ := io.ReadAll(tr)
					if w.kind() != sIFREG || sha256.Sum256(b) != w.sum {
						t.Errorf("%s: content differs", p)
					}
				case tar.TypeLink:
					lp := "/" + strings.TrimPrefix(strings.TrimPrefix(h.Linkname, "."), "/")
					if wants[lp] == nil || wants[lp].linkOf != w.linkOf || w.nlink < 2 {
						t.Errorf("%s: hard link to %s", p, h.Linkname)
					}
				case tar.TypeSymlink:
					if w.target != h.Linkname {
						t.Errorf("%s: target %q", p, h.Linkname)
					}
				case tar.TypeChar, tar.TypeBlock:
					maj, mnr := (w.rdev&0xfff00)>>8, w.rdev&0xff|(w.rdev>>12)&0xfff00
					if uint32(h.Devmajor) != maj || uint32(h.Devminor) != mnr {
						t.Errorf("%s: device %d,%d", p, h.Devmajor, h.Devminor)
					}
				case tar.TypeDir:
					if w.kind() != sIFDIR {
						t.Errorf("%s: is a directory", p)
					}
				case tar.TypeFifo:
					if w.kind() != sIFIFO {
						t.Errorf("%s: is a fifo", p)
					}
				default:
					t.Errorf("%s: tar type %c", p, h.Typeflag)
				}
				got := map[string]string{}
				for k, v := range h.PAXRecords {
					if name, ok := strings.CutPrefix(k, "SCHILY.xattr."); ok {
						got[name] = v
					}
				}
				if len(got) != len(w.xattrs) {
					t.Errorf("%s: xattrs %q, want %q", p, got, w.xattrs)
				}
				for k, v := range w.xattrs {
					if got[k] != string(v) {
						t.Errorf("%s: xattr %s = %q, want %q", p, k, got[k], v)
					}
				}
			}
			for p, w := range wants {
				if !seen[p] && w.kind() != sIFSOCK {
					t.Errorf("%s: not in the tar", p)
				}
			}
		})
	}
}

// TestSqfsdiff: squashfs-tools-ng finds no difference (contents, owners,
// permissions, times) between our image and one tar2sqfs makes from the
// same tree.
func TestSqfsdiff(t *testing.T) {
	needTool(t, "sqfsdiff")
	needTool(t, "tar2sqfs")
	var es []Entry
	for _, e := range fixture() {
		if e.Mode&sIFMT != sIFSOCK { // tar has no sockets
			es = append(es, e)
		}
	}
	ours := writeImage(t, es, Options{})
	ref := t.TempDir() + "/ref.sqfs"
	cmd := exec.Command("tar2sqfs", "--quiet", "--force", "--no-skip", "--compressor", "zstd",
		"--defaults", fmt.Sprintf("uid=0,gid=0,mode=0755,mtime=%d", fixtureMtime), ref)
	cmd.Stdin = bytes.NewReader(tarOf(t, es))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tar2sqfs: %v: %s", err, out)
	}
	// tar2sqfs gives files with sparse blocks an extended inode (to
	// record the bytes saved); mksquashfs, and so this package, a basic
	// one. sqfsdiff reports that, and nothing else may differ.
	out, err := exec.Command("sqfsdiff", "--timestamps", "--old", ref, "--new", ours).CombinedOutput()
	if err != nil {
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if line != "/data/sparse has a basic type" && line != "/data/zeros has a basic type" {
				t.Errorf("sqfsdiff: %v: %s", err, line)
			}
		}
	}
}

// tarOf writes entries as a sorted tar, the way rootfs.WriteTar feeds
// tar2sqfs today.
func tarOf(t testing.TB, es []Entry) []byte {
	sorted := append([]Entry(nil), es...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	byPath := map[string]*Entry{}
	for i := range sorted {
		byPath[sorted[i].Path] = &sorted[i]
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	written := map[string]string{}
	for _, e := range sorted {
		src := &e
		for src.HardlinkTo != "" {
			src = byPath[src.HardlinkTo]
		}
		name := "." + e.Path
		if e.Path == "/" {
			name = "./"
		}
		h := &tar.Header{Name: name, Mode: int64(src.Mode & permMask), Uid: int(src.UID), Gid: int(src.GID),
			ModTime: unixTime(src.Mtime), Format: tar.FormatPAX}
		switch src.Mode & sIFMT {
		case sIFDIR:
			h.Typeflag = tar.TypeDir
			if !strings.HasSuffix(h.Name, "/") {
				h.Name += "/"
			}
		case sIFREG:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(src.Data))
			if first, ok := written[src.Path]; ok {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, "."+first, 0
			}
		case sIFLNK:
			h.Typeflag, h.Linkname = tar.TypeSymlink, src.Target
		case sIFCHR, sIFBLK:
			h.Typeflag = tar.TypeChar
			if src.Mode&sIFMT == sIFBLK {
				h.Typeflag = tar.TypeBlock
			}
			h.Devmajor, h.Devminor = int64((src.Rdev&0xfff00)>>8), int64(src.Rdev&0xff|(src.Rdev>>12)&0xfff00)
		case sIFIFO:
			h.Typeflag = tar.TypeFifo
		}
		if len(src.Xattrs) > 0 {
			h.PAXRecords = map[string]string{}
			for k, v := range src.Xattrs {
				h.PAXRecords["SCHILY.xattr."+k] = string(v)
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(src.Data)
			written[src.Path] = e.Path
		}
	}
	tw.Close()
	return buf.Bytes()
}
