package builder

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/demobase"
)

// hostSpec wraps programs of the host (Debian's /bin/echo and the glibc it
// runs with: real ELF code the demo base's stand-ins are not) into RPMs
// with rpmbuild: hostlibc (the loader, libc, the multiarch ld.so.conf),
// hostecho (/usr/bin/echo, needing hostlibc), hostbroken (echo without
// its library), hostsuid (a setuid copy of true).
const hostSpec = `%define _build_id_links none
%define debug_package %{nil}
%define __spec_install_post %{nil}
%define __arch_install_post %{nil}
%define __os_install_post %{nil}
Name: host
Version: 1
Release: 1
Summary: host programs
License: GPL-3.0-or-later
AutoReqProv: no
%description
host programs, wrapped for the container image tests
%package -n hostlibc
AutoReqProv: no
Summary: glibc of the host
%description -n hostlibc
glibc
%package -n hostecho
AutoReqProv: no
Summary: echo of the host
Requires: hostlibc
%description -n hostecho
echo
%package -n hostbroken
AutoReqProv: no
Summary: echo without libc
%description -n hostbroken
echo
%package -n hostsuid
AutoReqProv: no
Summary: a setuid program
%description -n hostsuid
suid
%install
mkdir -p %{buildroot}/lib/x86_64-linux-gnu %{buildroot}/lib64 %{buildroot}/usr/bin %{buildroot}/etc/ld.so.conf.d %{buildroot}/usr/share/ca-certificates/test
cp -L /lib/x86_64-linux-gnu/libc.so.6 /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 %{buildroot}/lib/x86_64-linux-gnu/
ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 %{buildroot}/lib64/ld-linux-x86-64.so.2
printf 'include /etc/ld.so.conf.d/*.conf\n' > %{buildroot}/etc/ld.so.conf
printf '/lib/x86_64-linux-gnu\n' > %{buildroot}/etc/ld.so.conf.d/x86_64-linux-gnu.conf
printf -- '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n' > %{buildroot}/usr/share/ca-certificates/test/a.crt
cp -L /bin/echo %{buildroot}/usr/bin/echo
cp -L /bin/echo %{buildroot}/usr/bin/echo2
cp -L /bin/true %{buildroot}/usr/bin/su2
%files -n hostlibc
/lib/x86_64-linux-gnu/libc.so.6
/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
/lib64/ld-linux-x86-64.so.2
/etc/ld.so.conf
/etc/ld.so.conf.d/x86_64-linux-gnu.conf
/usr/share/ca-certificates/test/a.crt
%files -n hostecho
/usr/bin/echo
%files -n hostbroken
/usr/bin/echo2
%files -n hostsuid
%attr(4755,root,root) /usr/bin/su2
`

// hostImages is the images section of the test spec.
const hostImages = `
images:
  hello:
    packages: [hostecho]
    entrypoint: [/usr/local/bin/echo]
    cmd: [hello from the image]
    env: {GREETING: hi}
    workdir: /
    user: app
    users: [{name: app, uid: 1000}]
    labels: {org.example.test: "yes"}
    annotations: {org.example.note: host echo}
    links: {/usr/local/bin/echo: /usr/bin/echo}
  hello-zstd:
    packages: [hostecho]
    entrypoint: [/usr/bin/echo]
    user: "0:0"
    compression: zstd
`

// newHostDemo writes the demo base with a second repository of host
// programs (rpmbuild, createrepo_c) and the images, and locks it.
func newHostDemo(t *testing.T, images string) *demoRelease {
	t.Helper()
	rpmbuild := testutil.NeedTool(t, "rpmbuild")
	createrepo := testutil.NeedTool(t, "createrepo_c")
	testutil.NeedFile(t, "/lib/x86_64-linux-gnu/libc.so.6", "libc6")
	dir := filepath.Join(t.TempDir(), "demo")
	if err := demobase.Write(dir); err != nil {
		t.Fatal(err)
	}
	top := t.TempDir()
	specFile := filepath.Join(top, "host.spec")
	if err := os.WriteFile(specFile, []byte(hostSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(rpmbuild, "-bb", "--define", "_topdir "+top, "--target", "x86_64", specFile).CombinedOutput(); err != nil {
		t.Fatalf("rpmbuild: %v\n%s", err, out)
	}
	repoDir := filepath.Join(dir, "host")
	if err := os.Rename(filepath.Join(top, "RPMS"), repoDir); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(createrepo, repoDir).CombinedOutput(); err != nil {
		t.Fatalf("createrepo_c: %v\n%s", err, out)
	}
	specPath := filepath.Join(dir, demobase.SpecFile)
	b, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("repositories:\n"), []byte("repositories:\n  - name: host\n    url: host\n    format: rpm-md\n    insecure-skip-verify: true\n"), 1)
	if err := os.WriteFile(specPath, append(b, images...), 0o644); err != nil {
		t.Fatal(err)
	}
	return lockSpec(t, specPath)
}

// TestContainerImages builds the demo with two images of real host
// programs and has skopeo read and copy their layouts, crane validate
// them in a registry, and runc run one.
func TestContainerImages(t *testing.T) {
	d := newHostDemo(t, hostImages)
	if got := d.lock.Architectures["x86_64"].Images["hello"]; len(got) != 2 || !strings.HasPrefix(got[0], "hostecho-1-1") || !strings.HasPrefix(got[1], "hostlibc-1-1") {
		t.Fatalf("the lock's hello image: %v", got)
	}
	if got := d.lock.Resolution.Images["hello"]; len(got) != 1 || got[0] != "hostecho" {
		t.Fatalf("the lock's resolution of hello: %v", got)
	}
	out := filepath.Join(t.TempDir(), "out")
	rep := d.build(t, out, 0)
	if len(rep.Images) != 2 {
		t.Fatalf("report images: %v", rep.Images)
	}
	ir := rep.Architectures["x86_64"].Images["hello"]
	files := map[string]report.FileEntry{}
	for _, f := range ir.Files {
		files[f.Path] = f
	}
	for p, origin := range map[string]string{"/usr/bin/echo": "hostecho", "/usr/local/bin/echo": "image-link", "/etc/passwd": "accounts",
		"/etc/ld.so.cache": "ldconfig", "/etc/os-release": "os-release", "/etc/ssl/certs/ca-certificates.crt": "ca-bundle"} {
		if f, ok := files[p]; !ok || (f.Origin.Generator != origin && !strings.HasPrefix(f.Origin.Package, origin)) {
			t.Errorf("%s: %+v, want from %s", p, f, origin)
		}
	}
	if f := files["/etc/passwd"]; f.Size == 0 {
		t.Errorf("no passwd")
	}
	dir := filepath.Join(out, "images", "hello")
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, _ := p.ImageIndex()
	if d, _ := idx.Digest(); d.String() != rep.Images["hello"] {
		t.Errorf("index %s, report %s", d, rep.Images["hello"])
	}
	// A second build is the same bytes.
	rep2 := d.build(t, filepath.Join(t.TempDir(), "out"), 7)
	for name, want := range rep.Images {
		if rep2.Images[name] != want {
			t.Errorf("image %s: %s, then %s (shuffled)", name, want, rep2.Images[name])
		}
	}
	// The report and the lock hold to their published schemas.
	for file, doc := range map[string][]byte{"report.schema.json": mustRead(t, filepath.Join(out, "report.json")), "lock.schema.json": d.lockBytes} {
		sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "docs", "schemas", file))
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("%s: %v", file, err)
		}
	}
	judgeImage(t, dir, "hello")
	judgeImage(t, filepath.Join(out, "images", "hello-zstd"), "hello-zstd")
	// crane validates the gzip one in a registry, layers digested (its
	// validate reads every layer as gzip: go-containerregistry#1826); zstd
	// decompresses the other's layer to its diff ID.
	zstdLayer(t, filepath.Join(out, "images", "hello-zstd"))
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	crane := testutil.NeedTool(t, "crane")
	for _, name := range []string{"hello"} {
		ref := reg.Host + "/images/" + name + ":1"
		if out, err := exec.Command(crane, "push", "--insecure", "--index", filepath.Join(out, "images", name), ref).CombinedOutput(); err != nil {
			t.Fatalf("crane push %s: %v\n%s", name, err, out)
		}
		if out, err := exec.Command(crane, "validate", "--insecure", "--remote", ref).CombinedOutput(); err != nil {
			t.Errorf("crane validate %s: %v\n%s", name, err, out)
		} else {
			t.Logf("crane validate %s: %s", name, bytes.TrimSpace(out))
		}
	}
	runImage(t, dir, []string{"/usr/local/bin/echo", "hello from the image"}, 1000, "hello from the image\n")
	runImage(t, filepath.Join(out, "images", "hello-zstd"), []string{"/usr/bin/echo", "zstd"}, 0, "zstd\n")
}

// zstdLayer has zstd(1) decompress the image's layer and checks the
// result against the config's diff ID.
func zstdLayer(t *testing.T, dir string) {
	t.Helper()
	zstdTool := testutil.NeedTool(t, "zstd")
	img := testutil.FirstImage(t, dir)
	mf, _ := img.Manifest()
	cf, _ := img.ConfigFile()
	if mt := mf.Layers[0].MediaType; mt != "application/vnd.oci.image.layer.v1.tar+zstd" {
		t.Errorf("layer media type %s", mt)
	}
	blob := filepath.Join(dir, "blobs", "sha256", mf.Layers[0].Digest.Hex)
	out, err := exec.Command(zstdTool, "-dc", blob).Output()
	if err != nil {
		t.Fatalf("zstd -dc: %v", err)
	}
	if got := digest.OCI(out); got != cf.RootFS.DiffIDs[0] {
		t.Errorf("zstd layer: decompressed %s, diff ID %s", got, cf.RootFS.DiffIDs[0])
	}
}

func mustRead(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// judgeImage has skopeo inspect and copy the layout.
func judgeImage(t *testing.T, dir, name string) {
	t.Helper()
	skopeo := testutil.NeedTool(t, "skopeo")
	out, err := exec.Command(skopeo, "inspect", "--override-arch", "amd64", "--override-os", "linux", "oci:"+dir).CombinedOutput()
	if err != nil {
		t.Fatalf("skopeo inspect %s: %v\n%s", name, err, out)
	}
	var info struct {
		Architecture, Os string
		Layers           []string
		Labels           map[string]string
	}
	if err := json.Unmarshal(out, &info); err != nil || info.Architecture != "amd64" || len(info.Layers) != 1 {
		t.Errorf("skopeo inspect %s: %v\n%s", name, err, out)
	}
	if out, err := exec.Command(skopeo, "copy", "--all", "oci:"+dir, "oci:"+filepath.Join(t.TempDir(), name)).CombinedOutput(); err != nil {
		t.Errorf("skopeo copy %s: %v\n%s", name, err, out)
	}
}

// runImage unpacks the image's layer into a bundle and runs it with runc
// as uid, checking what it prints.
func runImage(t *testing.T, dir string, args []string, uid int, want string) {
	t.Helper()
	r := testutil.NewRunc(t, dir)
	r.Process(args, uid, uid)
	if got := r.Run(t); got != want {
		t.Errorf("runc run printed %q, want %q", got, want)
	}
}

// TestContainerChecks builds images that would not run and checks that
// the build refuses each, naming the file and the package.
func TestContainerChecks(t *testing.T) {
	d := newHostDemo(t, `
images:
  nolib: {packages: [hostbroken], entrypoint: [/usr/bin/echo2]}
  suid: {packages: [hostecho, hostsuid], entrypoint: [/usr/bin/echo]}
  nouser: {packages: [hostecho], entrypoint: [/usr/bin/echo], user: nobody2, links: {/usr/local/bin/x: /usr/bin/missing}}
  noentry: {packages: [hostecho], entrypoint: [/usr/bin/cat]}
`)
	r, err := newRun(Options{Spec: d.spec, Lock: d.lock, LockBytes: d.lockBytes, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.newArchBuild("x86_64")
	if err != nil {
		t.Fatal(err)
	}
	if b.paths, err = fetchArch(context.Background(), Options{Spec: d.spec, Lock: d.lock, Cache: d.cache}, b.locked); err != nil {
		t.Fatal(err)
	}
	for name, wants := range map[string][]string{
		"nolib":   {"entrypoint /usr/bin/echo2 from hostbroken-1-1.x86_64", "needs libc.so.6"},
		"suid":    {"/usr/bin/su2 is setuid", "from hostsuid-1-1.x86_64", "images.suid.setuid"},
		"nouser":  {"user nobody2 is not in the image's /etc/passwd", "links: /usr/local/bin/x points to /usr/bin/missing"},
		"noentry": {"entrypoint /usr/bin/cat is not in the image"},
	} {
		_, _, err := b.containerImage(context.Background(), name, b.locked.Images[name])
		if err == nil {
			t.Errorf("image %s: built", name)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("image %s: %v\nwant %q", name, err, w)
			}
		}
	}
}
