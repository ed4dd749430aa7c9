package repo

import (
	"bytes"
	"testing"

	"github.com/nodeforge/builder/pkgbase/evr"
)

// The parsers read metadata from any mirror: whatever the bytes, they must
// return an error or a well-formed result, never panic. Seeds live in
// testdata/fuzz/<Name>/ (real createrepo_c output plus hand-made snippets).

func FuzzRepomd(f *testing.F) {
	f.Add([]byte(`<repomd><data type="primary"><checksum type="sha256">00</checksum><location href="p.xml.gz"/><size>1</size></data></repomd>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		md, err := ParseRepomd(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, d := range md.Data {
			if d.Size < 0 || d.OpenSize < 0 {
				t.Fatalf("negative size in %+v", d)
			}
		}
		md.Get("primary")
	})
}

func FuzzPrimary(f *testing.F) {
	f.Add([]byte(mdPrimaryHead + `<package><name>a</name><arch>noarch</arch><version epoch="1" ver="1" rel="1"/><location href="a.rpm"/>` +
		`<format><rpm:provides><rpm:entry name="a" flags="EQ" epoch="0" ver="1" rel="1"/></rpm:provides></format></package></metadata>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pkgs, err := ParsePrimary(bytes.NewReader(data), "file:///r")
		if err != nil {
			return
		}
		for _, p := range pkgs {
			if p == nil || p.Name == "" || p.Arch == "" || p.EVR.Version == "" || p.Location == "" {
				t.Fatalf("incomplete package %+v", p)
			}
			if p.Semantics != evr.RPM || p.Size < 0 || p.FileSize < 0 || p.BuildTime < 0 || p.EVR.Epoch < 0 {
				t.Fatalf("bad package %+v", p)
			}
			for _, deps := range [][]Dep{p.Provides, p.Requires, p.Conflicts, p.Obsoletes} {
				for _, d := range deps {
					if d.Name == "" || d.Flags&^(evr.FlagSense|evr.FlagPrereq) != 0 {
						t.Fatalf("bad dep %+v in %s", d, p.NEVRA())
					}
				}
			}
			_ = p.NEVRA()
		}
	})
}

func FuzzFilelists(f *testing.F) {
	f.Add([]byte(`<filelists><package pkgid="1" name="a" arch="noarch"><file>/a</file></package></filelists>`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = ParseFilelists(bytes.NewReader(data), func(pkgid, name, arch string, files []string) error {
			if pkgid == "" {
				t.Fatal("empty pkgid")
			}
			for _, f := range files {
				if f == "" {
					t.Fatal("empty file name")
				}
			}
			return nil
		})
	})
}
