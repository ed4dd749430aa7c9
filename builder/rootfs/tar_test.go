package rootfs

import (
	"bytes"
	"strings"
	"testing"
)

// tarTree is a small tree of files, one hard-linked, for the tar tests.
func tarTree(t *testing.T, big []byte) *Tree {
	t.Helper()
	tr := New()
	for _, n := range []*Node{
		{Path: "/boot", Kind: KindDir, Mode: 0o755, User: "0", Group: "0"},
		{Path: "/boot/initramfs.xz", Kind: KindFile, Mode: 0o644, User: "0", Group: "0", Data: big},
		{Path: "/boot/kernel", Kind: KindFile, Mode: 0o644, User: "0", Group: "0", Data: []byte("kernel"), LinkGroup: "/boot/kernel"},
		{Path: "/boot/vmlinuz", Kind: KindFile, Mode: 0o644, User: "0", Group: "0", Data: []byte("kernel"), LinkGroup: "/boot/kernel"},
	} {
		if err := tr.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

func writeTar(t *testing.T, tr *Tree, bodies map[string]Body) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := tr.WriteTarBodies(&b, NumericOwners(tr), 1700000000, bodies); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestTarSkippedAndBodies: a file whose data ReadTarSkipping left out,
// given a body, is written as if its tree held the body's bytes; a hard
// link to a skipped file is refused; a body of another size than it
// says is an error, not a short file.
func TestTarSkippedAndBodies(t *testing.T) {
	release := writeTar(t, tarTree(t, []byte("the release's initramfs")), nil)
	schematic := []byte("the schematic's initramfs, longer")
	want := writeTar(t, tarTree(t, schematic), nil)

	var asked []string
	read, err := ReadTarSkipping(bytes.NewReader(release), 1<<20, func(p string) bool {
		asked = append(asked, p)
		return p == "/boot/initramfs.xz"
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := read.Get("/boot/initramfs.xz"); n == nil || n.Kind != KindFile || n.Data != nil {
		t.Fatalf("the skipped file: %+v, want a file node with no data", n)
	}
	if len(asked) != 2 { // the two regular files; the link is not asked about
		t.Errorf("skip asked about %q", asked)
	}
	got := writeTar(t, read, map[string]Body{"/boot/initramfs.xz": bytes.NewReader(schematic)})
	if !bytes.Equal(got, want) {
		t.Error("the tar with the body differs from the tar of the tree holding its bytes")
	}

	if _, err := ReadTarSkipping(bytes.NewReader(release), 1<<20, func(p string) bool { return p == "/boot/kernel" }); err == nil ||
		!strings.Contains(err.Error(), "whose data is left out") {
		t.Errorf("a hard link to a skipped file: %v", err)
	}

	var b bytes.Buffer
	err = read.WriteTarBodies(&b, NumericOwners(read), 1, map[string]Body{"/boot/initramfs.xz": shortBody{bytes.NewReader(schematic)}})
	if err == nil {
		t.Error("a body shorter than its size was written")
	}
}

// shortBody says it is a byte longer than it writes.
type shortBody struct{ *bytes.Reader }

func (s shortBody) Size() int64 { return s.Reader.Size() + 1 }

// TestTarFeeding: ReadTarFeeding hands each regular file to onFile with
// its data and digest, as it is read; a hard link to one is not handed
// again; the tree is ReadTar's.
func TestTarFeeding(t *testing.T) {
	data := writeTar(t, tarTree(t, []byte("initramfs")), nil)
	var fed []string
	got, err := ReadTarFeeding(bytes.NewReader(data), 1<<20, func(n *Node) {
		if n.Data == nil || len(n.Digest) != 64 {
			t.Errorf("%s fed without its data or digest", n.Path)
		}
		fed = append(fed, n.Path)
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(fed, " ") != "/boot/initramfs.xz /boot/kernel" {
		t.Errorf("fed %q", fed)
	}
	want, err := ReadTar(bytes.NewReader(data), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(writeTar(t, got, nil), writeTar(t, want, nil)) {
		t.Error("the tree differs from ReadTar's")
	}
}
