package rootfs

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/internal/testutil"
)

// TestCraftedStripped lays a package in rpm's stripped payload form: each
// entry names its header file by index; names, modes, 64-bit sizes and
// hard-link sets come from the header.
func TestCraftedStripped(t *testing.T) {
	tr := New()
	p := craftStrippedRPM(t, "stripped", []craftFile{
		{path: "/opt/app/bin", mode: 0o100755, data: "#!/bin/sh\n"},
		{path: "/opt/app", mode: 0o40755},
		{path: "/opt/app/link", mode: 0o120777, link: "bin"},
		{path: "/opt/app/a", mode: 0o100644, data: "shared\n", ino: 7},
		{path: "/opt/app/b", mode: 0o100644, data: "shared\n", ino: 7},
		{path: "/opt/app/odd", mode: 0o100644, data: "x"},
	})
	if err := add(t, tr, p); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/opt/app/bin": "#!/bin/sh\n", "/opt/app/a": "shared\n", "/opt/app/b": "shared\n", "/opt/app/odd": "x"} {
		if n := tr.Get(path); n == nil || n.Kind != KindFile || string(n.Data) != want {
			t.Errorf("%s: %+v", path, n)
		}
	}
	if a, b := tr.Get("/opt/app/a"), tr.Get("/opt/app/b"); a.LinkGroup != "/opt/app/a" || b.LinkGroup != "/opt/app/a" {
		t.Errorf("hard links: groups %q and %q", a.LinkGroup, b.LinkGroup)
	}
	if n := tr.Get("/opt/app/link"); n == nil || n.Kind != KindSymlink || n.Target != "bin" {
		t.Errorf("link: %+v", n)
	}
	if n := tr.Get("/opt/app"); n == nil || n.Kind != KindDir || n.Mode != 0o755 {
		t.Errorf("dir: %+v", n)
	}
}

func TestCraftedStrippedRefused(t *testing.T) {
	for _, c := range []struct {
		name  string
		files []craftFile
		want  string
	}{
		{"index beyond the file list", []craftFile{{path: "/a", mode: 0o100644, data: "a"}, {mode: 0o100644, skipHdr: true, index: 7}},
			"names file index 7, the header lists 1 files"},
		{"index twice", []craftFile{{path: "/a", mode: 0o100644, data: "a"}, {mode: 0o100644, data: "a", skipHdr: true, index: 0}},
			"payload holds /a twice"},
		{"file missing", []craftFile{{path: "/a", mode: 0o100644, data: "a"}, {path: "/b", mode: 0o100644, data: "b", noPayload: true}},
			"/b is in the header's file list but not in the payload"},
		{"ghost in the payload", []craftFile{{path: "/a", mode: 0o100644, data: "a", ghost: true}}, "/a (file index 0), a %ghost file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := add(t, New(), craftStrippedRPM(t, "bad", c.files))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error containing %q, got %v", c.want, err)
			}
		})
	}
}

// TestLayLargeFile lays the package rpmbuild made with a file of 4 GiB and
// one byte (stripped payload, LONGFILESIZES). Its declared sizes are
// checked against the install limit in 64 bits; then, unless the race
// detector runs (its shadow memory would multiply the 4 GiB held in the
// tree), it is laid whole: the small files, the hard-link set and the
// symlink as rpm lists them, the big file by size and sha256.
func TestLayLargeFile(t *testing.T) {
	testutil.Slow(t)
	file := testutil.LargeFileRPM(t)
	origin := report.Origin{Package: "largefile-1-1.noarch"}
	_, err := New().AddRPM(file, origin, LayOptions{MaxInstallSize: 4 << 30})
	if err == nil || !strings.Contains(err.Error(), "its files add up to 4294967322 bytes, more than the limit of 4294967296") {
		t.Fatalf("want the 64-bit total refused by the limit, got %v", err)
	}
	if raceEnabled {
		t.Skip("not laying 4 GiB into memory under the race detector")
	}
	dump, err := exec.Command(testutil.NeedTool(t, "rpm"), "-qp", "--dump", file).Output()
	if err != nil {
		t.Fatal(err)
	}
	tr := New()
	if _, err := tr.AddRPM(file, origin, LayOptions{}); err != nil {
		t.Fatal(err)
	}
	// path size mtime digest mode owner group isconfig isdoc rdev symlink
	for _, line := range strings.Split(strings.TrimSpace(string(dump)), "\n") {
		f := strings.Fields(line)
		n := tr.Get(f[0])
		switch {
		case n == nil:
			t.Errorf("%s: not laid", f[0])
		case f[4] == "0100644" && (n.Kind != KindFile || n.Digest != f[3] || strconv.Itoa(len(n.Data)) != f[1]):
			t.Errorf("%s: %d bytes, sha256 %s; rpm says %s bytes, %s", f[0], len(n.Data), n.Digest, f[1], f[3])
		case f[4] == "0120777" && (n.Kind != KindSymlink || n.Target != f[10]):
			t.Errorf("%s: %+v; rpm says a link to %s", f[0], n, f[10])
		}
	}
	d := testutil.LargeFileDir
	if big := tr.Get(d + "/big.img"); int64(len(big.Data)) != testutil.LargeFileSize {
		t.Errorf("big.img: %d bytes", len(big.Data))
	}
	if n := tr.Get(d + "/small.txt"); string(n.Data) != "hello\n" {
		t.Errorf("small.txt: %q", n.Data)
	}
	if a, b := tr.Get(d+"/hard1"), tr.Get(d+"/hard2"); string(a.Data) != "same\n" || a.LinkGroup == "" || a.LinkGroup != b.LinkGroup {
		t.Errorf("hard links: %+v, %+v", a, b)
	}
}
