package repo

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/google/rpmpack"
	"github.com/ulikunitz/xz"
	"golang.org/x/crypto/blake2b"

	"github.com/nodeforge/builder/pkgbase/keyring"
	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

var awDate = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

type awPkg struct {
	name, version, release, arch string
	files                        map[string]string // path -> body
	requires                     []string
}

// awBuildRPM writes an rpmpack package with a changelog and a disttag into dir.
func awBuildRPM(t *testing.T, dir string, p awPkg) string {
	t.Helper()
	r, err := rpmpack.NewRPM(rpmpack.RPMMetaData{
		Name: p.name, Version: p.version, Release: p.release, Arch: p.arch,
		Summary: p.name + " test package", Licence: "MIT", Epoch: rpmpack.NoEpoch,
		BuildTime: awDate, Compressor: "xz",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range p.requires {
		if err := r.Requires.Set(req); err != nil {
			t.Fatal(err)
		}
	}
	for path, body := range p.files {
		r.AddFile(rpmpack.RPMFile{Name: path, Body: []byte(body), Mode: 0o755, Owner: "root", Group: "root", MTime: uint32(awDate.Unix())})
	}
	r.AddCustomTag(rpmhdr.TagDistTag, rpmpack.EntryString("p11+1000.100.1.1"))
	r.AddCustomTag(rpmhdr.TagChangelogTime, rpmpack.EntryInt32([]int32{int32(awDate.Unix())}))
	r.AddCustomTag(rpmhdr.TagChangelogName, rpmpack.EntryStringSlice([]string{"Test <t@example.org> " + p.version}))
	r.AddCustomTag(rpmhdr.TagChangelogText, rpmpack.EntryStringSlice([]string{"- built for a test"}))
	var buf bytes.Buffer
	if err := r.Write(&buf); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, p.name+"-"+p.version+"-"+p.release+"."+p.arch+".rpm")
	if err := os.WriteFile(f, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func awKeyring(t *testing.T, ent *openpgp.Entity) *keyring.Keyring {
	t.Helper()
	var buf bytes.Buffer
	if err := ent.Serialize(&buf); err != nil {
		t.Fatal(err)
	}
	kr := &keyring.Keyring{}
	if err := kr.Add(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	return kr
}

// awDist lays out two components and returns the dist description.
func awDist(t *testing.T) ALTDist {
	t.Helper()
	dir := t.TempDir()
	classic := filepath.Join(dir, "RPMS.classic")
	extra := filepath.Join(dir, "RPMS.extra")
	for _, d := range []string{classic, extra} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hello := awBuildRPM(t, classic, awPkg{
		name: "hello", version: "2.12", release: "alt1", arch: "x86_64",
		files: map[string]string{
			"/usr/bin/hello":              "#!/bin/sh\necho hello\n",
			"/usr/lib64/libhello.so.1":    "not really a library\n",
			"/usr/libexec/hello/helper":   "#!/bin/sh\n",
			"/usr/libexec/hello/unneeded": "#!/bin/sh\n",
			"/usr/share/doc/hello/README": "read me\n",
			"/etc/hello.conf":             "greeting=hi\n",
		},
	})
	shell := awBuildRPM(t, classic, awPkg{
		name: "sh", version: "5.2", release: "alt1", arch: "x86_64",
		files: map[string]string{"/bin/sh": "#!/bin/sh\n", "/usr/sbin/nologin": "#!/bin/sh\nexit 1\n", "/etc/shells": "/bin/sh\n"},
	})
	user := awBuildRPM(t, extra, awPkg{
		name: "hello-user", version: "1.0", release: "alt1", arch: "x86_64",
		files:    map[string]string{"/usr/share/hello-user/run": "#!/bin/sh\n/usr/libexec/hello/helper\n"},
		requires: []string{"/usr/libexec/hello/helper", "/bin/sh", "hello >= 2.0"},
	})
	ent, err := openpgp.NewEntity("Test Branch", "", "branch@example.org", &packet.Config{
		Algorithm: packet.PubKeyAlgoEdDSA,
		Time:      func() time.Time { return awDate.Add(-time.Hour) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return ALTDist{
		Dir:        dir,
		Components: map[string][]string{"classic": {shell, hello}, "extra": {user}},
		Archs:      []string{"x86_64", "noarch"},
		Origin:     "Test Origin", Label: "t11", Suite: "t11",
		Date:          awDate,
		Signer:        ent,
		RequiredPaths: []string{"/etc/shells"},
	}
}

func awReadTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestWriteALTDist(t *testing.T) {
	d := awDist(t)
	if err := WriteALTDist(d); err != nil {
		t.Fatal(err)
	}
	first := awReadTree(t, d.Dir)
	for _, want := range []string{"base/release", "base/release.classic", "base/release.extra", "base/pkglist.classic.xz", "base/pkglist.extra.xz"} {
		if _, ok := first[want]; !ok {
			t.Errorf("%s was not written", want)
		}
	}

	// Writing again gives the same bytes and leaves no temporary files.
	if err := WriteALTDist(d); err != nil {
		t.Fatal(err)
	}
	second := awReadTree(t, d.Dir)
	if !reflect.DeepEqual(first, second) {
		for k := range second {
			if !bytes.Equal(first[k], second[k]) {
				t.Errorf("%s differs between two writes", k)
			}
		}
	}

	src, err := NewSource(d.Dir, SourceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := LoadALT(context.Background(), src, ALTOptions{Keyring: awKeyring(t, d.Signer)})
	if err != nil {
		t.Fatal(err)
	}
	rel := r.Release
	if rel.Fields["Date"] != "Sun, 01 Jun 2025 12:00:00 +0000" || rel.Fields["Codename"] != "1748779200" ||
		rel.Fields["Origin"] != "Test Origin" || !reflect.DeepEqual(rel.Components, []string{"classic", "extra"}) ||
		!reflect.DeepEqual(rel.Archs, []string{"x86_64", "noarch"}) {
		t.Errorf("release fields: %+v components %v archs %v", rel.Fields, rel.Components, rel.Archs)
	}
	if len(r.Signers) != 1 || len(rel.BLAKE2b) != 6 || len(rel.MD5) != 6 {
		t.Errorf("signers %v, %d blake2b and %d md5 lines", r.Signers, len(rel.BLAKE2b), len(rel.MD5))
	}
	awCheckSigTime(t, rel.Signatures[0])

	if len(r.Packages) != 3 {
		t.Fatalf("got %d packages, want 3", len(r.Packages))
	}
	wantFiles := map[string][]string{
		// /etc/hello.conf, README and the unneeded helper are stripped;
		// the helper another package requires stays.
		"hello":      {"/usr/bin/hello", "/usr/lib64/libhello.so.1", "/usr/libexec/hello/helper"},
		"sh":         {"/bin/sh", "/etc/shells", "/usr/sbin/nologin"},
		"hello-user": nil,
	}
	for _, p := range r.Packages {
		comp := "classic"
		if p.Name == "hello-user" {
			comp = "extra"
		}
		file := filepath.Join(d.Dir, "RPMS."+comp, p.Name+"-"+p.EVR.Version+"-"+p.EVR.Release+".x86_64.rpm")
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		m := md5.Sum(raw)
		b := blake2b.Sum512(raw)
		if p.Location != "RPMS."+comp+"/"+filepath.Base(file) || p.FileSize != int64(len(raw)) ||
			p.MD5 != hex.EncodeToString(m[:]) || p.BLAKE2b != hex.EncodeToString(b[:]) {
			t.Errorf("%s: location %s size %d md5 %s blake2b %s", p.Name, p.Location, p.FileSize, p.MD5, p.BLAKE2b)
		}
		if p.EVR.Disttag != "p11+1000.100.1.1" || p.BuildTime != awDate.Unix() {
			t.Errorf("%s: disttag %q buildtime %d", p.Name, p.EVR.Disttag, p.BuildTime)
		}
		if !reflect.DeepEqual(p.Files, wantFiles[p.Name]) {
			t.Errorf("%s: stripped files %v, want %v", p.Name, p.Files, wantFiles[p.Name])
		}
	}

	// The raw entries: sorted by file name, changelog and per-file arrays gone.
	xr, err := xz.NewReader(bytes.NewReader(first["base/pkglist.classic.xz"]))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for {
		h, err := rpmhdr.ReadHeader(xr)
		if errors.Is(err, rpmhdr.ErrNoMoreHeaders) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.String(rpmhdr.CRPMTagFilename))
		for _, tag := range []uint32{rpmhdr.TagChangelogTime, rpmhdr.TagChangelogName, rpmhdr.TagChangelogText, rpmhdr.TagFileModes, rpmhdr.TagFileDigests, rpmhdr.TagLicense, rpmhdr.TagPayloadDigest} {
			if h.Has(tag) {
				t.Errorf("%s: index entry keeps tag %d", h.String(rpmhdr.TagName), tag)
			}
		}
		if h.String(rpmhdr.CRPMTagDirectory) != "RPMS.classic" || h.String(rpmhdr.TagDistTag) == "" {
			t.Errorf("%s: directory %q disttag %q", h.String(rpmhdr.TagName), h.String(rpmhdr.CRPMTagDirectory), h.String(rpmhdr.TagDistTag))
		}
		if e, _ := h.Entry(rpmhdr.CRPMTagFileSize); e.Type != rpmhdr.TypeInt32 {
			t.Errorf("CRPMTAG_FILESIZE has type %d", e.Type)
		}
	}
	if !reflect.DeepEqual(names, []string{"hello-2.12-alt1.x86_64.rpm", "sh-5.2-alt1.x86_64.rpm"}) {
		t.Errorf("entry order %v", names)
	}
}

// awCheckSigTime checks the signature carries the release date, not the clock.
func awCheckSigTime(t *testing.T, sig []byte) {
	t.Helper()
	blk, err := armor.Decode(bytes.NewReader(sig))
	if err != nil {
		t.Fatal(err)
	}
	p, err := packet.Read(blk.Body)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := p.(*packet.Signature)
	if !ok || !s.CreationTime.Equal(awDate) {
		t.Errorf("signature packet %T created %v, want %v", p, s.CreationTime, awDate)
	}
	if rest, _ := io.ReadAll(blk.Body); len(rest) != 0 {
		t.Errorf("%d bytes after the signature packet", len(rest))
	}
}

func TestWriteALTDistUnsigned(t *testing.T) {
	d := awDist(t)
	d.Signer = nil
	d.Codename = "42"
	if err := WriteALTDist(d); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(d.Dir, "base", "release"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "PGP") || !strings.Contains(string(raw), "\nCodename: 42\n") {
		t.Errorf("unsigned release:\n%s", raw)
	}
	if _, err := loadDir(t, d.Dir, ALTOptions{Keyring: awKeyring(t, awDist(t).Signer)}); err == nil {
		t.Error("an unsigned release loaded with a keyring")
	}
	r, err := loadDir(t, d.Dir, ALTOptions{InsecureSkipVerify: true, Components: []string{"extra"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Packages) != 1 || r.Packages[0].Name != "hello-user" {
		t.Errorf("extra component: %+v", r.Packages)
	}
}

func TestWriteALTDistErrors(t *testing.T) {
	d := awDist(t)
	outside := filepath.Join(t.TempDir(), "x.rpm")
	os.WriteFile(outside, []byte("x"), 0o644)
	broken := filepath.Join(d.Dir, "RPMS.classic", "broken.rpm")
	os.WriteFile(broken, []byte("not an rpm at all, not even close to the 96-byte lead"), 0o644)
	notSigning, _ := openpgp.NewEntity("late", "", "late@example.org", &packet.Config{
		Algorithm: packet.PubKeyAlgoEdDSA, Time: func() time.Time { return awDate.Add(time.Hour) },
	})
	cases := []struct {
		name   string
		mutate func(*ALTDist)
		want   string
	}{
		{"no date", func(d *ALTDist) { d.Date = time.Time{} }, "release date is required"},
		{"no components", func(d *ALTDist) { d.Components = nil }, "no components"},
		{"bad component", func(d *ALTDist) { d.Components["a/b"] = nil }, `component name "a/b"`},
		{"outside", func(d *ALTDist) { d.Components["classic"] = append(d.Components["classic"], outside) }, "not in"},
		{"broken", func(d *ALTDist) { d.Components["classic"] = append(d.Components["classic"], broken) }, "broken.rpm: not an rpm"},
		{"duplicate", func(d *ALTDist) {
			d.Components["classic"] = append(d.Components["classic"], d.Components["classic"][0])
		}, "twice"},
		{"key too new", func(d *ALTDist) { d.Signer = notSigning }, "valid at 2025-06-01T12:00:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dd := d
			dd.Components = map[string][]string{}
			for k, v := range d.Components {
				dd.Components[k] = append([]string(nil), v...)
			}
			c.mutate(&dd)
			err := WriteALTDist(dd)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestALTDistPackagesAndFileRequires(t *testing.T) {
	d := awDist(t)
	comps, err := ALTDistPackages(d.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(comps) != 2 || len(comps["classic"]) != 2 || len(comps["extra"]) != 1 {
		t.Fatalf("components %v", comps)
	}
	req, err := RPMFileRequires(comps["extra"])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(req, []string{"/bin/sh", "/usr/libexec/hello/helper"}) {
		t.Errorf("file requires %v", req)
	}
	if _, err := ALTDistPackages(t.TempDir()); err == nil {
		t.Error("an empty dir has packages")
	}
}
