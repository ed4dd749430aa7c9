package rpmfile

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/cpio"
)

// dumpLine is what `rpm -qp --dump` says of one file.
type dumpLine struct {
	size   int64
	mode   uint32
	digest string
	link   string
}

// rpmDump runs rpm -qp --dump, the judge of header file lists.
func rpmDump(t *testing.T, file string) map[string]dumpLine {
	t.Helper()
	out, err := exec.Command(testutil.NeedTool(t, "rpm"), "-qp", "--dump", file).Output()
	if err != nil {
		t.Fatalf("rpm -qp --dump: %v", err)
	}
	got := map[string]dumpLine{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// path size mtime digest mode owner group isconfig isdoc rdev symlink
		f := strings.Fields(line)
		if len(f) != 11 {
			t.Fatalf("rpm --dump line %q", line)
		}
		size, _ := strconv.ParseInt(f[1], 10, 64)
		mode, _ := strconv.ParseUint(f[4], 8, 32)
		d := dumpLine{size: size, mode: uint32(mode), digest: f[3], link: f[10]}
		if strings.Trim(d.digest, "0") == "" {
			d.digest = ""
		}
		if d.link == "X" {
			d.link = ""
		}
		got[f[0]] = d
	}
	return got
}

// TestLargeFileStripped reads a package rpmbuild wrote with a file of
// 4 GiB and one byte, whose payload is therefore in the stripped cpio form:
// the header's 64-bit sizes against rpm's, every entry matched to its
// header file by index, each file's content against its digest, and the
// package's digests, as builder inspect reads it.
func TestLargeFileStripped(t *testing.T) {
	file := testutil.LargeFileRPM(t)
	judge := rpmDump(t, file)
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := Open(f)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ReadInfo(p.Header)
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]File{}
	for _, hf := range info.Files {
		byPath[hf.Path] = hf
		want, ok := judge[hf.Path]
		if !ok {
			t.Errorf("%s: not in rpm's list", hf.Path)
			continue
		}
		if got := (dumpLine{hf.Size, hf.Mode, hf.Digest, hf.LinkTo}); got != want {
			t.Errorf("%s: ours %+v, rpm %+v", hf.Path, got, want)
		}
	}
	if len(info.Files) != len(judge) {
		t.Errorf("%d files, rpm lists %d", len(info.Files), len(judge))
	}
	if big := byPath[testutil.LargeFileDir+"/big.img"]; big.Size != testutil.LargeFileSize {
		t.Fatalf("big.img: size %d, want %d", big.Size, int64(testutil.LargeFileSize))
	}

	// rpm writes newc unless a file is this large: make sure the test
	// reads the form it is about.
	if head := payloadHead(t, file); head != cpio.MagicStripped {
		t.Fatalf("payload starts with %q, not the stripped form %q", head, cpio.MagicStripped)
	}

	seen := map[string]string{}
	v, err := p.Verify(VerifyOptions{Entry: func(e *cpio.Entry, r io.Reader) error {
		h := sha256.New()
		n, err := io.Copy(h, r)
		if err != nil {
			return err
		}
		if !e.Stripped || n != e.Size {
			return fmt.Errorf("stripped %v, read %d of %d bytes", e.Stripped, n, e.Size)
		}
		name := strings.TrimPrefix(e.Name, ".")
		hf := byPath[name]
		switch {
		case e.Mode != hf.Mode:
			return fmt.Errorf("mode %o, header %o", e.Mode, hf.Mode)
		case e.Mode&cpio.TypeMask == cpio.TypeReg && n > 0 && hex.EncodeToString(h.Sum(nil)) != hf.Digest:
			return fmt.Errorf("content differs from the header's digest")
		}
		seen[name] = fmt.Sprintf("%d/%d", n, e.Nlink)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Err(false); err != nil {
		t.Fatal(err)
	}
	// Hard links: the data comes with the set's last member only.
	d := testutil.LargeFileDir
	want := map[string]string{d: "0/1", d + "/big.img": fmt.Sprintf("%d/1", int64(testutil.LargeFileSize)), d + "/small.txt": "6/1",
		d + "/link": "9/1", d + "/hard1": "0/2", d + "/hard2": "5/2"}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("entries (bytes/links):\n got %v\nwant %v", seen, want)
	}
}

// payloadHead returns the first six bytes of a package's decompressed payload.
func payloadHead(t *testing.T, file string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := Open(f)
	if err != nil {
		t.Fatal(err)
	}
	dr, err := Decompress(p.Compressor(), p.PayloadReader())
	if err != nil {
		t.Fatal(err)
	}
	defer dr.Close()
	head := make([]byte, 6)
	if _, err := io.ReadFull(dr, head); err != nil {
		t.Fatal(err)
	}
	return string(head)
}
