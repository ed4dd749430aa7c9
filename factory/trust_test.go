package factory

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/attest/signing/signingtest"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
)

// artifactBytes is what the trust tests' builds make: n bytes that name
// the artifact and its schematic throughout.
func artifactBytes(name, id string, n int) []byte {
	unit := []byte(name + " of " + id + "\n")
	return bytes.Repeat(unit, n/len(unit)+1)[:n]
}

// trustService is a service serving one release ("1.0", x86_64) from a
// signed layout cache, whose builds make size bytes naming the artifact
// and its schematic, and its log.
func trustService(t *testing.T, size int) (*Service, *testutil.Log) {
	t.Helper()
	cache, err := oci.CreateLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	log := &testutil.Log{}
	s, err := newService(Options{Cache: cache, Releases: []ReleaseStore{{Store: cache}}, Signer: signingtest.Signer(t),
		BuilderVersion: "test", Log: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitBuildsAtEnd(t, s.WaitBuilds)
	s.ServeUnverified(&VerifiedRelease{Version: "1.0", Params: compose.Params{Architectures: []string{"x86_64"}}, Digests: map[string]string{}})
	s.BuildWith(func(_ context.Context, _ *VerifiedRelease, sch *schematic.Schematic, a Artifact, arch string) ([]byte, error) {
		id, _ := sch.ID()
		return artifactBytes(a.FileName(arch), id, size), nil
	})
	return s, log
}

// addSchematic stores a schematic and returns it with its ID.
func addSchematic(t *testing.T, s *Service, yaml string) (*schematic.Schematic, string) {
	t.Helper()
	sch, err := schematic.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.AddSchematic(context.Background(), sch, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sch, id
}

// TestCacheEntryOfAnotherRequest: a cache tag pointed at another
// schematic's entry, validly signed by the factory (someone who can write
// to the cache store), is never served: it is refused, counted and logged
// naming both keys, and the right artifact is built and served. The same
// for an installer index and a schematic.
func TestCacheEntryOfAnotherRequest(t *testing.T) {
	ctx := context.Background()
	s, log := trustService(t, 4096)
	schA, idA := addSchematic(t, s, "{}")
	schB, idB := addSchematic(t, s, "customization:\n  extraKernelArgs: [init=/bin/sh]\n")
	rel := s.Release("1.0")
	get := func(sch *schematic.Schematic, a Artifact) (*CachedArtifact, []byte) {
		t.Helper()
		art, err := s.Compose(ctx, rel, sch, a, "x86_64")
		if err != nil {
			t.Fatal(err)
		}
		b, err := art.Bytes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return art, b
	}
	for _, name := range []string{"metal-amd64.iso", "metal-amd64.raw", "kernel-amd64"} {
		a, _ := ParseArtifact(name)
		get(schA, a)
		get(schB, a)
		composed := a.FileName("x86_64")
		keyA, keyB := cacheKey(rel, idA, composed, "test"), cacheKey(rel, idB, composed, "test")
		imgB, err := s.o.Cache.Image(ctx, RepoArtifacts, keyB)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.o.Cache.WriteImage(ctx, RepoArtifacts, keyA, imgB); err != nil {
			t.Fatal(err)
		}
		before := s.Stats()
		want := artifactBytes(composed, idA, 4096)
		art, b := get(schA, a)
		if !bytes.Equal(b, want) {
			t.Errorf("%s of A after the swap: %.40q", name, b)
		}
		if sum := sha256.Sum256(want); art.Digest().Hex != fmt.Sprintf("%x", sum) {
			t.Errorf("%s's digest after the swap: %s", name, art.Digest())
		}
		if st := s.Stats(); st.CacheErrors != before.CacheErrors+1 || st.Builds != before.Builds+1 {
			t.Errorf("%s: %+v, then %+v", name, before, st)
		}
		if !strings.Contains(log.String(), "another request's") || !strings.Contains(log.String(), keyB) {
			t.Errorf("%s: no log line names both keys:\n%s", name, log.String())
		}
	}
	if got := counterValue(s.metrics.mismatches); got != 3 {
		t.Errorf("mismatches metric: %v, want 3", got)
	}

	// Installers: the index tagged for A is B's, signed for B's key.
	index := func(id string) v1.ImageIndex {
		img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: static.NewLayer([]byte(id), types.OCILayer)})
		if err != nil {
			t.Fatal(err)
		}
		idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{Add: img})
		return mutate.Annotations(idx, map[string]string{AnnotationSchematic: id}).(v1.ImageIndex)
	}
	k := InstallerKind{}
	keyA, keyB := s.installerKey(rel, idA, k), s.installerKey(rel, idB, k)
	for key, id := range map[string]string{keyA: idA, keyB: idB} {
		if err := s.putInstaller(ctx, key, "factory.example/installer/"+id+":1.0", index(id)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.loadInstaller(ctx, key, true); err != nil {
			t.Fatalf("installer %s: %v", id, err)
		}
	}
	if err := s.o.Cache.WriteIndex(ctx, RepoInstallers, keyA, index(idB)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.loadInstaller(ctx, keyA, true); err == nil || !strings.Contains(err.Error(), "another request's") {
		t.Errorf("the installer tagged for A but signed for B: %v", err)
	}
	if got := counterValue(s.metrics.mismatches); got != 4 {
		t.Errorf("mismatches metric after the installer: %v, want 4", got)
	}

	// Schematics: the tag of A names B's; a factory that has not seen A
	// refuses it (whatever is asked of it: its document, its media), and
	// gives nothing of B's.
	schBImg, err := s.o.Cache.Image(ctx, RepoSchematics, idB)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.o.Cache.WriteImage(ctx, RepoSchematics, idA, schBImg); err != nil {
		t.Fatal(err)
	}
	s.schematics = &schematics{st: s.o.Cache, mismatches: s.metrics.mismatches}
	for range 2 {
		if sch, err := s.Schematic(ctx, idA); err == nil || !strings.Contains(err.Error(), "has the ID "+idB) {
			t.Errorf("schematic A with B's content: %+v, %v (want an error naming its other ID)", sch, err)
		}
	}
	if got := counterValue(s.metrics.mismatches); got != 6 {
		t.Errorf("mismatches metric after the schematic: %v, want 6", got)
	}
}

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	c.Write(&m)
	return m.GetCounter().GetValue()
}

// TestVerifiedReader: the whole of a blob only when it matches; a damaged
// one never yields its held-back end.
func TestVerifiedReader(t *testing.T) {
	for _, size := range []int{0, 1, 1000, HoldBack, HoldBack + 1, 3*HoldBack + 17} {
		data := artifactBytes("blob", "x", size)
		desc := v1.Descriptor{Digest: digest.OCI(data), Size: int64(size)}
		got, err := io.ReadAll(newVerifiedReader(bytes.NewReader(data), desc))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%d bytes: %v, read %d", size, err, len(got))
		}
		for name, bad := range map[string][]byte{
			"short":   data[:max(size-1, 0)],
			"long":    append(bytes.Clone(data), 'x'),
			"flipped": flipped(data),
		} {
			if name != "long" && size == 0 {
				continue
			}
			got, err := io.ReadAll(newVerifiedReader(bytes.NewReader(bad), desc))
			if !errors.Is(err, ErrDamaged) || len(got) > max(size-HoldBack, 0) {
				t.Errorf("%d bytes, %s: %v after %d bytes", size, name, err, len(got))
			}
		}
	}
}

func flipped(b []byte) []byte {
	b = bytes.Clone(b)
	if len(b) > 0 {
		b[len(b)/2] ^= 1
	}
	return b
}

// TestLRU: the schematics' memory keeps the most recently used, no more
// than its size.
func TestLRU(t *testing.T) {
	lru := newLRU[int](3)
	for i := range 5 {
		lru.put(fmt.Sprint(i), i)
	}
	lru.get("2")
	lru.put("5", 5)
	if _, ok := lru.get("3"); ok || lru.len() != 3 {
		t.Errorf("the LRU kept the least recently used or grew: %d", lru.len())
	}
	if v, ok := lru.get("2"); !ok || v != 2 {
		t.Errorf("the LRU lost a recent entry")
	}
}
