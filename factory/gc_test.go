package factory

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/attest/signing/signingtest"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
)

// gcFixture is a cache store with signed entries written as the factory
// writes them, of versions 1.0.0 and 2.0.0.
type gcFixture struct {
	st    oci.Store
	srv   *Service
	ids   []string
	byVer map[string][]string  // version -> "repo:key" of its entries
	infos map[string]entryInfo // an artifact's key -> its entry
}

func newGCFixture(t *testing.T, st oci.Store) *gcFixture {
	t.Helper()
	ctx := context.Background()
	signer := signingtest.Signer(t)
	f := &gcFixture{st: st, byVer: map[string][]string{}, infos: map[string]entryInfo{}}
	m := newMetrics()
	f.srv = &Service{o: Options{Cache: st, Signer: signer}, schematics: &schematics{st: st}, metrics: m,
		cache: &artifactCache{st: st, signer: signer, metrics: m, interval: time.Minute, now: time.Now}}
	for _, args := range [][]string{nil, {"console=ttyS0"}} {
		sch := &schematic.Schematic{}
		sch.Customization.ExtraKernelArgs = args
		id, err := f.srv.schematics.put(ctx, sch, nil)
		if err != nil {
			t.Fatal(err)
		}
		f.ids = append(f.ids, id)
	}
	for _, v := range []string{"1.0.0", "2.0.0"} {
		for _, id := range f.ids {
			for _, name := range []string{"kernel-x86_64", "metal-x86_64.iso"} {
				f.putArtifact(t, entryInfo{Schematic: id, Version: v, Name: name, Builder: "test"})
			}
			for _, pl := range []string{"", "aws"} {
				f.putInstaller(t, id, v, pl)
			}
		}
	}
	// Written before entries were annotated: kept, whatever its version.
	f.putArtifact(t, entryInfo{Name: "kernel-x86_64"})
	return f
}

func (f *gcFixture) putArtifact(t *testing.T, e entryInfo) string {
	t.Helper()
	key := hexKey(e.Version, e.Schematic, e.Name)
	e.Key = key
	f.infos[key] = e
	bf, err := writeBuiltFile(t.TempDir(), func(w io.Writer) error {
		_, err := io.WriteString(w, e.Version+" "+e.Schematic+" "+e.Name)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.srv.cache.put(context.Background(), e, bf); err != nil {
		t.Fatal(err)
	}
	f.byVer[e.Version] = append(f.byVer[e.Version], RepoArtifacts+":"+key)
	return key
}

func (f *gcFixture) putInstaller(t *testing.T, id, version, pl string) string {
	t.Helper()
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{Layer: static.NewLayer([]byte(id+version+pl), types.OCILayer)})
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{Add: img})
	ann := map[string]string{AnnotationSchematic: id, annImageVersion: version}
	if pl != "" {
		ann[AnnotationPlatform] = pl
	}
	key := hexKey(version, id, InstallerRepo(pl))
	if err := f.srv.putInstaller(context.Background(), key, "", mutate.Annotations(idx, ann).(v1.ImageIndex)); err != nil {
		t.Fatal(err)
	}
	f.byVer[version] = append(f.byVer[version], RepoInstallers+":"+key)
	return key
}

// hexKey stands for a cache key: any 64 hex digits do.
func hexKey(parts ...string) string {
	return digest.OCI([]byte(strings.Join(parts, "\x00"))).Hex
}

// tags are the tags of the entries' repositories, "repo:tag".
func (f *gcFixture) tags(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, repo := range []string{RepoArtifacts, RepoInstallers, RepoSchematics} {
		tags, err := f.st.Tags(context.Background(), repo)
		if err != nil && !errors.Is(err, oci.ErrNotFound) {
			t.Fatal(err)
		}
		for _, tag := range tags {
			out = append(out, repo+":"+tag)
		}
	}
	slices.Sort(out)
	return out
}

func entryRefs(es []CollectedEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Repo+":"+e.Key)
	}
	slices.Sort(out)
	return out
}

// TestCollect: on a layout and on a registry (through its delete API),
// a dry run lists exactly the entries of the version not kept and deletes
// nothing; the collection removes them with their signatures, keeps the
// schematics, the unlabelled entry and every entry of the kept version
// (which still reads from the cache); a collection cut short after any
// step is finished by the next.
func TestCollect(t *testing.T) {
	stores := map[string]func(t *testing.T) oci.Store{
		"layout": func(t *testing.T) oci.Store {
			l, err := oci.CreateLayout(filepath.Join(t.TempDir(), "cache"))
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		"registry": func(t *testing.T) oci.Store {
			reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
			r, err := oci.NewRemote(reg.Host+"/nodeforge/factory-cache", oci.RemoteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			f := newGCFixture(t, open(t))
			before := f.tags(t)
			want := slices.Sorted(slices.Values(f.byVer["1.0.0"]))
			dry := &CollectReport{DryRun: true}
			if err := collect(ctx, f.st, []string{"2.0.0"}, CollectOptions{DryRun: true}, dry); err != nil {
				t.Fatal(err)
			}
			if got := entryRefs(dry.Entries); !slices.Equal(got, want) {
				t.Errorf("dry run lists\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for _, e := range dry.Entries {
				if e.Version != "1.0.0" || e.Signature != sigTagOf(e.Digest) || !slices.Contains(f.ids, e.Schematic) || e.Artifact == "" {
					t.Errorf("dry run entry %+v", e)
				}
			}
			if after := f.tags(t); !slices.Equal(after, before) {
				t.Fatalf("the dry run changed the tags:\n%v\nbefore:\n%v", after, before)
			}

			rep := &CollectReport{}
			if err := collect(ctx, f.st, []string{"2.0.0"}, CollectOptions{}, rep); err != nil {
				t.Fatal(err)
			}
			if got := entryRefs(rep.Entries); !slices.Equal(got, want) || !slices.Equal(rep.Dropped, []string{"1.0.0"}) ||
				rep.KeptEntries != len(f.byVer["2.0.0"]) || len(rep.Unlabelled) != 1 {
				t.Errorf("collected %v (dropped %v), kept %d, unlabelled %v", got, rep.Dropped, rep.KeptEntries, rep.Unlabelled)
			}
			f.checkLeft(t, before, dry.Entries)
			if l, ok := f.st.(*oci.Layout); ok {
				// The bytes of a dropped artifact left with its entry.
				_, err := l.BlobFile(digest.OCI([]byte("1.0.0 " + f.ids[0] + " kernel-x86_64")))
				if rep.Pruned == nil || rep.Pruned.Blobs == 0 || !errors.Is(err, os.ErrNotExist) {
					t.Errorf("pruned %+v; a dropped artifact's blob: %v", rep.Pruned, err)
				}
			}
			for _, ref := range f.byVer["2.0.0"] {
				repo, key, _ := strings.Cut(ref, ":")
				if repo == RepoArtifacts {
					if _, ok, _ := f.srv.cache.get(ctx, f.infos[key]); !ok {
						t.Errorf("kept entry %s does not read from the cache", key)
					}
				} else if _, err := f.srv.loadInstaller(ctx, key, true); err != nil {
					t.Errorf("kept installer %s: %v", key, err)
				}
			}
			f.cutShort(t)
		})
	}
}

// checkLeft: what is left is what was there less the entries collected
// and their signatures.
func (f *gcFixture) checkLeft(t *testing.T, before []string, gone []CollectedEntry) {
	t.Helper()
	want := slices.Clone(before)
	for _, e := range gone {
		want = slices.DeleteFunc(want, func(s string) bool { return s == e.Repo+":"+e.Key || s == e.Repo+":"+e.Signature })
	}
	if got := f.tags(t); !slices.Equal(got, want) || len(want) != len(before)-2*len(gone) {
		t.Errorf("left\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// cutShort leaves entries as collections killed after each step would,
// and as a write in progress does, and collects again.
func (f *gcFixture) cutShort(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	del := f.st.(oci.Deleter)
	id := f.ids[0]
	// Killed after the tag (a layout still lists the manifest).
	afterTag := f.putArtifact(t, entryInfo{Schematic: id, Version: "1.0.0", Name: "raw", Builder: "t"})
	tagged := map[string]string{}
	if h, err := f.st.Head(ctx, RepoArtifacts, afterTag); err != nil {
		t.Fatal(err)
	} else {
		tagged[afterTag] = h.Digest.String()
	}
	if err := del.Delete(ctx, RepoArtifacts, afterTag); err != nil && !errors.Is(err, oci.ErrTagDeleteUnsupported) {
		t.Fatal(err)
	}
	// Killed after the manifest: the signature alone.
	afterManifest := f.putInstaller(t, id, "1.0.0", "gcp")
	d, err := f.st.Head(ctx, RepoInstallers, afterManifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := del.Delete(ctx, RepoInstallers, d.Digest.String()); err != nil {
		t.Fatal(err)
	}
	// A write of a kept version between its signature and its tag (a
	// registry that deletes no tag keeps it tagged: an entry all the same).
	inFlight := f.putArtifact(t, entryInfo{Schematic: id, Version: "2.0.0", Name: "qcow2", Builder: "t"})
	fd, err := f.st.Head(ctx, RepoArtifacts, inFlight)
	if err != nil {
		t.Fatal(err)
	}
	if err := del.Delete(ctx, RepoArtifacts, inFlight); err != nil && !errors.Is(err, oci.ErrTagDeleteUnsupported) {
		t.Fatal(err)
	}
	rep := &CollectReport{}
	if err := collect(ctx, f.st, []string{"2.0.0"}, CollectOptions{}, rep); err != nil {
		t.Fatal(err)
	}
	left := f.tags(t)
	for _, gone := range []string{RepoArtifacts + ":" + afterTag, RepoArtifacts + ":" + sigTagOf(tagged[afterTag]),
		RepoInstallers + ":" + afterManifest, RepoInstallers + ":" + sigTagOf(d.Digest.String())} {
		if slices.Contains(left, gone) {
			t.Errorf("%s left after the second collection", gone)
		}
	}
	if !slices.Contains(left, RepoArtifacts+":"+sigTagOf(fd.Digest.String())) {
		t.Errorf("the signature of a write in progress was collected: %+v", rep.Entries)
	}
	if len(rep.Entries) != 2 {
		t.Errorf("second collection: %+v", rep.Entries)
	}
}

// TestCollectKeeps: the versions kept are the newest by source date, then
// by version (as /versions orders them), and those listed that do not verify; a version marked broken
// keeps its entries without counting; a store not listed, or keeping
// none, stops the collection.
func TestCollectKeeps(t *testing.T) {
	l, err := oci.CreateLayout(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	unlisted, err := oci.CreateLayout(filepath.Join(t.TempDir(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{o: Options{Cache: l, Releases: []ReleaseStore{{Store: l}, {Store: unlisted}}}}
	var rels []*VerifiedRelease
	for v, date := range map[string]int64{"1.9.0": 100, "1.10.0": 100, "1.8.0": 200, "1.0.0": 50} {
		rels = append(rels, &VerifiedRelease{Version: v, SourceDate: date})
	}
	s.ServeUnverified(rels...)
	s.served().failures = []failure{{store: 0, version: "0.9.0", cause: errors.New("does not verify")}}
	rep, err := s.Collect(context.Background(), CollectOptions{KeepVersions: 3, DryRun: true})
	if err != nil || !slices.Equal(rep.Kept, []string{"1.8.0", "1.10.0", "1.9.0"}) || !slices.Equal(rep.Unverified, []string{"0.9.0"}) || rep.Broken != nil {
		t.Errorf("kept %v, unverified %v, broken %v: %v", rep.Kept, rep.Unverified, rep.Broken, err)
	}
	// One date: the order of /versions (compareVersions), a pre-release
	// before its release.
	if got := []*VerifiedRelease{{Version: "1.12.0", SourceDate: 300}, {Version: "1.12.0-rc.1", SourceDate: 300}}; newestFirst(got[1], got[0]) <= 0 {
		t.Errorf("1.12.0-rc.1 is newer than 1.12.0 of the same date")
	}
	s.o.BrokenVersions = []string{"v1.8.0"}
	rep, err = s.Collect(context.Background(), CollectOptions{KeepVersions: 2, DryRun: true})
	if err != nil || !slices.Equal(rep.Kept, []string{"1.10.0", "1.9.0"}) || !slices.Equal(rep.Broken, []string{"1.8.0"}) {
		t.Errorf("with 1.8.0 broken: kept %v, broken %v: %v", rep.Kept, rep.Broken, err)
	}
	if _, err := s.Collect(context.Background(), CollectOptions{}); err == nil {
		t.Error("keeping no version was accepted")
	}
	s.served().failures = append(s.served().failures, failure{store: 1, cause: errors.New("unreachable")})
	if _, err := s.Collect(context.Background(), CollectOptions{KeepVersions: 1}); err == nil || !strings.Contains(err.Error(), unlisted.String()) {
		t.Errorf("a store not listed: %v", err)
	}
}
