// Package pipelinetest gives tests the demo release as the pipeline makes
// it (builder release's library job, run in the test process, no builder
// binary): the demo package base locked, built, signed with a fresh key
// and published into a local OCI layout. The factory's HTTP tests
// (factory/server) serve it. It lives beside the pipeline because it runs
// it: the factory's own floor may not reach a package base (internal/
// layering), its tests may.
package pipelinetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/builder"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/pipeline"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/demobase"
	"github.com/nodeforge/builder/pkgbase/locker"
	"github.com/nodeforge/builder/release"
)

// DemoVersion is the demo release's version.
const DemoVersion = "1.11.0-demo"

// keyPassword seals the demo release's signing key (KeyFile).
const keyPassword = "pipelinetest"

// Release is the demo release published into a local OCI layout (channel
// dev), with the key pair that signed it.
type Release struct {
	// Dir holds everything the release was made from and into (the
	// package base, its cache, the build, the keys, the layout): a
	// response naming a path under it leaks a local path.
	Dir string
	// Layout is the OCI layout the release is in.
	Layout string
	// Version is DemoVersion.
	Version string
	// Published is what the pipeline returned.
	Published *release.Published
	// KeyFile and PubFile are the signing key (cosign.key, sealed with
	// Password) and its public half (cosign.pub), for outside tools.
	KeyFile, PubFile string
	Password         string
	// Keys verify the release; Signer signs as its key.
	Keys   []signing.Verifier
	Signer *signing.Signer
}

var (
	demoOnce sync.Once
	demo     *Release
	demoErr  error
	demoTmp  string
)

// Demo is the demo release, made once per test process (about a minute
// under the race detector) and shared: tests only read it. A test that
// changes the layout works on Copy's. Cleanup, from TestMain, removes it.
func Demo(t testing.TB) *Release {
	t.Helper()
	demoOnce.Do(func() {
		demoTmp, demoErr = os.MkdirTemp("", "nodeforge-pipelinetest-")
		if demoErr == nil {
			demo, demoErr = makeDemo(context.Background(), demoTmp)
		}
	})
	if demoErr != nil {
		t.Fatalf("the demo release: %v", demoErr)
	}
	return demo
}

// Cleanup removes the shared demo release, if one was made.
func Cleanup() {
	if demoTmp != "" {
		os.RemoveAll(demoTmp)
	}
}

// Copy is the release in a layout of the test's own (under a new Dir),
// which it may change.
func (r *Release) Copy(t testing.TB) *Release {
	t.Helper()
	c := *r
	c.Dir = t.TempDir()
	c.Layout = filepath.Join(c.Dir, "release", "dev")
	if err := os.CopyFS(c.Layout, os.DirFS(r.Layout)); err != nil {
		t.Fatal(err)
	}
	return &c
}

// Store opens the release's layout.
func (r *Release) Store(t testing.TB) oci.Store {
	t.Helper()
	st, err := oci.OpenLayout(r.Layout)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// makeDemo writes the demo base into dir, a key pair, and releases the
// base to dir/release/dev as builder release --branch p11 does.
func makeDemo(ctx context.Context, dir string) (*Release, error) {
	base := filepath.Join(dir, "demo")
	if err := demobase.Write(base); err != nil {
		return nil, err
	}
	s, err := specs.Load(filepath.Join(base, demobase.SpecFile))
	if err != nil {
		return nil, err
	}
	r := &Release{Dir: dir, Layout: filepath.Join(dir, "release", "dev"), Version: DemoVersion, Password: keyPassword,
		KeyFile: filepath.Join(dir, "keys", "cosign.key"), PubFile: filepath.Join(dir, "keys", "cosign.pub")}
	if r.Keys, r.Signer, err = writeKeys(r.KeyFile, r.PubFile); err != nil {
		return nil, err
	}
	st, err := oci.CreateLayout(r.Layout)
	if err != nil {
		return nil, err
	}
	c := &cache.Cache{Dir: filepath.Join(dir, "cache")}
	r.Published, err = pipeline.Release(ctx, pipeline.ReleaseOptions{Spec: s,
		Locker: locker.Options{Cache: c}, Build: builder.Options{Out: filepath.Join(dir, "out"), Cache: c, Version: "test"},
		Store: st, Signer: r.Signer, Channel: "dev"})
	if err != nil {
		return nil, err
	}
	if r.Published.Version != DemoVersion {
		return nil, fmt.Errorf("the demo release is %s, not %s", r.Published.Version, DemoVersion)
	}
	return r, nil
}

// writeKeys generates a cosign key pair into the two files and returns
// its verifier and signer.
func writeKeys(keyFile, pubFile string) ([]signing.Verifier, *signing.Signer, error) {
	priv, pub, err := signing.Generate([]byte(keyPassword))
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(filepath.Dir(keyFile), 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(keyFile, priv, 0o600); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(pubFile, pub, 0o644); err != nil {
		return nil, nil, err
	}
	sv, err := signing.LoadPrivate(priv, []byte(keyPassword))
	if err != nil {
		return nil, nil, err
	}
	v, err := signing.LoadPublic(pub)
	if err != nil {
		return nil, nil, err
	}
	signer, err := signing.NewSigner(sv)
	return []signing.Verifier{v}, signer, err
}
