package demobase

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/evr"
	"github.com/nodeforge/builder/pkgbase/keyring"
	"github.com/nodeforge/builder/pkgbase/repo"
	"github.com/nodeforge/builder/pkgbase/rpmfile"
)

// Writing the base takes about a second: share one across the read-only tests.
var (
	sharedOnce sync.Once
	sharedDir  string
	sharedErr  error
)

func demoDir(t *testing.T) string {
	t.Helper()
	sharedOnce.Do(func() {
		sharedDir, sharedErr = os.MkdirTemp("", "demobase-test-")
		if sharedErr == nil {
			sharedErr = Write(sharedDir)
		}
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return sharedDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

type entry struct {
	mode  fs.FileMode
	mtime time.Time
	data  []byte
}

func readTree(t *testing.T, root string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := entry{mode: fi.Mode(), mtime: fi.ModTime()}
		if fi.Mode().IsRegular() {
			if e.data, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReproducible writes the base twice under a different umask, time zone
// and working directory and compares every byte, mode and mtime.
func TestReproducible(t *testing.T) {
	write := func(umask int, tz string) map[string]entry {
		old := syscall.Umask(umask)
		defer syscall.Umask(old)
		t.Setenv("TZ", tz)
		oldLocal := time.Local
		defer func() { time.Local = oldLocal }()
		if loc, err := time.LoadLocation(tz); err == nil {
			time.Local = loc
		} else {
			time.Local = time.FixedZone(tz, 5*3600+45*60)
		}
		dir := filepath.Join(t.TempDir(), "base")
		if err := Write(dir); err != nil {
			t.Fatal(err)
		}
		return readTree(t, dir)
	}
	a := write(0o022, "UTC")
	t.Chdir(t.TempDir())
	b := write(0o077, "Asia/Kathmandu")
	if len(a) == 0 {
		t.Fatal("nothing written")
	}
	var names []string
	for k := range a {
		names = append(names, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			t.Errorf("%s only in the second write", k)
		}
	}
	sort.Strings(names)
	sum := sha256.New()
	for _, k := range names {
		x, y := a[k], b[k]
		if x.mode != y.mode || !x.mtime.Equal(y.mtime) || !bytes.Equal(x.data, y.data) {
			t.Errorf("%s differs: mode %v/%v mtime %v/%v, %d/%d bytes", k, x.mode, y.mode, x.mtime, y.mtime, len(x.data), len(y.data))
		}
		if x.mode.IsRegular() && x.mode.Perm() != 0o644 || x.mode.IsDir() && x.mode.Perm() != 0o755 {
			t.Errorf("%s: mode %v", k, x.mode)
		}
		sum.Write([]byte(k))
		sum.Write(x.data)
	}
	t.Logf("%d entries, tree digest %s", len(names), hex.EncodeToString(sum.Sum(nil)))
}

func TestSize(t *testing.T) {
	dir := demoDir(t)
	var total int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			fi, _ := d.Info()
			total += fi.Size()
		}
		return err
	})
	if total > 2<<20 {
		t.Errorf("demo base is %d bytes, want under 2 MiB", total)
	}
	t.Logf("demo base: %d bytes", total)
}

func rpmFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, RepoDir, "*", "RPMS."+Component, "*.rpm"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := Packages()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != n {
		t.Fatalf("%d .rpm files, want %d", len(files), n)
	}
	return files
}

// TestRPMTool checks every package with Debian's rpm: query, signature and
// digests after importing the demo key, and the payload via rpm2cpio.
func TestRPMTool(t *testing.T) {
	rpmBin := testutil.NeedTool(t, "rpm")
	rpm2cpio := testutil.NeedTool(t, "rpm2cpio")
	cpioBin := testutil.NeedTool(t, "cpio")
	dir := demoDir(t)
	db := t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
		}
		return string(out)
	}
	run(rpmBin, "--dbpath", db, "--import", filepath.Join(dir, KeyFile))
	for _, f := range rpmFiles(t, dir) {
		base := filepath.Base(f)
		name := strings.TrimSpace(run(rpmBin, "--dbpath", db, "-qp", "--qf", "%{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}.rpm %{DISTTAG}", f))
		if fields := strings.Fields(name); len(fields) != 2 || fields[0] != base || !strings.Contains(fields[1], "+") {
			t.Errorf("%s: rpm -qp says %q", base, name)
		}
		if out := run(rpmBin, "--dbpath", db, "-K", f); !strings.Contains(out, "digests signatures OK") {
			t.Errorf("%s: rpm -K: %s", base, out)
		}
		listed := strings.Fields(run(rpmBin, "--dbpath", db, "-qpl", f))
		cmd := exec.Command("sh", "-c", `"$0" "$1" | "$2" -t --quiet`, rpm2cpio, f, cpioBin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: rpm2cpio | cpio -t: %v", base, err)
		}
		var inArchive []string
		for _, l := range strings.Fields(string(out)) {
			inArchive = append(inArchive, "/"+strings.TrimPrefix(strings.TrimPrefix(l, "."), "/"))
		}
		sort.Strings(listed)
		sort.Strings(inArchive)
		if len(listed) == 0 || !reflect.DeepEqual(listed, inArchive) {
			t.Errorf("%s: rpm -qpl lists %v, the payload has %v", base, listed, inArchive)
		}
	}
}

// TestOwnReaders reads every package with rpmfile (digests, payload,
// signature against keys/demo.asc).
func TestOwnReaders(t *testing.T) {
	dir := demoDir(t)
	kr, err := keyring.Load(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	fp, _ := Fingerprint()
	if got := kr.Fingerprints(); !reflect.DeepEqual(got, []string{fp}) {
		t.Fatalf("keyring fingerprints %v, want %s", got, fp)
	}
	for _, f := range rpmFiles(t, dir) {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := rpmfile.Open(fh)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if p.Compressor() != payloadCompressor {
			t.Errorf("%s: compressor %s", f, p.Compressor())
		}
		v, err := p.Verify(rpmfile.VerifyOptions{Keyring: kr})
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := v.Err(true); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
	}
}

func loadBase(t *testing.T, dir string) []*repo.Package {
	t.Helper()
	kr, err := keyring.Load(filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	fp, _ := Fingerprint()
	var all []*repo.Package
	for _, dist := range Dists {
		src, err := repo.NewSource(filepath.Join(dir, RepoDir, dist), repo.SourceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := repo.LoadALT(context.Background(), src, repo.ALTOptions{Keyring: kr})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.Signers, []string{fp}) {
			t.Errorf("%s: signers %v", dist, r.Signers)
		}
		for _, p := range r.Packages {
			if p.Arch != dist {
				t.Errorf("%s in dist %s", p.NEVRA(), dist)
			}
		}
		all = append(all, r.Packages...)
	}
	return all
}

// TestLoadALT reads both dists back with the repository reader and checks
// that the base is closed: every require is met by some package.
func TestLoadALT(t *testing.T) {
	dir := demoDir(t)
	pkgs := loadBase(t, dir)
	n, _ := Packages()
	if len(pkgs) != n {
		t.Fatalf("loaded %d packages, wrote %d", len(pkgs), n)
	}
	byName := map[string][]*repo.Package{}
	for _, p := range pkgs {
		byName[p.Name] = append(byName[p.Name], p)
	}
	if k := byName["kernel-image-std-def"]; len(k) != 2 || !k[0].EVR.HasEpoch || k[0].EVR.Epoch != 2 || k[0].BuildTime >= k[1].BuildTime {
		t.Errorf("kernels: %+v", k)
	}
	sisyphus := 0
	for _, p := range pkgs {
		if strings.HasPrefix(p.EVR.Disttag, "sisyphus+") {
			sisyphus++
		}
	}
	if sisyphus < 2 {
		t.Errorf("%d packages with a sisyphus+ disttag", sisyphus)
	}
	// The noarch index keeps a non-bin path only because an x86_64 package requires it.
	if ca := byName["ca-certificates"]; len(ca) != 1 || !reflect.DeepEqual(ca[0].Files, []string{"/etc/pki/tls/certs/ca-bundle.crt"}) {
		t.Errorf("ca-certificates stripped files: %+v", ca)
	}

	provides := func(p *repo.Package, d repo.Dep) bool {
		if strings.HasPrefix(d.Name, "/") {
			for _, f := range p.Files {
				if f == d.Name {
					return true
				}
			}
			return false
		}
		for _, pr := range p.Provides {
			if pr.Name == d.Name && evr.Satisfies(evr.ALT, evr.Parse(pr.Version), pr.Flags, evr.Parse(d.Version), d.Flags) {
				return true
			}
		}
		return false
	}
	sets := 0
	for _, p := range pkgs {
		for _, d := range p.Requires {
			if strings.HasPrefix(d.Name, "rpmlib(") {
				continue
			}
			if strings.HasPrefix(d.Version, "set:") {
				sets++
			}
			ok := false
			for _, q := range pkgs {
				ok = ok || provides(q, d)
			}
			if !ok {
				t.Errorf("%s: nothing provides %s %#x %s", p.NEVRA(), d.Name, d.Flags, d.Version)
			}
		}
	}
	if sets == 0 {
		t.Error("no set-version requires")
	}
}

// TestSpec loads the written spec: it validates, points at the written
// repository and key, and names the same components and packages as the
// shipped p11 spec, all present in the base.
func TestSpec(t *testing.T) {
	dir := demoDir(t)
	t.Chdir(t.TempDir()) // paths resolve against the spec, not the cwd
	s, err := specs.Load(filepath.Join(dir, SpecFile))
	if err != nil {
		t.Fatal(err)
	}
	fp, _ := Fingerprint()
	if s.Name != "demo" || s.Branch != "p11" || len(s.Repositories) != 1 {
		t.Fatalf("spec: %+v", s)
	}
	r := s.Repositories[0]
	if r.Format != "alt" || !reflect.DeepEqual(r.Fingerprints, []string{fp}) || !reflect.DeepEqual(r.Keyring, []string{filepath.Join(dir, KeyFile)}) {
		t.Errorf("repository: %+v", r)
	}
	urls := r.DistURLs(Arch)
	want := []string{filepath.Join(dir, RepoDir, Arch), filepath.Join(dir, RepoDir, "noarch")}
	if !reflect.DeepEqual(urls, want) {
		t.Errorf("dist URLs %v, want %v", urls, want)
	}
	p11, err := specs.LoadShipped("p11")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Components, p11.Components) || !reflect.DeepEqual(s.MultiVersion, p11.MultiVersion) {
		t.Errorf("components differ from p11:\n%+v\n%+v", s.Components, p11.Components)
	}
	names := map[string]bool{}
	for _, p := range loadBase(t, dir) {
		names[p.Name] = true
	}
	for c, comp := range s.Components {
		for _, p := range comp.Packages {
			if !names[p] {
				t.Errorf("component %s: package %s is not in the base", c, p)
			}
		}
	}
}

func TestDefinitions(t *testing.T) {
	ps, err := packages(nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range ps {
		if seen[p.fileName()] {
			t.Errorf("two packages named %s", p.fileName())
		}
		seen[p.fileName()] = true
		if p.built.Before(buildEpoch.Add(-60*24*time.Hour)) || !p.built.Before(releaseDate) {
			t.Errorf("%s: build time %v outside the demo time line", p.name, p.built)
		}
	}
	if len(ps) < 30 || len(ps) > 40 {
		t.Errorf("%d packages, want 30-40", len(ps))
	}
	// The key must be valid before the first signature.
	e, err := Key()
	if err != nil {
		t.Fatal(err)
	}
	if !e.PrimaryKey.CreationTime.Before(ps[0].built) {
		t.Errorf("key created %v, after the first build %v", e.PrimaryKey.CreationTime, ps[0].built)
	}
}
