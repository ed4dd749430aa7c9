package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/release"
)

// checkNoDanglingTags asserts that every tag of every repository under
// prefix points at a manifest whose blobs and children all exist, asking
// the registry directly (not through the proxy).
func checkNoDanglingTags(t *testing.T, host, prefix string) {
	t.Helper()
	repos := []string{"boot", "installer", "lock", "extensions/btrfs", "extensions/cri", "extensions/nvidia", "extensions/zfs"}
	for _, repo := range repos {
		r, err := name.NewRepository(host+"/"+prefix+"/"+repo, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		tags, err := remote.List(r)
		if err != nil {
			continue // the repository was never written
		}
		for _, tag := range tags {
			ref := r.Tag(tag)
			desc, err := remote.Get(ref)
			if err != nil {
				t.Errorf("tag %s: %v", ref, err)
				continue
			}
			if desc.MediaType.IsIndex() {
				idx, err := desc.ImageIndex()
				if err != nil {
					t.Errorf("tag %s: %v", ref, err)
					continue
				}
				m, _ := idx.IndexManifest()
				for _, c := range m.Manifests {
					img, err := remote.Image(r.Digest(c.Digest.String()))
					if err != nil {
						t.Errorf("tag %s points at an index whose child %s is missing: %v", ref, c.Digest, err)
						continue
					}
					checkBlobs(t, ref.String(), r, img)
				}
				continue
			}
			img, err := desc.Image()
			if err != nil {
				t.Errorf("tag %s: %v", ref, err)
				continue
			}
			checkBlobs(t, ref.String(), r, img)
		}
	}
}

func checkBlobs(t *testing.T, ref string, r name.Repository, img interface {
	RawManifest() ([]byte, error)
}) {
	t.Helper()
	type manifest struct {
		Config struct{ Digest string }   `json:"config"`
		Layers []struct{ Digest string } `json:"layers"`
	}
	var m manifest
	raw, _ := img.RawManifest()
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Errorf("%s: %v", ref, err)
		return
	}
	digests := []string{m.Config.Digest}
	for _, l := range m.Layers {
		digests = append(digests, l.Digest)
	}
	for _, d := range digests {
		l, err := remote.Layer(r.Digest(d))
		if err == nil {
			_, err = l.Size() // a HEAD of the blob
		}
		if err != nil {
			t.Errorf("tag %s points at a manifest whose blob %s is missing: %v", ref, d, err)
		}
	}
}

// TestReleaseThroughFaults releases through a proxy that answers 5xx, cuts
// connections in the middle of blobs and answers slowly: with some faults
// the release completes after retries; with nearly every request failing
// it stops with an error naming what it was pushing; after every run no tag
// points at a manifest whose blobs are missing; run again without faults
// it completes and verifies.
func TestReleaseThroughFaults(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	d := newDemoRelease(t)
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	proxy := testutil.StartFaultProxy(t, reg.Host, 0.1, 1)
	target := proxy.Host + "/faulty/p11"

	if _, err := d.release(t, "--registry", target); err != nil {
		t.Errorf("release with 10%% faulty requests did not complete after retries: %v", err)
	}
	checkNoDanglingTags(t, reg.Host, "faulty/p11")
	t.Logf("faults injected with rate 0.1: %v", proxy.Counts)
	if proxy.Total() == 0 {
		t.Fatal("the proxy injected no fault")
	}

	// A fresh prefix with most requests failing: the release gives up.
	target2 := proxy.Host + "/hopeless/p11"
	proxy.SetRate(0.9)
	_, err := d.release(t, "--registry", target2, "--retries", "1")
	if err == nil {
		t.Fatal("release with 90% faulty requests succeeded")
	}
	if !strings.Contains(err.Error(), "hopeless/p11") {
		t.Errorf("the error does not name what failed: %v", err)
	}
	t.Logf("with rate 0.9: %v", err)
	checkNoDanglingTags(t, reg.Host, "hopeless/p11")

	// Run again without faults: it completes and verifies.
	proxy.SetRate(0)
	p, err := d.release(t, "--registry", target2)
	if err != nil {
		t.Fatal(err)
	}
	checkNoDanglingTags(t, reg.Host, "hopeless/p11")
	st, _ := oci.NewRemote(reg.Host+"/hopeless/p11", oci.RemoteOptions{})
	if len(p.Images) != 7 {
		t.Errorf("the re-run published %d images, want 7", len(p.Images))
	}
	vs, err := loadVerifiers([]string{d.devPub})
	if err != nil {
		t.Fatal(err)
	}
	repos, err := release.Repositories(context.Background(), st, "1.11.0-demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, repo := range repos {
		v, err := release.Verify(context.Background(), st, repo, "1.11.0-demo", vs, nil)
		if err != nil || !v.OK() {
			t.Errorf("verify %s after the re-run: %v %v", repo, err, v)
		}
	}
}
