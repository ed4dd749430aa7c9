package repo

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/ulikunitz/xz"
	"golang.org/x/crypto/blake2b"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/keyring"
)

// altFixtureRepo lays the real p10 checkinstall index out as a repository
// with the release line the real p10 release carries for it.
func altFixtureRepo(t *testing.T) string {
	src := filepath.Join(testutil.Fixtures(t, "alt"), "pkglist.checkinstall.xz")
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "base"), 0o755)
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "base", "pkglist.checkinstall.xz"), b, 0o644)
	rel := "Origin: ALT Linux Team\nLabel: p10\nSuite: p10\nArchitectures: x86_64 noarch\nComponents: checkinstall\nMD5Sum:\n 2a302598dcead80c989aa1c2fb2b7219 240792 base/pkglist.checkinstall\n"
	os.WriteFile(filepath.Join(dir, "base", "release"), []byte(rel), 0o644)
	return dir
}

func TestLoadALTFixture(t *testing.T) {
	dir := altFixtureRepo(t)
	src, err := NewSource(dir, SourceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := LoadALT(context.Background(), src, ALTOptions{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Packages) != 14 {
		t.Fatalf("got %d packages, want 14", len(r.Packages))
	}
	var kernel *Package
	sisyphus := 0
	for _, p := range r.Packages {
		if p.EVR.Disttag == "" || p.Location == "" || len(p.BLAKE2b) != 128 || len(p.MD5) != 32 || p.FileSize <= 0 {
			t.Errorf("%s: missing index fields: %+v", p.NEVRA(), p)
		}
		if !strings.HasPrefix(p.Location, "RPMS.checkinstall/") {
			t.Errorf("%s: location %s", p.NEVRA(), p.Location)
		}
		if strings.HasPrefix(p.EVR.Disttag, "sisyphus+") {
			sisyphus++
		}
		if p.Name == "kernel-image-std-def-checkinstall" {
			kernel = p
		}
	}
	if sisyphus == 0 {
		t.Error("expected sisyphus+ disttags among p10 packages")
	}
	if kernel == nil || !kernel.EVR.HasEpoch || kernel.EVR.Epoch != 2 || kernel.EVR.Disttag != "p10+415595.100.2.1" {
		t.Fatalf("kernel checkinstall: %+v", kernel)
	}
	found := false
	for _, d := range kernel.Requires {
		if d.Name == "kernel-image-std-def" && d.Version == "2:5.10.253-alt1:p10+415595.100.2.1" {
			found = true
		}
	}
	if !found {
		t.Errorf("kernel checkinstall requires: %+v", kernel.Requires)
	}
	if len(r.Indexes) != 1 || r.Indexes[0].Hash != "2a302598dcead80c989aa1c2fb2b7219" {
		t.Errorf("indexes: %+v", r.Indexes)
	}
}

// signedRepo writes a small ALT repository with one component, its index
// listed in a release signed by a fresh key. It returns the dir and key.
func signedRepo(t *testing.T, mutate func(rel string, pkglist []byte) (string, []byte)) (string, *openpgp.Entity) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testutil.Fixtures(t, "alt"), "pkglist.checkinstall.xz"))
	if err != nil {
		t.Fatal(err)
	}
	xr, _ := xz.NewReader(bytes.NewReader(raw))
	var plain bytes.Buffer
	plain.ReadFrom(xr)
	b2 := func(b []byte) string { s := blake2b.Sum512(b); return hex.EncodeToString(s[:]) }
	m5 := func(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }
	rel := fmt.Sprintf("Origin: test\nLabel: t\nComponents: classic\nMD5Sum:\n %s %d base/pkglist.classic\n %s %d base/pkglist.classic.xz\nBLAKE2b:\n %s %d base/pkglist.classic\n %s %d base/pkglist.classic.xz\n",
		m5(plain.Bytes()), plain.Len(), m5(raw), len(raw), b2(plain.Bytes()), plain.Len(), b2(raw), len(raw))
	pkglist := raw
	if mutate != nil {
		rel, pkglist = mutate(rel, pkglist)
	}
	ent, err := openpgp.NewEntity("Test Branch", "", "branch@example.org", &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA})
	if err != nil {
		t.Fatal(err)
	}
	var sig bytes.Buffer
	if err := openpgp.ArmoredDetachSign(&sig, ent, strings.NewReader(rel), nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "base"), 0o755)
	os.WriteFile(filepath.Join(dir, "base", "release"), append([]byte(rel), sig.Bytes()...), 0o644)
	os.WriteFile(filepath.Join(dir, "base", "pkglist.classic.xz"), pkglist, 0o644)
	return dir, ent
}

func keyringOf(t *testing.T, ent *openpgp.Entity) *keyring.Keyring {
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

func loadDir(t *testing.T, dir string, opts ALTOptions) (*ALTRepo, error) {
	src, err := NewSource(dir, SourceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return LoadALT(context.Background(), src, opts)
}

func TestLoadALTSigned(t *testing.T) {
	dir, ent := signedRepo(t, nil)
	r, err := loadDir(t, dir, ALTOptions{Keyring: keyringOf(t, ent)})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Packages) != 14 || len(r.Signers) != 1 || r.Indexes[0].Algorithm != "blake2b" || r.Indexes[0].Path != "base/pkglist.classic.xz" {
		t.Fatalf("got %d packages, signers %v, indexes %+v", len(r.Packages), r.Signers, r.Indexes)
	}
	// Another key does not verify it.
	_, other := signedRepo(t, nil)
	if _, err := loadDir(t, dir, ALTOptions{Keyring: keyringOf(t, other)}); err == nil || !strings.Contains(err.Error(), "not in the keyring") {
		t.Errorf("wrong key: %v", err)
	}
	// No keyring and no explicit skip: refused.
	if _, err := loadDir(t, dir, ALTOptions{}); err == nil || !strings.Contains(err.Error(), "no keyring") {
		t.Errorf("no keyring: %v", err)
	}
}

func TestLoadALTRefusesTampering(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(string, []byte) (string, []byte)
		after  func(dir string)
		want   string
	}{
		{"release edited after signing", nil, func(dir string) {
			p := filepath.Join(dir, "base", "release")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte("Label: t"), []byte("Label: x"), 1), 0o644)
		}, "does not verify"},
		{"index hash differs", func(rel string, pl []byte) (string, []byte) {
			pl = append([]byte(nil), pl...)
			pl[len(pl)/2] ^= 1
			return rel, pl
		}, nil, "differs from the release"},
		{"index size differs", func(rel string, pl []byte) (string, []byte) {
			return rel, append(append([]byte(nil), pl...), 0)
		}, nil, "size differs from the release"},
		{"index not listed", func(rel string, pl []byte) (string, []byte) {
			return strings.ReplaceAll(rel, "pkglist.classic", "pkglist.other"), pl
		}, nil, "lists neither"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, ent := signedRepo(t, c.mutate)
			if c.after != nil {
				c.after(dir)
			}
			_, err := loadDir(t, dir, ALTOptions{Keyring: keyringOf(t, ent)})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want error containing %q, got %v", c.want, err)
			}
		})
	}
}

func TestParseReleaseErrors(t *testing.T) {
	for _, bad := range []string{
		"MD5Sum:\n xyz 12 base/pkglist.classic\n",
		"MD5Sum:\n 00 notanumber base/pkglist.classic\n",
		"Label t\n",
		"Label: t\n-----BEGIN PGP SIGNATURE-----\nabc\n",
	} {
		if _, err := ParseRelease([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
