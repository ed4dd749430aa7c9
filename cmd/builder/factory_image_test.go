package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/testbase"
)

// factoryImageExtra are the packages the test adds to the shipped
// factory image's: Debian keeps /etc/ld.so.conf in libc-bin, which no
// package requires (ALT's glibc-core, which the builder requires, has it).
var factoryImageExtra = []string{"libc-bin"}

// imagesTestSpec is the images section the test adds beside the shipped
// factory image: Debian's busybox-static and etcd-server as images of
// their own, etcd where upstream's image has it.
const imagesTestSpec = `  busybox:
    packages: [busybox-static]
    entrypoint: [/usr/bin/busybox]
    cmd: [echo, hello from busybox]
    user: "65534:65534"
    users: [{name: nobody, uid: 65534}]
    groups: [{name: nogroup, gid: 65534}]
  etcd:
    packages: [etcd-server, libc-bin]
    entrypoint: [/usr/local/bin/etcd]
    links: {/usr/local/bin/etcd: /usr/bin/etcd}
    ports: [2379, 2380]
`

// TestFactoryImage builds the images of deploy/factory-image.yaml (the
// factory's, its packages as shipped plus factoryImageExtra) and of
// busybox and etcd from the container images' test base (Debian's
// packages converted as testbase converts them) and a repository holding
// the nodeforge-builder RPM of the builder just built, verified package by
// package; then runs them with runc: busybox echo and etcd --version print
// what they promise, and the factory image, as its non-root user, serves
// the demo release on loopback: /healthz, /readyz (xorriso there), its own
// health check (builder factory health inside the container) and an ISO
// that xorriso in the image writes; SIGTERM stops it with exit 0.
func TestFactoryImage(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain; the longest test of the package, which alone would keep a core idle
	testutil.NeedRoot(t)
	createrepo := testutil.NeedTool(t, "createrepo_c")
	if testutil.NeedTool(t, "runc"); builderCommand(t).Path == os.Args[0] {
		testutil.Missing(t, "a builder binary (go build failed)")
	}
	specPath := testbase.ForTest(t, testbase.Options{Images: true})
	dir := filepath.Dir(specPath)

	// The builder as the base's nodeforge-builder, in a repository of its
	// own whose packages (not index) are signed: verify: packages.
	priv, pub := packagerKey(t)
	repo := filepath.Join(dir, "nodeforge")
	if out, err := runBuilder(t, "rpm", "--binary", builderCommand(t).Path, "--key", priv, "--version", "1.0", "--release", "test1", "--date", "1764547200", "--out", repo); err != nil {
		t.Fatalf("builder rpm: %v\n%s", err, out)
	}
	if out, err := exec.Command(createrepo, "--quiet", repo).CombinedOutput(); err != nil {
		t.Fatalf("createrepo_c: %v\n%s", err, out)
	}
	writeImagesSpec(t, specPath, pub)

	cache, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
	start := time.Now()
	for _, args := range [][]string{{"lock", "-q", "--spec", specPath, "--cache", cache}, {"build", "-q", "--spec", specPath, "--cache", cache, "--out", out}} {
		if o, err := builderStdout(t, args...); err != nil {
			t.Fatalf("%v\n%s", err, o)
		}
	}
	t.Logf("lock and build: %s", time.Since(start).Round(time.Millisecond))
	images := filepath.Join(out, "images")
	checkFactoryConfig(t, filepath.Join(images, "factory"))
	// builder image validate, on the layouts as on any: the build's checks
	// pass again.
	for name, path := range map[string]string{"factory": "/usr/local/bin/builder", "etcd": "/usr/local/bin/etcd", "busybox": "/usr/bin/busybox"} {
		if o, err := runBuilder(t, "image", "validate", "--path", path, filepath.Join(images, name)); err != nil || !strings.Contains(o, "  linux/amd64  sha256:") {
			t.Errorf("image validate %s: %v\n%s", name, err, o)
		}
	}

	bb := testutil.NewRunc(t, filepath.Join(images, "busybox"))
	bb.Process([]string{"/usr/bin/busybox", "echo", "hello from busybox"}, 65534, 65534)
	if got := bb.Run(t); got != "hello from busybox\n" {
		t.Errorf("busybox echo printed %q", got)
	}
	etcd := testutil.NewRunc(t, filepath.Join(images, "etcd"))
	etcd.Process([]string{"/usr/local/bin/etcd", "--version"}, 0, 0)
	if got := etcd.Run(t); !strings.HasPrefix(got, "etcd Version: 3.") || !strings.Contains(got, "Go Version: go") {
		t.Errorf("etcd --version printed %q", got)
	}
	runFactoryImage(t, filepath.Join(images, "factory"))
}

// TestFactoryImageSpec: the shipped spec is one the reader takes and the
// published schema accepts, its factory image running factory serve as a
// non-root user with the factory's health command.
func TestFactoryImageSpec(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(deployDir, "factory-image.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := specs.Parse(b, deployDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.Schema(t, "spec.schema.json").Validate(testutil.YAMLDoc(t, b)); err != nil {
		t.Errorf("the schema refuses deploy/factory-image.yaml: %v", err)
	}
	im := s.Images["factory"]
	if !slices.Equal(im.Entrypoint[:3], []string{"/usr/bin/builder", "factory", "serve"}) || strings.HasPrefix(im.User, "0") || im.User == "root" ||
		im.Healthcheck == nil || !slices.Equal(im.Healthcheck.Command, []string{"/usr/bin/builder", "factory", "health"}) {
		t.Errorf("the factory image: %+v", im)
	}
	if _, err := runBuilder(t, "image", "validate", t.TempDir()); err == nil || !strings.Contains(err.Error(), "not an OCI layout (no index.json)") {
		t.Errorf("image validate of a directory without a layout: %v", err)
	}
	for _, p := range []string{"nodeforge-builder", "xorriso", "ca-certificates"} {
		if !slices.Contains(im.Packages, p) {
			t.Errorf("the factory image lacks %s", p)
		}
	}
}

// writeImagesSpec adds the nodeforge repository and the images to the
// base's spec: the factory image as deploy/factory-image.yaml ships it
// (plus factoryImageExtra), busybox and etcd.
func writeImagesSpec(t *testing.T, specPath, packagerPub string) {
	t.Helper()
	var shipped struct {
		Images map[string]map[string]any
	}
	b, err := os.ReadFile(filepath.Join(deployDir, "factory-image.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &shipped); err != nil {
		t.Fatal(err)
	}
	factory := shipped.Images["factory"]
	if factory == nil {
		t.Fatal("deploy/factory-image.yaml has no factory image")
	}
	for _, p := range factoryImageExtra {
		factory["packages"] = append(factory["packages"].([]any), p)
	}
	fy, err := yaml.Marshal(map[string]any{"factory": factory})
	if err != nil {
		t.Fatal(err)
	}
	indented := "  " + strings.ReplaceAll(strings.TrimSuffix(string(fy), "\n"), "\n", "\n  ") + "\n"
	spec, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(spec), "repositories:\n", "repositories:\n  - name: nodeforge\n    url: nodeforge\n    format: rpm-md\n    verify: packages\n    keyring: ["+packagerPub+"]\n", 1)
	s += "\nimages:\n" + indented + imagesTestSpec
	if err := os.WriteFile(specPath, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkFactoryConfig reads the factory image's config: its user, health
// check, ports and stop signal as the shipped spec says.
func checkFactoryConfig(t *testing.T, dir string) {
	t.Helper()
	img := testutil.FirstImage(t, dir)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" || c.StopSignal != "SIGTERM" || c.Healthcheck == nil ||
		!slices.Equal(c.Healthcheck.Test, []string{"CMD", "/usr/bin/builder", "factory", "health"}) || c.Healthcheck.StartPeriod != 10*time.Minute {
		t.Errorf("factory image config: %+v (health check %+v)", c, c.Healthcheck)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok || !slices.Equal(c.Entrypoint, []string{"/usr/bin/builder", "factory", "serve"}) {
		t.Errorf("ports %v, entrypoint %v", c.ExposedPorts, c.Entrypoint)
	}
}

// runFactoryImage runs the factory image as uid 65532 in the host's
// network namespace on a free loopback port, serving the demo release
// (a layout mounted read-only with its key), with a tmpfs /tmp and state
// directory (the cache) as the Helm chart gives them.
func runFactoryImage(t *testing.T, dir string) {
	t.Helper()
	d := newDemoRelease(t)
	if _, err := d.publish(t); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(t.TempDir(), "factory.yaml")
	os.WriteFile(conf, []byte("release:\n  - store: oci:/srv/release\n    key: /etc/nodeforge/keys/release.pub\ncache: oci:/var/lib/nodeforge/cache\ninsecure-listen: true\n"), 0o644)
	addr := freeAddr(t)
	r := testutil.NewRunc(t, dir)
	r.Process([]string{"/usr/bin/builder", "factory", "serve", "--listen", addr, "--metrics-listen", freeAddr(t)}, 65532, 65532)
	r.HostNetwork()
	r.Mount("/tmp", "tmpfs", true)
	r.Mount("/var/lib/nodeforge", "tmpfs", true)
	r.Mount("/etc/nodeforge/factory.yaml", conf, false)
	r.Mount("/etc/nodeforge/keys/release.pub", d.devPub, false)
	r.Mount("/srv/release", filepath.Join(d.dir, "release", "dev"), false)
	r.Config["process"].(map[string]any)["env"] = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "NODEFORGE_FACTORY_CONFIG=/etc/nodeforge/factory.yaml", "HOME=/var/lib/nodeforge"}
	cmd, id := r.Command(t)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			exec.Command(r.Tool, "--root", r.State(), "kill", id, "KILL").Run()
			<-done
		}
	}()
	base := "http://" + addr
	ready := ""
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if code, body := tryGet(t, base+"/readyz"); code == 200 {
			ready = body
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the factory image exited: %v\n%s", err, logs.String())
		default:
		}
	}
	if !strings.HasPrefix(ready, "ready: v1.11.0-demo\n") || !strings.Contains(ready, "tool xorriso: on PATH\n") {
		t.Fatalf("readyz: %q\n%s", ready, logs.String())
	}
	if code, body := tryGet(t, base+"/healthz"); code != 200 {
		t.Errorf("healthz: %d %q", code, body)
	}
	// The image's own health check and version, inside the container.
	for args, want := range map[string]string{
		"factory health --url " + base + "/readyz": "ready: v1.11.0-demo\n",
		"--version": "builder ",
	} {
		o, err := exec.Command(r.Tool, append([]string{"--root", r.State(), "exec", "--user", "65532:65532", id, "/usr/bin/builder"}, strings.Fields(args)...)...).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(o), want) {
			t.Errorf("runc exec builder %s: %v\n%s", args, err, o)
		}
	}
	// An ISO: xorriso of the image, with its libraries, writes it.
	if resp, err := http.Post(base+"/schematics", "application/json", strings.NewReader("{}")); err != nil || resp.StatusCode != 201 {
		t.Fatalf("POST /schematics: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	code, iso := tryGet(t, base+"/image/376567988ad370138ad8b2698212367b8edcb69b5fd68c80be1f2ec7d603b4ba/v1.11.0-demo/metal-amd64.iso")
	if code != 200 || len(iso) < 0x8006 || iso[0x8001:0x8006] != "CD001" {
		t.Errorf("ISO: %d, %d bytes\n%s", code, len(iso), logs.String())
	}
	if err := exec.Command(r.Tool, "--root", r.State(), "kill", id, "TERM").Run(); err != nil {
		t.Fatalf("runc kill: %v", err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(time.Minute):
		t.Errorf("still running a minute after SIGTERM\n%s", logs.String())
	}
}

// tryGet is a GET's status and body (0 when nothing answers).
func tryGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
