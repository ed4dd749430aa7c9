package fat

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/internal/testutil"
)

func sample() []File {
	r := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 3<<20+123)
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	return []File{
		{Path: "EFI/BOOT/BOOTX64.EFI", Data: []byte("MZ not really an EFI binary")},
		{Path: "loader/loader.conf", Data: []byte("timeout 0\ndefault nodeforge.conf\n")},
		{Path: "loader/entries/nodeforge.conf", Data: []byte("title Nodeforge\nlinux /nodeforge/vmlinuz\ninitrd /nodeforge/initramfs.xz\n")},
		{Path: "nodeforge/vmlinuz", Data: big},
		{Path: "nodeforge/initramfs.xz", Data: big[:1000]},
		{Path: "A long file name with spaces.txt", Data: []byte("long")},
		{Path: "empty", Data: nil},
	}
}

func write(t *testing.T, files []File, o Options) string {
	t.Helper()
	img, err := Write(files, o)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "esp.img")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fsck.fat and mtools are the judges: the image checks clean and every
// file reads back, long names included.
func TestJudges(t *testing.T) {
	judge(t, Options{Label: "NODEFORGE", VolumeID: 0x1234abcd, Time: time.Unix(1700000000, 0)})
}

// TestSectorSizes: with the logical sectors of a 4K disk (and the other
// sizes a boot sector can declare) the judges read the same files back;
// fsck.fat sees the sector size declared.
func TestSectorSizes(t *testing.T) {
	for _, ss := range []int{1024, 2048, 4096} {
		t.Run(fmt.Sprint(ss), func(t *testing.T) {
			judge(t, Options{Label: "NODEFORGE", VolumeID: 0x1234abcd, Time: time.Unix(1700000000, 0), SectorSize: ss, HiddenSectors: 256})
		})
	}
	for _, ss := range []int{256, 1000, 8192} {
		if _, err := Write(sample(), Options{SectorSize: ss}); err == nil {
			t.Errorf("sector size %d accepted", ss)
		}
	}
}

func judge(t *testing.T, o Options) {
	t.Helper()
	fsck := testutil.NeedTool(t, "fsck.fat")
	mtype := testutil.NeedTool(t, "mtype")
	mdir := testutil.NeedTool(t, "mdir")
	p := write(t, sample(), o)
	ss := max(o.SectorSize, 512)
	out, err := exec.Command(fsck, "-n", "-v", p).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "16 bit entries") || !strings.Contains(string(out), fmt.Sprintf("%d bytes per logical sector", ss)) {
		t.Fatalf("fsck.fat: %v\n%s", err, out)
	}
	for _, f := range sample() {
		cmd := exec.Command(mtype, "-i", p, "::/"+f.Path)
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("mtype %s: %v", f.Path, err)
			continue
		}
		if !bytes.Equal(out, f.Data) {
			t.Errorf("%s: %d bytes read back, want %d", f.Path, len(out), len(f.Data))
		}
	}
	out, err = exec.Command(mdir, "-i", p, "::/").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "NODEFORGE") || !strings.Contains(string(out), "2023-11-14") && !strings.Contains(string(out), "11-14-2023") {
		t.Errorf("mdir: %v\n%s", err, out)
	}
}

// TestDeterministic: the order of the files changes nothing, MinSize
// holds, and an image rendered in a buffer given (Into) is the same.
func TestDeterministic(t *testing.T) {
	o := Options{Label: "NODEFORGE", VolumeID: 7, Time: time.Unix(1700000000, 0)}
	a, _ := Write(sample(), o)
	files := sample()
	for i, j := 0, len(files)-1; i < j; i, j = i+1, j-1 {
		files[i], files[j] = files[j], files[i]
	}
	b, _ := Write(files, o)
	if !bytes.Equal(a, b) {
		t.Error("the image depends on the order of the files")
	}
	if len(a) < 4<<20 {
		t.Errorf("image is %d bytes, want at least 4 MiB", len(a))
	}
	big, _ := Write(sample(), Options{MinSize: 64 << 20})
	if len(big) < 64<<20 {
		t.Errorf("MinSize: %d bytes", len(big))
	}
}

func TestErrors(t *testing.T) {
	for _, fs := range [][]File{
		{{Path: "../x"}},
		{{Path: "a/b"}, {Path: "a"}},
		{{Path: "a"}, {Path: "A"}},
		{{Path: "bad:name"}},
	} {
		if _, err := Write(fs, Options{}); err == nil {
			t.Errorf("accepted %v", fs)
		}
	}
	if _, err := Write(nil, Options{Label: "A LABEL TOO LONG"}); err == nil {
		t.Error("accepted a long label")
	}
}

// TestAlign: with Align 2048 every file's data starts at a multiple of
// 2048 bytes in the image, where WriteExtents says, in one run; the
// judges read the image (its reserved sectors grown) as any other; an
// alignment that is no power of two, below the sector size or past 32 KiB
// is refused.
func TestAlign(t *testing.T) {
	o := Options{Label: "NODEFORGE", VolumeID: 7, Time: time.Unix(1700000000, 0), Align: 2048}
	judge(t, o)
	files := sample()
	img, ext, err := WriteExtents(files, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(ext) != len(files) {
		t.Fatalf("%d extents for %d files", len(ext), len(files))
	}
	for i, e := range ext {
		if e.Path != files[i].Path || e.Size != int64(len(files[i].Data)) {
			t.Errorf("extent %d: %+v for %s (%d bytes)", i, e, files[i].Path, len(files[i].Data))
		}
		if e.Size == 0 {
			continue
		}
		if e.Offset%2048 != 0 || !bytes.Equal(img[e.Offset:e.Offset+e.Size], files[i].Data) {
			t.Errorf("%s at %d: aligned %t, its data there %t", e.Path, e.Offset, e.Offset%2048 == 0, bytes.Equal(img[e.Offset:e.Offset+e.Size], files[i].Data))
		}
	}
	for _, a := range []int{3000, 256, 64 << 10} {
		if _, err := Write(sample(), Options{Align: a}); err == nil || !strings.Contains(err.Error(), "alignment") {
			t.Errorf("alignment %d: %v", a, err)
		}
	}
}

// WriteExtentsTo streams WriteExtents's image, byte for byte, with the
// same extents, at every sector size, aligned or not, with room to spare
// or none, and with many directories.
func TestWriteExtentsTo(t *testing.T) {
	many := sample()
	for i := range 40 {
		many = append(many, File{Path: fmt.Sprintf("dir%d/sub/file %d.txt", i%7, i), Data: bytes.Repeat([]byte{byte(i)}, i*1000)})
	}
	for _, c := range []struct {
		name  string
		files []File
		o     Options
	}{
		{"plain", sample(), Options{Label: "NODEFORGE", VolumeID: 1, Time: time.Unix(1700000000, 0)}},
		{"iso", sample(), Options{Time: time.Unix(1700000000, 0), Align: 2048}},
		{"4k sectors", sample(), Options{SectorSize: 4096, MinSize: 40 << 20, HiddenSectors: 256}},
		{"many", many, Options{Align: 4096, MinSize: 8 << 20}},
	} {
		want, wantExt, err := WriteExtents(c.files, c.o)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		ext, size, err := WriteExtentsTo(&got, c.files, c.o)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if size != int64(len(want)) || !bytes.Equal(got.Bytes(), want) || fmt.Sprint(ext) != fmt.Sprint(wantExt) {
			t.Errorf("%s: %d bytes (said %d), want %d; same bytes %t, same extents %t", c.name, got.Len(), size, len(want), bytes.Equal(got.Bytes(), want), fmt.Sprint(ext) == fmt.Sprint(wantExt))
		}
	}
}

// TestBodies: files whose content is a Body (read at offsets, never a
// slice of the caller's) make the image their Data makes, in memory and
// written out; a body shorter than it says is an error.
func TestBodies(t *testing.T) {
	o := Options{Label: "NODEFORGE", VolumeID: 1, Time: time.Unix(1700000000, 0), Align: 2048}
	want, wantExt, err := WriteExtents(sample(), o)
	if err != nil {
		t.Fatal(err)
	}
	bodies := sample()
	for i := range bodies {
		if len(bodies[i].Data) > 100 {
			bodies[i].Body, bodies[i].Data = bytes.NewReader(bodies[i].Data), nil
		}
	}
	got, ext, err := WriteExtents(bodies, o)
	if err != nil || !bytes.Equal(got, want) || fmt.Sprint(ext) != fmt.Sprint(wantExt) {
		t.Errorf("in memory: %v; same bytes %t, same extents %t", err, bytes.Equal(got, want), fmt.Sprint(ext) == fmt.Sprint(wantExt))
	}
	var out bytes.Buffer
	if _, _, err := WriteExtentsTo(&out, bodies, o); err != nil || !bytes.Equal(out.Bytes(), want) {
		t.Errorf("written out: %v; same bytes %t", err, bytes.Equal(out.Bytes(), want))
	}
	short := sample()
	short[3].Body, short[3].Data = shortBody{bytes.NewReader(short[3].Data)}, nil
	if _, _, err := WriteExtents(short, o); err == nil {
		t.Error("in memory: a short body was taken")
	}
	if _, _, err := WriteExtentsTo(io.Discard, short, o); err == nil {
		t.Error("written out: a short body was taken")
	}
}

// shortBody says it is a byte longer than it is.
type shortBody struct{ *bytes.Reader }

func (s shortBody) Size() int64 { return s.Reader.Size() + 1 }
