package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
)

// replica is a builder factory serve child process.
type replica struct {
	cmd          *exec.Cmd
	url, metrics string
	log          *bytes.Buffer
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startReplica starts factory serve on target's release, without rate
// limits unless flags set them.
func startReplica(t *testing.T, d *demoRelease, target string, flags ...string) *replica {
	t.Helper()
	addr, maddr := freeAddr(t), freeAddr(t)
	r := &replica{url: "http://" + addr, metrics: "http://" + maddr + "/metrics", log: &bytes.Buffer{}}
	args := []string{"factory", "serve", "--release", "docker://" + target, "--key", d.devPub, "--signing-key", d.devKey,
		"--listen", addr, "--metrics-listen", maddr, "--build-rate", "0", "--schematic-rate", "0"}
	r.cmd = builderCommand(t, append(args, flags...)...)
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cmd.Process.Kill(); r.cmd.Wait() })
	for range 100 {
		if resp, err := http.Get(r.url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return r
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("replica at %s never ready:\n%s", addr, r.log)
	return nil
}

// counter reads a Prometheus counter's sum over its labels.
func (r *replica) counter(t *testing.T, name string) int {
	t.Helper()
	resp, err := http.Get(r.metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return int(sum)
}

func fetch(url string) ([]byte, int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

// TestFactoryReplicas: two builder factory serve processes on one cache
// registry. A schematic created on one is served by the other at once; a
// replica killed mid-build leaves no unsigned entry and the other serves
// the artifact; a replica sent SIGTERM mid-build finishes it, caches it
// and exits 0. (Concurrent requests spread over two replicas, and
// replicas behind a proxy: factory/server's TestFactoryReplicasConcurrent and
// TestFactoryBehindProxy, in one process.)
func TestFactoryReplicas(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	d := newDemoRelease(t)
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	target := reg.Host + "/nodeforge/p11"
	if _, err := d.publish(t, "--registry", target); err != nil {
		t.Fatal(err)
	}
	warmBuilder(t)
	a, b := startReplica(t, d, target), startReplica(t, d, target)
	resp, err := http.Post(a.url+"/schematics", "application/yaml", strings.NewReader("customization:\n  systemExtensions:\n    officialExtensions: [zfs]\n"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	id, _, _ := strings.Cut(strings.TrimPrefix(string(body), `{"id":"`), `"`)
	if _, code, _ := fetch(b.url + "/schematics/" + id); code != 200 {
		t.Fatalf("a schematic created on one replica: %d on the other", code)
	}

	cache, err := oci.NewRemote(target+"/factory-cache", oci.RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Kill -9 one replica while it builds; the other serves the artifact.
	path := "/image/" + id + "/1.11.0-demo/metal-amd64.raw.xz"
	go fetch(a.url + path)
	time.Sleep(150 * time.Millisecond)
	a.cmd.Process.Kill()
	a.cmd.Wait()
	if got, code, err := fetch(b.url + path); err != nil || code != 200 || len(got) == 0 {
		t.Fatalf("the other replica after a kill: %d %v", code, err)
	}
	if n := entries(t, cache, d); n != 1 {
		t.Errorf("%d cache entries after the kill, want 1", n)
	}

	// SIGTERM the other while it builds: the build finishes, its request
	// gets the artifact, the entry is cached, and the replica exits 0.
	path = "/image/" + id + "/1.11.0-demo/metal-amd64.qcow2"
	code := make(chan int, 1)
	go func() { _, c, _ := fetch(b.url + path); code <- c }()
	for deadline := time.Now().Add(10 * time.Second); b.counter(t, "nodeforge_factory_builds_in_flight") == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the build never started")
		}
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	if c := <-code; c != 200 {
		t.Errorf("the request in flight at SIGTERM: %d", c)
	}
	if err := b.cmd.Wait(); err != nil {
		t.Errorf("the replica after SIGTERM: %v\n%s", err, b.log)
	}
	if n := entries(t, cache, d); n != 2 {
		t.Errorf("%d cache entries after the stop, want 2", n)
	}
}

// entries counts the artifact entries in the cache and checks that each
// is signed by the factory's key.
func entries(t *testing.T, cache oci.Store, d *demoRelease) int {
	t.Helper()
	ctx := context.Background()
	vs, err := loadVerifiers([]string{d.devPub})
	if err != nil {
		t.Fatal(err)
	}
	tags, err := cache.Tags(ctx, factory.RepoArtifacts)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tag := range tags {
		if strings.HasSuffix(tag, ".sig") {
			continue
		}
		n++
		desc, err := cache.Head(ctx, factory.RepoArtifacts, tag)
		if err != nil {
			t.Fatal(err)
		}
		if err := signedBy(ctx, cache, desc.Digest, vs); err != nil {
			t.Errorf("entry %s: %v", tag, err)
		}
	}
	return n
}

func signedBy(ctx context.Context, st oci.Store, d v1.Hash, vs []signing.Verifier) error {
	_, sigs, err := signing.ReadSigs(ctx, st, factory.RepoArtifacts, oci.SigTag(d))
	if err != nil {
		return err
	}
	for _, l := range sigs {
		if signing.CheckSignatureLayer(vs[0], l, d) == nil {
			return nil
		}
	}
	return fmt.Errorf("no signature by the factory's key")
}
