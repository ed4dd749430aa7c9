package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/factory/server"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
)

// registryFactory is a factory serving the release in a registry, its
// cache below the release's prefix, signing with the dev key.
type registryFactory struct {
	srv *server.Server
	url string
}

func startRegistryFactory(t *testing.T, d *demoRelease, target string) *registryFactory {
	t.Helper()
	st, err := oci.NewRemote(target, oci.RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := oci.NewRemote(target+"/factory-cache", oci.RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vs, signer := devKeys(t, d)
	srv, err := server.New(context.Background(), server.Options{Service: factory.Options{Releases: []factory.ReleaseStore{{Store: st, Keys: vs}},
		Cache: cache, Signer: signer, BuilderVersion: "test", Work: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &registryFactory{srv: srv, url: hs.URL}
}

// get fetches a path and wants 200.
func (f *registryFactory) get(t *testing.T, path string) []byte {
	t.Helper()
	resp, err := http.Get(f.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b
}

// TestFactoryTransfer: an internal factory builds three schematics; one
// transfer carries the release and its cache to an external registry,
// whose factory serves them with zero builds, byte for byte, installers
// included, and cosign verifies the release there. The same through an
// archive into a perimeter; a flipped byte in the archive is refused with
// nothing written.
func TestFactoryTransfer(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	d := newDemoRelease(t)
	internal, external := testutil.StartRegistry(t, testutil.RegistryOptions{}), testutil.StartRegistry(t, testutil.RegistryOptions{})
	from := internal.Host + "/nodeforge/p11"
	if _, err := d.publish(t, "--registry", from); err != nil {
		t.Fatal(err)
	}
	in := startRegistryFactory(t, d, from)
	var ids []string
	for _, exts := range []string{"[zfs]", "[cri, btrfs]", "[]"} {
		resp, err := http.Post(in.url+"/schematics", "application/yaml", strings.NewReader("customization:\n  systemExtensions:\n    officialExtensions: "+exts+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		id, _, _ := strings.Cut(strings.TrimPrefix(string(b), `{"id":"`), `"`)
		ids = append(ids, id)
	}
	paths := []string{}
	want := map[string][]byte{}
	for _, id := range ids {
		for _, a := range []string{"metal-amd64.iso", "kernel-amd64", "cmdline-aws-amd64"} {
			p := "/image/" + id + "/1.11.0-demo/" + a
			paths = append(paths, p)
			want[p] = in.get(t, p)
		}
		p := "/v2/installer/" + id + "/manifests/1.11.0-demo"
		paths = append(paths, p)
		want[p] = in.get(t, p)
	}
	built := in.srv.Stats().Builds
	if built != int64(len(paths)) {
		t.Fatalf("the internal factory built %d, want %d", built, len(paths))
	}

	check := func(what, target string, cosign bool) {
		t.Helper()
		out := startRegistryFactory(t, d, target)
		for _, p := range paths {
			if got := out.get(t, p); !bytes.Equal(got, want[p]) {
				t.Errorf("%s: %s differs from the internal factory's", what, p)
			}
		}
		// Blobs too, read from the registry cache after the request that
		// checked the entry has ended.
		judge(t, "crane", "pull", "--insecure", "--format", "oci", strings.TrimPrefix(out.url, "http://")+"/installer/"+ids[0]+":1.11.0-demo", t.TempDir())
		if st := out.srv.Stats(); st.Builds != 0 || st.CacheErrors != 0 {
			t.Errorf("%s: the factory built %d and refused %d entries, want none", what, st.Builds, st.CacheErrors)
		}
		if cosign {
			judge(t, "cosign", "verify", "--key", d.devPub, "--insecure-ignore-tlog", "--allow-http-registry", target+"/boot:1.11.0-demo")
		}
	}
	to := external.Host + "/nodeforge/p11"
	report := filepath.Join(t.TempDir(), "report.json")
	// Talos's spelling of the version names the release's tag.
	if out, err := runBuilder(t, "factory", "transfer", "--version", "v1.11.0-demo", "--cached", "--key", d.devPub, "--report", report,
		"docker://"+from, "docker://"+to); err != nil {
		t.Fatalf("transfer: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(report); err != nil {
		t.Fatal(err)
	} else {
		validateSchema(t, "commands.schema.json#/$defs/transferReport", b)
	}
	check("external", to, true)

	// Killed (SIGKILL, then SIGINT) in the middle of its run, a transfer
	// run again ends complete and verified.
	warmBuilder(t)
	transfer := func(prefix string) []string {
		return []string{"factory", "transfer", "--version", "1.11.0-demo", "--cached", "--key", d.devPub, "docker://" + from, "docker://" + external.Host + "/" + prefix}
	}
	start := time.Now()
	if out, err := builderProcess(t, transfer("timing")...); err != nil {
		t.Fatalf("transfer: %v\n%s", err, out)
	}
	full := time.Since(start)
	points := killPoints(full)
	for i, p := range []int{2, 5} { // one SIGKILL, one SIGINT (the mirror's own test kills it at ten points)
		prefix := "killed" + string(rune('a'+i))
		out, err := signalProcess(t, points[p].at, points[p].sig, transfer(prefix)...)
		t.Logf("%v at %v of %v: %v %s", points[p].sig, points[p].at, full, err, lastLine(out))
		if out, err := builderProcess(t, transfer(prefix)...); err != nil {
			t.Fatalf("the transfer after %v at %v: %v\n%s", points[p].sig, points[p].at, err, out)
		}
		// the rerun verified the release with --key
		check("rerun after "+points[p].sig.String(), external.Host+"/"+prefix, false)
	}

	// The air gap: an archive, then a perimeter registry.
	archive := filepath.Join(t.TempDir(), "p11.tar")
	list := filepath.Join(t.TempDir(), "schematics.txt")
	os.WriteFile(list, []byte("# the three\n"+strings.Join(ids, "\n")+"\n"), 0o644)
	if out, err := runBuilder(t, "factory", "transfer", "--version", "1.11.0-demo", "--schematics", list, "--key", d.devPub,
		"docker://"+from, "oci-archive:"+archive); err != nil {
		t.Fatalf("transfer to an archive: %v\n%s", err, out)
	}
	perimeter := testutil.StartRegistry(t, testutil.RegistryOptions{})
	if out, err := runBuilder(t, "factory", "transfer", "--version", "v1.11.0-demo", "--cached", "--key", d.devPub,
		"oci-archive:"+archive, "docker://"+perimeter.Host+"/nodeforge/p11"); err != nil {
		t.Fatalf("transfer from the archive: %v\n%s", err, out)
	}
	check("perimeter", perimeter.Host+"/nodeforge/p11", true)

	flipped := filepath.Join(t.TempDir(), "flipped.tar")
	b, _ := os.ReadFile(archive)
	b[len(b)/2] ^= 0xff
	os.WriteFile(flipped, b, 0o644)
	other := testutil.StartRegistry(t, testutil.RegistryOptions{})
	if out, err := runBuilder(t, "factory", "transfer", "--version", "1.11.0-demo", "--cached", "--key", d.devPub,
		"oci-archive:"+flipped, "docker://"+other.Host+"/nodeforge/p11"); err == nil {
		t.Errorf("a flipped archive was transferred:\n%s", out)
	}
	if out := judge(t, "crane", "catalog", "--insecure", other.Host); strings.TrimSpace(out) != "" {
		t.Errorf("a refused archive wrote to the perimeter:\n%s", out)
	}
}
