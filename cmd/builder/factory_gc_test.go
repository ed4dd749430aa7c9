package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/oci"
)

// gcCmd runs builder factory gc --json and returns its report.
func gcCmd(t *testing.T, args ...string) *factory.CollectReport {
	t.Helper()
	var rep factory.CollectReport
	validateSchema(t, "commands.schema.json#/$defs/collectReport", builderJSON(t, &rep, append([]string{"factory", "gc", "--json"}, args...)...))
	return &rep
}

// warmedEntries are the entries a warm report says are in the cache, as
// "version schematic artifact".
func warmedEntries(rep *factory.WarmReport) []string {
	var out []string
	for _, it := range rep.Items {
		name, _, _ := strings.Cut(it.Artifact, "/") // installer/ID:V is the installer entry
		out = append(out, rep.Version+" "+it.Schematic+" "+name)
	}
	slices.Sort(out)
	return out
}

// TestFactoryGC: two versions of the demo release, each warmed for two
// schematics into a cache in a layout and in docker-registry; gc
// --keep-versions 1 --dry-run lists exactly the older version's entries
// and deletes nothing; gc removes them with their signatures (crane ls
// judges the registry), and a factory on the kept version still serves
// everything from the cache, while the dropped version builds again.
func TestFactoryGC(t *testing.T) {
	testutil.Slow(t)
	t.Parallel() // see TestMain
	d := newDemoRelease(t)
	if _, err := d.publish(t); err != nil {
		t.Fatal(err)
	}
	spec, _ := os.ReadFile(d.spec)
	const v2 = "1.11.1-demo"
	os.WriteFile(d.spec, bytes.Replace(spec, []byte("version: "+demoVersion), []byte("version: "+v2), 1), 0o644)
	os.Remove(filepath.Join(d.dir, "demo.lock.json"))
	if _, err := d.publish(t); err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(d.dir, "release", "dev")
	reg := testutil.StartRegistry(t, testutil.RegistryOptions{})
	for name, cache := range map[string]string{
		"layout":   "oci:" + filepath.Join(d.dir, "release", "factory-cache"),
		"registry": "docker://" + reg.Host + "/nodeforge/factory-cache",
	} {
		t.Run(name, func(t *testing.T) {
			stores := []string{"--release", "oci:" + layout, "--key", d.devPub, "--cache", cache}
			_, hs := servedFactory(t, stores...)
			f := &factoryFixture{hs: hs}
			ids := []string{f.postSchematic(t, "customization:\n  extraKernelArgs: [console=ttyS0]\n"),
				f.postSchematic(t, "customization:\n  systemExtensions:\n    officialExtensions: [zfs]\n")}
			list := filepath.Join(t.TempDir(), "top.txt")
			os.WriteFile(list, []byte(strings.Join(ids, "\n")+"\n"), 0o644)
			warmed := map[string][]string{}
			for _, v := range []string{demoVersion, v2} {
				rep := warmCmd(t, append([]string{"--signing-key", d.devKey, "--version", v, "--schematics", list, "--artifacts", "kernel,cmdline,installer"}, stores...)...)
				warmed[v] = warmedEntries(rep)
			}
			tags := cacheTags(t, cache)
			gc := append([]string{"--keep-versions", "1"}, stores...)
			dry := gcCmd(t, append(gc, "--dry-run")...)
			var listed []string
			for _, e := range dry.Entries {
				listed = append(listed, e.Version+" "+e.Schematic+" "+e.Artifact)
			}
			slices.Sort(listed)
			if !slices.Equal(listed, warmed[demoVersion]) || !slices.Equal(dry.Kept, []string{v2}) || dry.KeptEntries != len(warmed[v2]) {
				t.Errorf("gc --dry-run lists\n%s\nkeeps %v (%d entries); want\n%s", strings.Join(listed, "\n"), dry.Kept, dry.KeptEntries, strings.Join(warmed[demoVersion], "\n"))
			}
			if after := cacheTags(t, cache); !slices.Equal(after, tags) {
				t.Errorf("gc --dry-run changed the cache:\n%v\nbefore\n%v", after, tags)
			}

			rep := gcCmd(t, gc...)
			if len(rep.Entries) != len(dry.Entries) || !slices.Equal(rep.Dropped, []string{demoVersion}) {
				t.Errorf("gc removed %d entries of %v, the dry run listed %d", len(rep.Entries), rep.Dropped, len(dry.Entries))
			}
			left := cacheTags(t, cache)
			for _, e := range dry.Entries {
				if e.Signature == "" || slices.Contains(left, e.Repo+":"+e.Key) || slices.Contains(left, e.Repo+":"+e.Signature) {
					t.Errorf("%s %s %s: its tag or its signature %q left after gc", e.Version, e.Artifact, e.Key, e.Signature)
				}
			}
			if len(left) != len(tags)-2*len(dry.Entries) {
				t.Errorf("%d tags left of %d, %d entries removed:\n%s", len(left), len(tags), len(dry.Entries), strings.Join(left, "\n"))
			}

			srv, hs := servedFactory(t, append(stores, "--signing-key", d.devKey)...)
			host := strings.TrimPrefix(hs.URL, "http://")
			for _, id := range ids {
				getBody(t, hs.URL+"/image/"+id+"/"+v2+"/kernel-amd64")
				getBody(t, hs.URL+"/image/"+id+"/"+v2+"/cmdline-metal-amd64")
				judge(t, "crane", "digest", "--insecure", host+"/installer/"+id+":"+v2)
			}
			if st := srv.Stats(); st.Builds != 0 || st.Hits != int64(len(warmed[v2])) {
				t.Errorf("serving the kept version: %+v, want %d hits and no build", st, len(warmed[v2]))
			}
			getBody(t, hs.URL+"/image/"+ids[0]+"/"+demoVersion+"/kernel-amd64")
			if st := srv.Stats(); st.Builds != 1 {
				t.Errorf("the dropped version's kernel: %+v, want one build", st)
			}
		})
	}
}

// cacheTags are the tags of the cache's artifacts and installers, as
// "repo:tag": crane ls for a registry.
func cacheTags(t *testing.T, cache string) []string {
	t.Helper()
	var out []string
	for _, repo := range []string{factory.RepoArtifacts, factory.RepoInstallers} {
		var tags []string
		if host, ok := strings.CutPrefix(cache, "docker://"); ok {
			tags = strings.Fields(judge(t, "crane", "ls", "--insecure", host+"/"+repo))
		} else {
			st, err := oci.OpenLayout(strings.TrimPrefix(cache, "oci:"))
			if err != nil {
				t.Fatal(err)
			}
			if tags, err = st.Tags(t.Context(), repo); err != nil {
				t.Fatal(err)
			}
		}
		for _, tag := range tags {
			out = append(out, repo+":"+tag)
		}
	}
	slices.Sort(out)
	return out
}

// TestFactoryGCConfig: gc and warm read factory serve's config file for
// the settings they take (releases, keys, cache, broken versions) and pass
// over the others; gc needs --keep-versions said.
func TestFactoryGCConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "factory.yaml")
	os.WriteFile(cfg, []byte("release: [oci:missing]\nkey: k.pub\nlisten: 0.0.0.0:8443\nmax-builds: 3\nlogin: [build]\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "k.pub"), nil, 0o644)
	for _, cmd := range []*cobra.Command{newFactoryServeCmd(), newFactoryWarmCmd(), newFactoryGCCmd()} {
		if cmd.Flags().Lookup("broken-version") == nil {
			t.Errorf("factory %s takes no --broken-version: it would not see the versions serve refuses", cmd.Name())
		}
	}
	list := filepath.Join(dir, "top.txt")
	os.WriteFile(list, []byte(strings.Repeat("a", 64)+"\n"), 0o644)
	if _, err := runBuilder(t, "factory", "gc", "--config", cfg); err == nil || !strings.Contains(err.Error(), "--keep-versions N is required") {
		t.Errorf("gc without --keep-versions: %v", err)
	}
	for _, args := range [][]string{
		{"factory", "gc", "--config", cfg, "--keep-versions", "1"},
		{"factory", "warm", "--config", cfg, "--signing-key", "x.key", "--version", "1", "--schematics", list},
	} {
		// The key of the file is read, beside it (and is no key): listen
		// and the others were passed over.
		_, err := runBuilder(t, args...)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "k.pub")) {
			t.Errorf("%s: %v", strings.Join(args[:2], " "), err)
		}
	}
}

// TestFactoryGCText: the text report names each entry (version,
// schematic, artifact, key) and says what was kept and freed.
func TestFactoryGCText(t *testing.T) {
	var b bytes.Buffer
	rep := &factory.CollectReport{Store: "oci:/c", DryRun: true, Kept: []string{"2"}, Dropped: []string{"1"}, KeptEntries: 3,
		Unverified: []string{"0.9"}, Broken: []string{"1.5"}, Entries: []factory.CollectedEntry{{Repo: "artifacts", Key: "k1", Version: "1", Schematic: "s1", Artifact: "metal-x86_64.iso"}}}
	if err := writeCollectReport(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"VERSION", "1  ", "s1", "metal-x86_64.iso", "k1", "kept versions 2 (3 entries); would remove 1 entries of versions 1", "not verified: 0.9", "marked broken: 1.5"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, b.String())
		}
	}
}
