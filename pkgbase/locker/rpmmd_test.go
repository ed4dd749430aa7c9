package locker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/pkgbase/rpmfile"
	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// foundSpec is one rpmbuild run: six packages as subpackages. foo ships a
// file primary.xml lists (/usr/bin/foo) and one only filelists.xml lists
// (/usr/libexec/foo); bar needs the first, baz the second.
const foundSpec = `Name: found
Version: 1
Release: 1
Summary: rpm-md repository as found
License: MIT
AutoReqProv: no
%define debug_package %{nil}
%define _build_id_links none
%description
test
%package -n foo
Summary: foo
%description -n foo
foo
%package -n bar
Summary: bar
Requires: /usr/bin/foo
%description -n bar
bar
%package -n baz
Summary: baz
Requires: /usr/libexec/foo
%description -n baz
baz
%package -n evil
Summary: signed by another key
%description -n evil
evil
%package -n plain
Summary: not signed
%description -n plain
plain
%package -n tampered
Summary: header-only signature changed, header+payload one good
%description -n tampered
tampered
%install
mkdir -p %{buildroot}/usr/bin %{buildroot}/usr/libexec
touch %{buildroot}/usr/bin/foo %{buildroot}/usr/libexec/foo
%files -n foo
/usr/bin/foo
/usr/libexec/foo
%files -n bar
%files -n baz
%files -n evil
%files -n plain
%files -n tampered
`

// gpgHome makes two signing keys in a new GNUPGHOME (short path: the
// agent's socket must fit a sockaddr) and returns it with the public key of
// "good" written to keyFile and the key ids (lower-case hex) of both.
func gpgHome(t *testing.T, keyFile string) (home, goodID, otherID string) {
	t.Helper()
	home, err := os.MkdirTemp("", "gpg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c := exec.Command("gpgconf", "--kill", "gpg-agent")
		c.Env = append(os.Environ(), "GNUPGHOME="+home)
		c.Run()
		os.RemoveAll(home)
	})
	gpg := func(args ...string) string {
		c := exec.Command("gpg", append([]string{"--batch", "--pinentry-mode", "loopback", "--passphrase", ""}, args...)...)
		c.Env = append(os.Environ(), "GNUPGHOME="+home)
		out, err := c.Output()
		if err != nil {
			t.Fatalf("gpg %v: %v", args, err)
		}
		return string(out)
	}
	id := func(uid string) string {
		for _, l := range strings.Split(gpg("--with-colons", "--list-keys", uid), "\n") {
			if f := strings.Split(l, ":"); f[0] == "pub" {
				return strings.ToLower(f[4])
			}
		}
		t.Fatalf("no key %s", uid)
		return ""
	}
	for _, uid := range []string{"good@test.invalid", "other@test.invalid"} {
		gpg("--quick-gen-key", "Nodeforge test <"+uid+">", "rsa2048", "sign", "never")
	}
	if err := os.WriteFile(keyFile, []byte(gpg("--armor", "--export", "good@test.invalid")), 0o644); err != nil {
		t.Fatal(err)
	}
	return home, id("good@test.invalid"), id("other@test.invalid")
}

// foundRepo builds the packages, signs foo, bar and baz with the good key
// and evil with the other, signs tampered with the good key twice (header
// only and, as rpm v3 did, header and payload) and flips the last byte of
// its header-only signature, and indexes them with createrepo_c:
// repomd.xml unsigned, as Fedora's and Rocky's are.
func foundRepo(t *testing.T, dir string) (goodID, otherID string) {
	t.Helper()
	for _, tool := range []string{"rpmbuild", "rpmsign", "createrepo_c", "gpg", "gpgconf"} {
		testutil.NeedTool(t, tool)
	}
	repoDir := filepath.Join(dir, "repo")
	home, goodID, otherID := gpgHome(t, filepath.Join(dir, "good.asc"))
	env := append(os.Environ(), "HOME="+dir, "GNUPGHOME="+home, "LC_ALL=C", "SOURCE_DATE_EPOCH=1700000000")
	run := func(name string, args ...string) {
		t.Helper()
		c := exec.Command(name, args...)
		c.Env = env
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	spec := filepath.Join(dir, "found.spec")
	if err := os.WriteFile(spec, []byte(foundSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	run("rpmbuild", "-bb", "--quiet", "--target", "x86_64", "--define", "_topdir "+filepath.Join(dir, "top"), "--define", "_rpmdir "+repoDir,
		// %% keeps the name format from expanding once for every subpackage.
		"--define", "_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm", "--define", "use_source_date_epoch_as_buildtime 1", spec)
	sign := func(uid string, extra []string, names ...string) {
		args := append([]string{"--define", "__gpg /usr/bin/gpg", "--define", "_gpg_name " + uid, "--addsign"}, extra...)
		for _, n := range names {
			args = append(args, filepath.Join(repoDir, n+"-1-1.x86_64.rpm"))
		}
		run("rpmsign", args...)
	}
	sign("good@test.invalid", nil, "foo", "bar", "baz")
	sign("other@test.invalid", nil, "evil")
	sign("good@test.invalid", []string{"--rpmv3"}, "tampered")
	tampered := filepath.Join(repoDir, "tampered-1-1.x86_64.rpm")
	b, err := os.ReadFile(tampered)
	if err != nil {
		t.Fatal(err)
	}
	p, err := rpmfile.Open(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	e, ok := p.Signature.Entry(rpmhdr.SigRSA)
	if !ok || !p.Signature.Has(rpmhdr.SigPGP) {
		t.Fatalf("rpmsign --rpmv3 wrote signature tags %v", p.Signature.Tags())
	}
	b[rpmfile.LeadSize+16+16*len(p.Signature.Entries)+int(e.Offset+e.Count)-1] ^= 0xff
	if err := os.WriteFile(tampered, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// rpm, the judge, with the good key imported: BAD, NOT OK.
	db := filepath.Join(dir, "rpmdb")
	run(testutil.NeedTool(t, "rpmkeys"), "--dbpath", db, "--import", filepath.Join(dir, "good.asc"))
	c := exec.Command("rpmkeys", "--dbpath", db, "-Kv", tampered)
	c.Env = env
	if out, err := c.CombinedOutput(); err == nil || !strings.Contains(string(out), "Header V4 RSA/SHA512 Signature, key ID "+goodID[8:]+": BAD") {
		t.Fatalf("rpmkeys -Kv on the tampered package: %v\n%s", err, out)
	}
	run("createrepo_c", "--quiet", "--no-database", repoDir)
	if _, err := os.Stat(filepath.Join(repoDir, "repodata", "repomd.xml.asc")); err == nil {
		t.Fatal("createrepo_c signed repomd.xml")
	}
	return goodID, otherID
}

// foundLock locks a spec over the repository with the given trust mode and
// rootfs packages.
func foundLock(t *testing.T, dir, verify string, pkgs ...string) (*lock.Lock, error) {
	t.Helper()
	y := fmt.Sprintf("name: found\nversion: 1\narchitectures: [x86_64]\nrepositories:\n"+
		"  - {name: r, url: repo, format: rpm-md, keyring: [good.asc]%s}\ncomponents:\n  rootfs: {kind: rootfs, packages: [%s]}\n",
		verify, strings.Join(pkgs, ", "))
	p := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := specs.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return Create(context.Background(), s, Options{Cache: &cache.Cache{Dir: filepath.Join(dir, "cache")}})
}

// TestLockRepositoryAsFound: an rpm-md repository as Fedora publishes it
// (createrepo_c, repomd.xml unsigned, packages signed by rpmsign) locks
// with verify: packages, every package checked against the keyring; a
// package signed by another key or not at all is refused by name and key.
// Without filelists metadata, what primary.xml answers resolves, and a
// file only filelists.xml would answer fails saying why, as dnf fails.
func TestLockRepositoryAsFound(t *testing.T) {
	dir := t.TempDir()
	goodID, otherID := foundRepo(t, dir)

	if _, err := foundLock(t, dir, "", "bar"); err == nil || !strings.Contains(err.Error(), "repomd.xml is not signed") {
		t.Fatalf("verify: all over an unsigned repomd.xml: %v", err)
	}
	l, err := foundLock(t, dir, ", verify: packages", "bar", "baz")
	if err != nil {
		t.Fatal(err)
	}
	r := l.Repositories[0]
	if r.Verify != specs.VerifyPackages || len(r.Signers) != 0 {
		t.Errorf("lock repository: verify %q, signers %v", r.Verify, r.Signers)
	}
	for _, p := range l.Architectures["x86_64"].Packages {
		if p.SignerKeyID != goodID || p.SignerFingerprint == "" {
			t.Errorf("%s: signed by %s (%s), want %s", p.NEVRA, p.SignerKeyID, p.SignerFingerprint, goodID)
		}
	}
	if b, _ := l.Marshal(); !strings.Contains(string(b), `"verify": "packages"`) {
		t.Error("the lock does not record the trust mode")
	}

	// Refused, naming the file, the signature and the rule: a key outside
	// the keyring is said to be one, a changed signature is BAD although
	// the other one verifies (both signatures are by the good key).
	for name, want := range map[string]string{
		"evil":     "evil-1-1.x86_64: package file evil-1-1.x86_64.rpm refused: header-only RSA/SHA512 signature (RPMTAG_RSAHEADER) is by key " + otherID + ", which is not in the keyring (unknown key, not tampering)",
		"plain":    "plain-1-1.x86_64: package file plain-1-1.x86_64.rpm refused: package is not signed",
		"tampered": "tampered-1-1.x86_64: package file tampered-1-1.x86_64.rpm refused: header-only RSA/SHA512 signature (RPMTAG_RSAHEADER) is BAD (signature by key " + goodID,
	} {
		_, err := foundLock(t, dir, ", verify: packages", name)
		t.Logf("%s: %v", name, err)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want a refusal saying %q, got %v", name, want, err)
		}
		if name == "tampered" && strings.Contains(err.Error(), "RPMSIGTAG_PGP") {
			t.Errorf("tampered: the good header+payload signature is blamed: %v", err)
		}
	}

	// The same repository without filelists metadata.
	md := filepath.Join(dir, "repo", repo.RepomdPath)
	b, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, `<data type="filelists">`)
	end := start + strings.Index(s[start:], "</data>") + len("</data>")
	if start < 0 || end < start {
		t.Fatalf("no filelists in %s", s)
	}
	if err := os.WriteFile(md, []byte(s[:start]+s[end:]), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := foundLock(t, dir, ", verify: packages", "bar"); err != nil {
		t.Errorf("a file primary.xml lists: %v", err)
	}
	_, err = foundLock(t, dir, ", verify: packages", "baz")
	t.Logf("baz: %v", err)
	want := `baz-1-1.x86_64 requires /usr/libexec/foo, which nothing provides (the repository "r" has no filelists metadata, so only the files primary.xml lists are known)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("want %q, got %v", want, err)
	}

	// dnf, the oracle, reads the repository the same way.
	if _, err := os.Stat("/usr/bin/dnf"); err != nil {
		testutil.Missing(t, "dnf")
	}
	if out := dnfInstall(t, dir, "bar"); !strings.Contains(out, "Installing:") {
		t.Errorf("dnf install bar:\n%s", out)
	}
	out := dnfInstall(t, dir, "baz")
	t.Logf("dnf install baz: %s", out)
	if !strings.Contains(out, "nothing provides /usr/libexec/foo needed by baz-1-1.x86_64") {
		t.Errorf("dnf install baz:\n%s", out)
	}
}

// dnfInstall asks dnf what it would install (--assumeno) from the test
// repository and returns its output.
func dnfInstall(t *testing.T, dir, pkg string) string {
	t.Helper()
	root := filepath.Join(dir, "dnfroot-"+pkg)
	c := exec.Command("/usr/bin/dnf", "--installroot="+root, "--setopt=reposdir=/dev/null", "--setopt=cachedir="+filepath.Join(dir, "dnfcache-"+pkg),
		"--nogpgcheck", "--repofrompath=r,file://"+filepath.Join(dir, "repo"), "--repo=r", "--forcearch=x86_64", "--releasever=1",
		"--assumeno", "install", pkg)
	c.Env = append(os.Environ(), "HOME="+dir, "LC_ALL=C.UTF-8", "LANG=C.UTF-8")
	out, _ := c.CombinedOutput() // --assumeno always exits 1
	return string(out)
}
