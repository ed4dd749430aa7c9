package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/release"
)

// demoRelease prepares the demo base with a dev and a prod key pair.
type demoRelease struct {
	dir, spec, cache, devKey, devPub, prodKey, prodPub string
}

func newDemoRelease(t *testing.T) *demoRelease {
	t.Helper()
	d := &demoRelease{dir: filepath.Join(t.TempDir(), "demo"), cache: t.TempDir()}
	d.spec = filepath.Join(d.dir, "spec.yaml")
	if _, err := runBuilder(t, "demo-base", d.dir); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []string{"dev", "prod"} {
		if _, err := runBuilder(t, "keys", "generate", "--out", filepath.Join(d.dir, "keys", ch)); err != nil {
			t.Fatal(err)
		}
	}
	d.devKey, d.devPub = filepath.Join(d.dir, "keys/dev/cosign.key"), filepath.Join(d.dir, "keys/dev/cosign.pub")
	d.prodKey, d.prodPub = filepath.Join(d.dir, "keys/prod/cosign.key"), filepath.Join(d.dir, "keys/prod/cosign.pub")
	return d
}

// release runs builder release --json in this process (under the race
// detector) and returns what it published.
func (d *demoRelease) release(t *testing.T, args ...string) (*release.Published, error) {
	t.Helper()
	return d.releaseWith(t, runBuilder, args...)
}

// publish is release run as a child process (the builder built without
// the race detector): for the tests to which a release is only their
// starting point. The tests of releasing itself call release.
func (d *demoRelease) publish(t *testing.T, args ...string) (*release.Published, error) {
	t.Helper()
	return d.releaseWith(t, builderStdout, args...)
}

func (d *demoRelease) releaseWith(t *testing.T, run func(*testing.T, ...string) (string, error), args ...string) (*release.Published, error) {
	t.Helper()
	out, err := run(t, append([]string{"release", "-q", "--json", "--branch", "p11", "--spec", d.spec, "--cache", d.cache, "--key", d.devKey}, args...)...)
	if err != nil {
		return nil, err
	}
	validateSchema(t, "commands.schema.json#/$defs/published", []byte(out))
	var p release.Published
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("release --json: %v\n%s", err, out)
	}
	return &p, nil
}

// judge runs an outside tool and fails the test when it fails.
func judge(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(testutil.NeedTool(t, name), args...).CombinedOutput()
	if err != nil {
		t.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestReleaseToLayout is the README's quick start: the demo release into the
// default channel's local OCI layout, verified offline.
func TestReleaseToLayout(t *testing.T) {
	d := newDemoRelease(t)
	p, err := d.release(t)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Images) != 7 { // boot, installer, 4 extensions, lock
		t.Errorf("published %d images, want 7: %+v", len(p.Images), p.Images)
	}
	checkGoldenDigests(t, p)
	layout := filepath.Join(d.dir, "release", "dev")
	out, err := runBuilder(t, "verify", "--key", d.devPub, "--version", "1.11.0-demo", "oci:"+layout)
	if err != nil {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	if n := strings.Count(out, "OK "); n != 7 {
		t.Errorf("%d images verified, want 7:\n%s", n, out)
	}
	js, err := runBuilder(t, "verify", "--json", "--key", d.devPub, "--version", "1.11.0-demo", "oci:"+layout)
	if err != nil {
		t.Fatalf("verify --json: %v\n%s", err, js)
	}
	validateSchema(t, "commands.schema.json#/$defs/verifyResults", []byte(js))
	// The wrong key fails, naming the image.
	out, err = runBuilder(t, "verify", "--key", d.prodPub, "oci:"+layout+"#installer:1.11.0-demo")
	if err == nil || !strings.Contains(out, "no signature verifies with the key") || !strings.Contains(out, "installer") {
		t.Errorf("verify with the wrong key: %v\n%s", err, out)
	}
	// skopeo reads the layout too.
	judge(t, "skopeo", "inspect", "--raw", "oci:"+layout+":installer:1.11.0-demo")
}

// updateGolden rewrites testdata/demo-release.digests from this build
// (go test -run TestReleaseToLayout -update ./cmd/builder).
var updateGolden = flag.Bool("update", false, "rewrite the golden digests of the demo release")

// checkGoldenDigests holds the demo release to the digests recorded in
// testdata: a change of layout or refactoring must not change a byte of what
// is published (signatures aside, which are made with fresh keys). Each
// image digest covers its manifest, config and layers, and an index's
// covers its children.
func checkGoldenDigests(t *testing.T, p *release.Published) {
	t.Helper()
	var lines []string
	for _, im := range p.Images {
		lines = append(lines, im.Repo+":"+p.Tag+" "+im.Digest)
	}
	checkGolden(t, "demo-release.digests", lines)
}

// checkGoldenFiles holds every file of a build directory to the sha256
// recorded in testdata.
func checkGoldenFiles(t *testing.T, dir, name string) {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		lines = append(lines, fmt.Sprintf("%x  %s", sha256.Sum256(b), filepath.ToSlash(rel)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, name, lines)
}

// checkGolden compares lines (sorted) with testdata/name, or rewrites it
// under -update.
func checkGolden(t *testing.T, name string, lines []string) {
	t.Helper()
	slices.Sort(lines)
	got := strings.Join(lines, "\n") + "\n"
	golden := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (record it with -update)", err)
	}
	if got != string(want) {
		t.Errorf("the demo's bytes changed:\n got:\n%s want (%s):\n%s", got, golden, want)
	}
}

// TestReleaseToRegistry publishes the demo release to a real registry
// (docker-registry on loopback) and has the stock tools judge it: cosign
// verifies every signature and finds every attestation offline, skopeo
// and crane read every image; a second release uploads no blob; the
// release promotes to prod with the same digests.
func TestReleaseToRegistry(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	d := newDemoRelease(t)
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	target := reg.Host + "/nodeforge/p11"
	p, err := d.release(t, "--registry", target)
	if err != nil {
		t.Fatal(err)
	}
	if p.Stats.Blobs == 0 || p.Stats.BlobBytes == 0 {
		t.Errorf("first release uploaded nothing: %+v", p.Stats)
	}
	for _, img := range p.Images {
		ref := img.Ref
		judge(t, "cosign", "verify", "--key", d.devPub, "--insecure-ignore-tlog", "--allow-http-registry", ref)
		for _, child := range img.Children {
			judge(t, "cosign", "verify", "--key", d.devPub, "--insecure-ignore-tlog", "--allow-http-registry", strings.SplitN(ref, ":", 3)[0]+":"+strings.SplitN(ref, ":", 3)[1]+"@"+child)
		}
		types := []string{"slsaprovenance1"}
		if !strings.Contains(ref, "/lock:") {
			types = append(types, "spdxjson", "cyclonedx")
		}
		for _, typ := range types {
			out := judge(t, "cosign", "verify-attestation", "--key", d.devPub, "--insecure-ignore-tlog", "--allow-http-registry", "--type", typ, ref)
			if !strings.Contains(out, `"payloadType":"application/vnd.in-toto+json"`) {
				t.Errorf("cosign verify-attestation --type %s %s printed no attestation:\n%s", typ, ref, out)
			}
		}
		judge(t, "skopeo", "inspect", "--tls-verify=false", "--raw", "docker://"+ref)
		// The boot assets and the lock are OCI artifacts (no image config):
		// skopeo reads their manifests; the images it inspects fully.
		if !strings.Contains(ref, "/lock:") && !strings.Contains(ref, "/boot:") {
			judge(t, "skopeo", "inspect", "--tls-verify=false", "docker://"+ref)
		}
		if out := judge(t, "crane", "manifest", "--insecure", ref); !strings.Contains(out, "schemaVersion") {
			t.Errorf("crane manifest %s: %s", ref, out)
		}
		if out := judge(t, "crane", "digest", "--insecure", ref); strings.TrimSpace(out) != img.Digest {
			t.Errorf("crane digest %s = %s, published %s", ref, out, img.Digest)
		}
	}

	// Re-releasing the unchanged version uploads no blob.
	again, err := d.release(t, "--registry", target)
	if err != nil {
		t.Fatal(err)
	}
	if again.Stats.BlobBytes != 0 || again.Stats.Blobs != 0 || again.Signed != 0 || again.Attested != 0 {
		t.Errorf("re-release uploaded %+v, signed %d, attested %d; want nothing", again.Stats, again.Signed, again.Attested)
	}
	t.Logf("first release: %d blobs, %d bytes; second: %d blobs, %d bytes", p.Stats.Blobs, p.Stats.BlobBytes, again.Stats.Blobs, again.Stats.BlobBytes)

	// Promotion to prod keeps every digest and is signed by the prod key.
	prod := reg.Host + "/nodeforge/prod/p11"
	out, err := runBuilder(t, "promote", "--json", "--spec", d.spec, "--from-registry", target, "--from-key", d.devPub,
		"--to-registry", prod, "--key", d.prodKey, "1.11.0-demo")
	if err != nil {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	validateSchema(t, "commands.schema.json#/$defs/promotion", []byte(out))
	var pr release.Promotion
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatal(err)
	}
	for i, img := range pr.Images {
		if img.Digest != p.Images[i].Digest {
			t.Errorf("promoted %s has digest %s, dev %s", img.Ref, img.Digest, p.Images[i].Digest)
		}
		judge(t, "cosign", "verify", "--key", d.prodPub, "--insecure-ignore-tlog", "--allow-http-registry", img.Ref)
		judge(t, "cosign", "verify-attestation", "--key", d.prodPub, "--insecure-ignore-tlog", "--allow-http-registry",
			"--type", signing.PredicatePromotion, img.Ref)
	}
	if out, err := runBuilder(t, "verify", "--key", d.prodPub, "--version", "1.11.0-demo", "docker://"+prod); err != nil {
		t.Errorf("verify prod: %v\n%s", err, out)
	}
}

// TestPromoteRefuses: a missing signature, a wrong signature, a provenance
// naming another digest and a package that is not from the base each stop
// the promotion, named.
func TestPromoteRefuses(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	d := newDemoRelease(t)
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	ctx := context.Background()
	devKey, _ := os.ReadFile(d.devKey)
	sv, err := signing.LoadPrivate(devKey, []byte("test-password"))
	if err != nil {
		t.Fatal(err)
	}
	devSigner, _ := signing.NewSigner(sv)
	prodKey, _ := os.ReadFile(d.prodKey)
	psv, _ := signing.LoadPrivate(prodKey, []byte("test-password"))
	prodSigner, _ := signing.NewSigner(psv)

	for _, c := range []struct {
		name   string
		tamper func(st oci.Store, installer v1.Descriptor, other v1.Descriptor)
		want   string
	}{
		{"missing signature", func(st oci.Store, inst, _ v1.Descriptor) {
			empty, _ := signing.EmptySignatures()
			if err := st.WriteImage(ctx, "installer", oci.SigTag(inst.Digest), empty); err != nil {
				t.Fatal(err)
			}
		}, "not signed"},
		{"wrong signature", func(st oci.Store, inst, _ v1.Descriptor) {
			empty, _ := signing.EmptySignatures()
			st.WriteImage(ctx, "installer", oci.SigTag(inst.Digest), empty)
			if _, err := prodSigner.Sign(ctx, st, "installer", inst.Digest); err != nil {
				t.Fatal(err)
			}
		}, "no signature verifies with the key"},
		{"provenance of another digest", func(st oci.Store, inst, other v1.Descriptor) {
			stmt, _ := json.Marshal(signing.Statement{Type: signing.StatementV1, PredicateType: signing.PredicateSLSA,
				Subject:   []signing.Subject{{Name: "boot", Digest: map[string]string{"sha256": other.Digest.Hex}}},
				Predicate: json.RawMessage(`{"buildDefinition":{"buildType":"x"}}`)})
			if _, err := devSigner.Attest(ctx, st, "installer", inst, signing.PredicateSLSA, stmt); err != nil {
				t.Fatal(err)
			}
		}, "attestation describes sha256:"},
		{"package outside the base", func(st oci.Store, inst, _ v1.Descriptor) {
			spdx := `{"spdxVersion":"SPDX-2.3","packages":[{"name":"foreign-tool","versionInfo":"1.0-alt1","checksums":[{"algorithm":"SHA256","checksumValue":"` + strings.Repeat("ab", 32) + `"}]}]}`
			stmt, _ := json.Marshal(signing.Statement{Type: signing.StatementV1, PredicateType: signing.PredicateSPDX,
				Subject:   []signing.Subject{{Name: "installer", Digest: map[string]string{"sha256": inst.Digest.Hex}}},
				Predicate: json.RawMessage(spdx)})
			if _, err := devSigner.Attest(ctx, st, "installer", inst, signing.PredicateSPDX, stmt); err != nil {
				t.Fatal(err)
			}
		}, "package foreign-tool-1.0-alt1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := reg.Host + "/" + strings.ReplaceAll(c.name, " ", "-")
			if _, err := d.release(t, "--registry", target); err != nil {
				t.Fatal(err)
			}
			st, err := oci.NewRemote(target, oci.RemoteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			inst, err := st.Head(ctx, "installer", "1.11.0-demo")
			if err != nil {
				t.Fatal(err)
			}
			boot, _ := st.Head(ctx, "boot", "1.11.0-demo")
			c.tamper(st, *inst, *boot)
			root := newRootCmd()
			var out, errb strings.Builder
			root.SetOut(&out)
			root.SetErr(&errb)
			root.SetArgs([]string{"promote", "--spec", d.spec, "--from-registry", target, "--from-key", d.devPub,
				"--to-registry", target + "-prod", "--key", d.prodKey, "1.11.0-demo"})
			err = root.Execute()
			if err == nil || !strings.Contains(errb.String(), c.want) || !strings.Contains(errb.String(), "installer") {
				t.Errorf("promote after %s: %v\n%s", c.name, err, errb.String())
			}
			if _, err := release.Repositories(ctx, mustRemote(t, target+"-prod"), "1.11.0-demo"); err == nil {
				t.Errorf("a refused promotion wrote the release to prod")
			}
		})
	}
}

func mustRemote(t *testing.T, target string) oci.Store {
	st, err := oci.NewRemote(target, oci.RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestReleaseTLSAuth: a registry with TLS and basic auth, trusted through
// --ca-file, credentials from docker's config.json; without them the
// error names the registry and the cause.
func TestReleaseTLSAuth(t *testing.T) {
	testutil.Slow(t)
	d := newDemoRelease(t)
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{TLS: true, Auth: true})
	target := reg.Host + "/secure/p11"
	_, err := d.release(t, "--registry", target, "--ca-file", reg.CAFile)
	if err == nil || !strings.Contains(err.Error(), "access denied") {
		t.Errorf("release without credentials: %v", err)
	}
	t.Setenv("DOCKER_CONFIG", reg.DockerConfig)
	_, err = d.release(t, "--registry", target)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("release without the CA: %v", err)
	}
	p, err := d.release(t, "--registry", target, "--ca-file", reg.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := runBuilder(t, "verify", "--ca-file", reg.CAFile, "--key", d.devPub, "--version", "1.11.0-demo", "docker://"+target); err != nil {
		t.Errorf("verify: %v\n%s", err, out)
	}
	// cosign itself, with the same CA and credentials.
	cmd := exec.Command(testutil.NeedTool(t, "cosign"), "verify", "--key", d.devPub, "--insecure-ignore-tlog", p.Images[1].Ref)
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+reg.CAFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("cosign verify over TLS with auth: %v\n%s", err, out)
	}
}
