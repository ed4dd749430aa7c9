package rootfs

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// craftFile is one file of a crafted package: its header entry and its
// payload entry, which a hostile package may make disagree.
type craftFile struct {
	path    string // header path
	cpio    string // payload member name (default "." + path)
	mode    uint32 // st_mode
	data    string
	size    int64 // header size (default len(data))
	link    string
	skipHdr bool // payload entry with no header entry
	// For the stripped form: ino makes hard-link sets (header FILEINODES;
	// the data goes with the set's last member), index is the payload
	// index of an entry with no header entry, noPayload leaves a header
	// entry out of the payload.
	ino       uint32
	index     uint32
	noPayload bool
	ghost     bool // %ghost in the header
}

// craftRPM writes a minimal, valid-looking RPM by hand so tests control
// every byte a hostile package could: lead, empty signature header, a
// header with the file list, a gzip cpio payload.
func craftRPM(t *testing.T, name string, files []craftFile) string {
	t.Helper()
	return craft(t, name, files, false)
}

// craftStrippedRPM is craftRPM with 64-bit sizes (LONGFILESIZES) and rpm's
// stripped payload form (07070X entries naming header indexes), which rpm
// writes for packages with a file of 4 GiB or more.
func craftStrippedRPM(t *testing.T, name string, files []craftFile) string {
	t.Helper()
	return craft(t, name, files, true)
}

func craft(t *testing.T, name string, files []craftFile, stripped bool) string {
	t.Helper()
	b := rpmhdr.NewBuilder()
	b.SetString(rpmhdr.TagName, name)
	b.SetString(rpmhdr.TagVersion, "1")
	b.SetString(rpmhdr.TagRelease, "1")
	b.SetString(rpmhdr.TagArch, "noarch")
	b.SetString(rpmhdr.TagOS, "linux")
	b.SetString(rpmhdr.TagPayloadFormat, "cpio")
	b.SetString(rpmhdr.TagPayloadCompressor, "gzip")
	var bases, dirs, users, digests, links []string
	var idx, sizes, inodes, devs, flags []uint32
	var sizes64 []uint64
	var modes []uint16
	dirIdx := map[string]uint32{}
	var entries []CpioEntry
	var strippedPayload bytes.Buffer
	lastOfSet := map[uint32]int{} // hard-link set -> its last member
	for i, f := range files {
		if f.ino != 0 && !f.skipHdr {
			lastOfSet[f.ino] = i
		}
	}
	for i, f := range files {
		fx := uint32(len(bases))
		if f.skipHdr {
			fx = f.index
		} else {
			d, base := path.Split(f.path)
			j, ok := dirIdx[d]
			if !ok {
				j = uint32(len(dirs))
				dirIdx[d] = j
				dirs = append(dirs, d)
			}
			bases, idx = append(bases, base), append(idx, j)
			size := f.size
			if size == 0 {
				size = int64(len(f.data) + len(f.link)) // rpm: a symlink's size is its target's length
			}
			sizes, modes, users = append(sizes, uint32(size)), append(modes, uint16(f.mode)), append(users, "root")
			sizes64 = append(sizes64, uint64(size))
			ino := f.ino
			if ino == 0 {
				ino = 1000 + fx
			}
			inodes, devs = append(inodes, ino), append(devs, 1)
			fl := uint32(0)
			if f.ghost {
				fl = rpmhdr.FileGhost
			}
			flags = append(flags, fl)
			dg := ""
			if f.mode&0o170000 == 0o100000 {
				s := sha256.Sum256([]byte(f.data))
				dg = hex.EncodeToString(s[:])
			}
			digests, links = append(digests, dg), append(links, f.link)
		}
		name := f.cpio
		if name == "" {
			name = "." + f.path
		}
		data := f.data
		if f.link != "" {
			data = f.link
		}
		if f.noPayload {
			continue
		}
		entries = append(entries, CpioEntry{Name: name, Mode: f.mode, Data: []byte(data)})
		if f.ino != 0 && lastOfSet[f.ino] != i {
			data = ""
		}
		strippedPayload.WriteString(fmt.Sprintf("07070X%08x\x00\x00%s", fx, data))
		for strippedPayload.Len()%4 != 0 {
			strippedPayload.WriteByte(0)
		}
	}
	b.SetStrings(rpmhdr.TagBaseNames, bases)
	b.SetStrings(rpmhdr.TagDirNames, dirs)
	b.SetInt32(rpmhdr.TagDirIndexes, idx...)
	if stripped {
		b.SetInt64(rpmhdr.TagLongFileSizes, sizes64...)
		b.SetInt32(rpmhdr.TagFileInodes, inodes...)
		b.SetInt32(rpmhdr.TagFileDevices, devs...)
	} else {
		b.SetInt32(rpmhdr.TagFileSizes, sizes...)
	}
	b.SetInt16(rpmhdr.TagFileModes, modes...)
	b.SetStrings(rpmhdr.TagFileUserName, users)
	b.SetStrings(rpmhdr.TagFileGroupName, users)
	b.SetStrings(rpmhdr.TagFileDigests, digests)
	b.SetStrings(rpmhdr.TagFileLinkTos, links)
	b.SetInt32(rpmhdr.TagFileFlags, flags...)
	b.SetInt32(rpmhdr.TagFileDigestAlgo, rpmhdr.HashSHA256)
	hdr := b.Marshal()
	var cp bytes.Buffer
	if err := writeCpioUnsorted(&cp, entries); err != nil {
		t.Fatal(err)
	}
	archive := cp.Bytes()
	if stripped {
		// rpm ends a stripped archive with a newc trailer all the same.
		var tr bytes.Buffer
		writeCpioUnsorted(&tr, nil)
		archive = append(strippedPayload.Bytes(), tr.Bytes()...)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(archive)
	zw.Close()
	lead := make([]byte, 96)
	copy(lead, []byte{0xed, 0xab, 0xee, 0xdb, 3, 0})
	copy(lead[10:], name)
	lead[79] = 5
	sig := rpmhdr.NewBuilder()
	sig.SetInt32(rpmhdr.SigSize, uint32(len(hdr)+gz.Len()))
	sb := sig.Marshal()
	for len(sb)%8 != 0 {
		sb = append(sb, 0)
	}
	out := append(append(append(lead, sb...), hdr...), gz.Bytes()...)
	p := filepath.Join(t.TempDir(), name+".rpm")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeCpioUnsorted keeps the members in the given order (a hostile
// package's order, not ours).
func writeCpioUnsorted(w *bytes.Buffer, es []CpioEntry) error {
	for i, e := range es {
		hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x", i+1, e.Mode, 0, 0, 1, 0, len(e.Data), 0, 0, 0, 0, len(e.Name)+1, 0)
		w.WriteString(hdr + e.Name + "\x00")
		for w.Len()%4 != 0 {
			w.WriteByte(0)
		}
		w.Write(e.Data)
		for w.Len()%4 != 0 {
			w.WriteByte(0)
		}
	}
	w.WriteString(fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x", 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 11, 0) + "TRAILER!!!\x00")
	for w.Len()%4 != 0 {
		w.WriteByte(0)
	}
	return nil
}

func add(t *testing.T, tr *Tree, p string) error {
	_, err := tr.AddRPM(p, report.Origin{Package: strings.TrimSuffix(filepath.Base(p), ".rpm")}, LayOptions{MaxInstallSize: 1 << 20})
	return err
}

func TestCraftedGoodPackage(t *testing.T) {
	tr := New()
	p := craftRPM(t, "good", []craftFile{
		{path: "/etc", mode: 0o40755},
		{path: "/etc/app.conf", mode: 0o100644, data: "x=1\n"},
		{path: "/etc/app.link", mode: 0o120777, link: "app.conf"},
	})
	if err := add(t, tr, p); err != nil {
		t.Fatal(err)
	}
	if n := tr.Get("/etc/app.conf"); n == nil || string(n.Data) != "x=1\n" || n.Origin.Package != "good" {
		t.Fatalf("node: %+v", n)
	}
	// The same package again is fine: identical files may be shared.
	if err := add(t, tr, p); err != nil {
		t.Errorf("identical files refused: %v", err)
	}
}

func TestCraftedPackagesRefused(t *testing.T) {
	cases := []struct {
		name  string
		first []craftFile // laid before, when set
		files []craftFile
		want  string
	}{
		{"conflict", []craftFile{{path: "/etc/app.conf", mode: 0o100644, data: "a"}},
			[]craftFile{{path: "/etc/app.conf", mode: 0o100644, data: "b"}}, "first and second both ship it, with different content"},
		{"traversal", nil, []craftFile{{path: "/etc/x", cpio: "./../../etc/x", mode: 0o100644, data: "evil"}}, "climbs out"},
		{"absolute", nil, []craftFile{{path: "/etc/x", mode: 0o100644, data: "a"}, {path: "/etc/y", cpio: "/etc/shadow", mode: 0o100644, data: "b", skipHdr: true}}, "absolute entry name"},
		{"empty name", nil, []craftFile{{path: "/etc/x", cpio: "", mode: 0o100644, data: "a"}, {cpio: ".", mode: 0o100644, skipHdr: true}}, "empty entry name"},
		{"not in header", nil, []craftFile{{path: "/etc/extra", mode: 0o100644, data: "a", skipHdr: true}}, "not in the header's file list"},
		{"through symlink", []craftFile{{path: "/opt/link", mode: 0o120777, link: "/etc"}},
			[]craftFile{{path: "/opt/link/passwd", mode: 0o100644, data: "root::0:0::/:/bin/sh\n"}}, "would write through a symlink"},
		{"bomb: entry larger than declared", nil, []craftFile{{path: "/big", mode: 0o100644, data: strings.Repeat("\x00", 4<<20), size: 16}}, "the header says 16"},
		{"bomb: declared sizes over the limit", nil, []craftFile{{path: "/big", mode: 0o100644, data: "x", size: 2 << 20}}, "more than the limit"},
		{"content differs from header digest", nil, nil, "differs from the header"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := New()
			if c.first != nil {
				if err := add(t, tr, craftRPM(t, "first", c.first)); err != nil {
					t.Fatal(err)
				}
			}
			files := c.files
			p := ""
			if files == nil {
				// Header digest of one content, payload of another.
				p = craftRPM(t, "second", []craftFile{{path: "/etc/a", mode: 0o100644, data: "good"}})
				b, _ := os.ReadFile(p)
				i := bytes.LastIndex(b, []byte{0x1f, 0x8b})
				var cp bytes.Buffer
				writeCpioUnsorted(&cp, []CpioEntry{{Name: "./etc/a", Mode: 0o100644, Data: []byte("evil")}})
				var gz bytes.Buffer
				zw := gzip.NewWriter(&gz)
				zw.Write(cp.Bytes())
				zw.Close()
				os.WriteFile(p, append(b[:i], gz.Bytes()...), 0o644)
			} else {
				p = craftRPM(t, "second", files)
			}
			err := add(t, tr, p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error containing %q, got %v", c.want, err)
			}
			if c.name == "conflict" {
				var ce *ConflictError
				if !errors.As(err, &ce) || ce.Path != "/etc/app.conf" {
					t.Errorf("want a ConflictError on /etc/app.conf, got %#v", err)
				}
			}
		})
	}
}

func TestCapabilityXattr(t *testing.T) {
	for _, c := range []struct {
		text string
		want string
	}{
		{"", ""},
		{"=", ""},
		{"cap_net_raw=ep", "010000020020000000000000000000000000000000"[:40]},
		{"cap_net_raw,cap_net_admin+ep", "010000020030000000000000000000000000000000"[:40]},
		{"cap_setuid=p", "000000028000000000000000000000000000000000"[:40]},
	} {
		got, err := CapabilityXattr(c.text)
		if err != nil {
			t.Fatalf("%q: %v", c.text, err)
		}
		if hex.EncodeToString(got) != c.want {
			t.Errorf("%q: got %x, want %s", c.text, got, c.want)
		}
	}
	if _, err := CapabilityXattr("cap_bogus=ep"); err == nil {
		t.Error("unknown capability accepted")
	}
}
