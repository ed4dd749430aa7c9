package rpmfile

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/cpio"
)

// entryView is what both sides must agree on for one path.
type entryView struct {
	mode    uint32 // type and permission bits
	content string // sha256 of the data, symlink target for links
	link    string // hard link group: the sorted names sharing the inode
}

// ourEntries walks the payload with our reader.
func ourEntries(t *testing.T, file string) map[string]entryView {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := Open(f)
	if err != nil {
		t.Fatal(err)
	}
	type raw struct {
		name string
		e    cpio.Entry
		sum  string
		data []byte
	}
	var all []raw
	_, err = p.Verify(VerifyOptions{Entry: func(e *cpio.Entry, r io.Reader) error {
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		s := sha256.Sum256(b)
		all = append(all, raw{name: strings.TrimPrefix(e.Name, "./"), e: *e, sum: hex.EncodeToString(s[:]), data: b})
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	groups := map[uint32][]string{}
	groupSum := map[uint32]string{}
	for _, r := range all {
		if r.e.Mode&cpio.TypeMask == cpio.TypeReg && r.e.Nlink > 1 {
			groups[r.e.Ino] = append(groups[r.e.Ino], r.name)
			if r.e.Size > 0 {
				groupSum[r.e.Ino] = r.sum
			}
		}
	}
	out := map[string]entryView{}
	for _, r := range all {
		v := entryView{mode: r.e.Mode}
		switch r.e.Mode & cpio.TypeMask {
		case cpio.TypeLink:
			v.content = string(r.data)
		case cpio.TypeReg:
			v.content = r.sum
			if g := groups[r.e.Ino]; len(g) > 1 {
				sort.Strings(g)
				v.link = strings.Join(g, ",")
				v.content = groupSum[r.e.Ino]
			}
		}
		out[r.name] = v
	}
	return out
}

// cpioEntries extracts with rpm2cpio | cpio -idm and reads the tree back.
func cpioEntries(t *testing.T, file string) map[string]entryView {
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", fmt.Sprintf("rpm2cpio %q | cpio -idm --quiet --no-absolute-filenames", file))
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rpm2cpio | cpio: %v: %s", err, out)
	}
	inodes := map[uint64][]string{}
	out := map[string]entryView{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		v := entryView{mode: st.Mode}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFLNK:
			v.content, _ = os.Readlink(p)
		case syscall.S_IFREG:
			b, _ := os.ReadFile(p)
			s := sha256.Sum256(b)
			v.content = hex.EncodeToString(s[:])
			if st.Nlink > 1 {
				inodes[st.Ino] = append(inodes[st.Ino], rel)
			}
		}
		out[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, names := range inodes {
		sort.Strings(names)
		for _, n := range names {
			v := out[n]
			v.link = strings.Join(names, ",")
			out[n] = v
		}
	}
	return out
}

func TestPayloadMatchesRpm2cpio(t *testing.T) {
	testutil.NeedTool(t, "rpm2cpio")
	testutil.NeedTool(t, "cpio")
	dir := testutil.Fixtures(t, "rpm")
	files, _ := filepath.Glob(filepath.Join(dir, "payload-test-*.rpm"))
	files = append(files, filepath.Join(dir, "hlinktest-1.0-1.noarch.rpm"), filepath.Join(dir, "capstest-1.0-1.noarch.rpm"),
		filepath.Join(dir, "centos-release-7-2.1511.el7.centos.2.10.x86_64.rpm"), filepath.Join(dir, "centos-release-4-0.1.x86_64.rpm"))
	if len(files) < 10 {
		t.Fatalf("fixtures missing: %v", files)
	}
	sawHardLink := false
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ours, theirs := ourEntries(t, f), cpioEntries(t, f)
			// cpio -idm creates parent directories the archive does not
			// list; compare only what the archive holds on our side.
			for name, v := range ours {
				w, ok := theirs[name]
				if !ok {
					t.Errorf("%s: in our payload, not extracted by cpio", name)
					continue
				}
				if v != w {
					t.Errorf("%s: ours %+v, cpio %+v", name, v, w)
				}
				if v.link != "" {
					sawHardLink = true
				}
			}
			for name, w := range theirs {
				if _, ok := ours[name]; !ok && w.mode&syscall.S_IFMT != syscall.S_IFDIR {
					t.Errorf("%s: extracted by cpio, missing from our payload", name)
				}
			}
		})
	}
	if !sawHardLink {
		t.Error("no hard links seen: hlinktest should have them")
	}
}
