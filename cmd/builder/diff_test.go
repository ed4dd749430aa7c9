package main

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/certification"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/demobase"
)

// TestDiffDemo releases the demo, then a second demo release with
// containerd updated (its new changelog entry naming a CVE), the nvidia
// extension removed and a kernel argument changed, both into one layout;
// builder diff between the two published releases lists exactly those,
// checked against the two locks read independently here.
func TestDiffDemo(t *testing.T) {
	testutil.Slow(t)
	d := newDemoRelease(t)
	// A container image holding containerd, which the update changes.
	const ctrImage = "images:\n  ctr:\n    packages: [containerd, bash]\n    entrypoint: [/bin/bash]\n"
	appendFile(t, d.spec, ctrImage)
	if _, err := d.publish(t); err != nil {
		t.Fatal(err)
	}
	oldLock := filepath.Join(t.TempDir(), "old.lock.json")
	copyFile(t, filepath.Join(d.dir, "demo.lock.json"), oldLock)

	const cve = "CVE-2025-47290"
	if err := demobase.WriteUpdated(d.dir, demobase.Update{Name: "containerd", Version: "1.7.28", Release: "alt1",
		Note: "- 1.7.28: fixes " + cve + " (a symlink race in image pulls)."}); err != nil {
		t.Fatal(err)
	}
	spec, err := os.ReadFile(d.spec)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(spec), "version: 1.11.0-demo", "version: 1.12.0-demo", 1)
	s = strings.Replace(s, "  nvidia:\n    kind: extension\n    packages: [kernel-modules-nvidia-std-def, nvidia-modprobe]\n", "", 1)
	s = strings.Replace(s, "\ncomponents:\n", "\nimage:\n  cmdline: [init_on_alloc=1, slab_nomerge, pti=on, consoleblank=0, printk.devkmsg=on, module.sig_enforce=1, talos.platform=metal]\n\ncomponents:\n", 1)
	if s == string(spec) || strings.Contains(s, "nvidia:") {
		t.Fatalf("the spec was not edited:\n%s", s)
	}
	// WriteUpdated wrote the spec anew: the image again, and a new one.
	s += ctrImage + "  shell:\n    packages: [bash]\n    entrypoint: [/bin/bash]\n"
	if err := os.WriteFile(d.spec, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(d.dir, "demo.lock.json"))
	if _, err := d.publish(t); err != nil {
		t.Fatal(err)
	}
	layout := "oci:" + filepath.Join(d.dir, "release", "dev")
	out, err := runBuilder(t, "diff", "--format", "json", "--key", d.devPub, "--cache", d.cache,
		"--old-version", "1.11.0-demo", "--new-version", "1.12.0-demo", layout, layout)
	if err != nil {
		t.Fatal(err)
	}
	validateSchema(t, "diff.schema.json", []byte(out))
	var got certification.Diff
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}

	// The locks, read here: what was added, removed and updated.
	a, b := lockedByName(t, oldLock), lockedByName(t, filepath.Join(d.dir, "demo.lock.json"))
	var wantRemoved, wantAdded, wantUpdated []string
	for k, p := range a {
		if q, ok := b[k]; !ok {
			wantRemoved = append(wantRemoved, k)
		} else if q.NEVRA != p.NEVRA {
			wantUpdated = append(wantUpdated, k+" "+p.Version+"-"+p.Release+" "+q.Version+"-"+q.Release)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			wantAdded = append(wantAdded, k)
		}
	}
	var gotRemoved, gotAdded, gotUpdated []string
	for _, p := range got.Removed {
		gotRemoved = append(gotRemoved, p.Name+"."+p.Arch)
	}
	for _, p := range got.Added {
		gotAdded = append(gotAdded, p.Name+"."+p.Arch)
	}
	for _, u := range got.Updated {
		gotUpdated = append(gotUpdated, u.Name+"."+u.Arch+" "+u.From+" "+u.To)
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{{"removed", gotRemoved, wantRemoved}, {"added", gotAdded, wantAdded}, {"updated", gotUpdated, wantUpdated}} {
		slices.Sort(c.got)
		slices.Sort(c.want)
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: got %q, the locks say %q", c.what, c.got, c.want)
		}
	}
	if !slices.Equal(gotUpdated, []string{"containerd.x86_64 1.7.27-alt1 1.7.28-alt1"}) || !slices.Contains(gotRemoved, "nvidia-modprobe.x86_64") {
		t.Errorf("the demo's changes: updated %q, removed %q", gotUpdated, gotRemoved)
	}
	// The changelog between the versions: the new entry only, and its CVE.
	if u := got.Updated[0]; len(u.Changelog) != 1 || !strings.Contains(u.Changelog[0].Text, cve) || !slices.Equal(u.Fixes, []string{cve}) {
		t.Errorf("containerd's changelog %+v, fixes %q", u.Changelog, u.Fixes)
	}
	if len(got.Fixes) != 1 || got.Fixes[0].ID != cve || got.Fixes[0].Packages[0] != "containerd 1.7.28-alt1" {
		t.Errorf("fixes: %+v", got.Fixes)
	}
	// nvidia removed; cri changed by containerd's update alone.
	if len(got.Extensions) != 2 || got.Extensions[0].Name != "cri" || got.Extensions[0].Change != "changed" ||
		!slices.Equal(got.Extensions[0].PackagesAdded, []string{"containerd-1.7.28-alt1.x86_64"}) ||
		!slices.Equal(got.Extensions[0].PackagesRemoved, []string{"containerd-1.7.27-alt1.x86_64"}) ||
		got.Extensions[1].Name != "nvidia" || got.Extensions[1].Change != "removed" {
		t.Errorf("extensions: %+v", got.Extensions)
	}
	// The image holding containerd changed by its update; the new one was
	// added with its packages.
	if len(got.Images) != 2 || got.Images[0].Name != "ctr" || got.Images[0].Change != "changed" ||
		!slices.Equal(got.Images[0].PackagesAdded, []string{"containerd-1.7.28-alt1.x86_64"}) ||
		!slices.Equal(got.Images[0].PackagesRemoved, []string{"containerd-1.7.27-alt1.x86_64"}) ||
		got.Images[1].Name != "shell" || got.Images[1].Change != "added" || len(got.Images[1].PackagesAdded) == 0 {
		t.Errorf("images: %+v", got.Images)
	}
	// The version, and the nvidia component gone as a whole.
	if len(got.Identity) != 1 || got.Identity[0] != (certification.IdentityChange{Field: "version", Old: "1.11.0-demo", New: "1.12.0-demo"}) {
		t.Errorf("identity: %+v", got.Identity)
	}
	if i := slices.IndexFunc(got.Components, func(c certification.ComponentChange) bool { return c.Component == "nvidia" }); i < 0 ||
		got.Components[i].Change != "removed" || !slices.ContainsFunc(got.Components[i].Left, func(m certification.Member) bool { return m.Name == "nvidia-modprobe" }) {
		t.Errorf("components: %+v", got.Components)
	}
	if len(got.Kernel) != 1 || !slices.Equal(got.Kernel[0].ArgsAdded, []string{"talos.platform=metal"}) || len(got.Kernel[0].ArgsRemoved) != 0 ||
		got.Kernel[0].OldVersion != got.Kernel[0].NewVersion || len(got.Kernel[0].ModulesAdded)+len(got.Kernel[0].ModulesRemoved) != 0 {
		t.Errorf("kernel: %+v", got.Kernel)
	}
	names := map[string]certification.ArtifactChange{}
	for _, c := range got.Artifacts {
		names[c.Name] = c
	}
	if c := names["x86_64/extensions/nvidia"]; c.Change != "removed" || len(c.FilesRemoved) == 0 {
		t.Errorf("the nvidia extension's artifact: %+v (artifacts %q)", c, slices.Sorted(maps.Keys(names)))
	}

	// Release notes in Markdown; and --exit-code.
	md, err := runBuilder(t, "diff", "--format", "md", "--key", d.devPub, "--cache", d.cache, "--exit-code",
		"--old-version", "1.11.0-demo", "--new-version", "1.12.0-demo", layout, layout)
	if ee := (*exitError)(nil); !errors.As(err, &ee) || ee.code != 1 {
		t.Errorf("--exit-code on different releases: %v", err)
	}
	for _, want := range []string{"## Fixes in this update", "- " + cve + ": containerd 1.7.28-alt1", "containerd (x86_64): 1.7.27-alt1 -> 1.7.28-alt1", "+`talos.platform=metal`", "- nvidia (x86_64): removed",
		"## Container images", "- ctr (x86_64): changed, packages ", "- shell (x86_64): added, packages "} {
		if !strings.Contains(md, want) {
			t.Errorf("the release notes lack %q:\n%s", want, md)
		}
	}
	// The published release's size picture: its root filesystem read from
	// the layout.
	sz, err := runBuilder(t, "size", "--format", "json", "--key", d.devPub, "--version", "1.12.0-demo", layout)
	if err != nil {
		t.Fatal(err)
	}
	validateSchema(t, "size.schema.json", []byte(sz))
	var sr certification.SizeReport
	if err := json.Unmarshal([]byte(sz), &sr); err != nil {
		t.Fatal(err)
	}
	images := 0
	for _, a := range sr.Artifacts {
		if a.Name == "x86_64/rootfs.sqsh" && (a.Squashfs == 0 || a.Image == 0 || a.Installed == 0) {
			t.Errorf("the release's root filesystem was not read: %+v", a)
		}
		if strings.HasPrefix(a.Name, "x86_64/images/") && a.Installed > 0 && len(a.ByPackage) > 0 {
			images++
		}
	}
	if images != 2 {
		t.Errorf("size lists %d container images, want 2 (ctr, shell)", images)
	}
	// Two locks compare too (no artifacts then); a release is the same as itself.
	same, err := runBuilder(t, "diff", "--exit-code", "--cache", d.cache, oldLock, oldLock)
	if err != nil || !strings.Contains(same, "No changes.") {
		t.Errorf("a lock against itself: %v\n%s", err, same)
	}
	// The same release but for tzdata, no longer requested by rootfs
	// (talos-installer keeps it in the release): a change, explained from
	// the lock that held it (its base read again beside it).
	l, err := lock.Read(filepath.Join(d.dir, "demo.lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	x86 := l.Architectures["x86_64"]
	x86.Components["rootfs"] = slices.DeleteFunc(x86.Components["rootfs"], func(n string) bool { return strings.HasPrefix(n, "tzdata-") })
	l.Resolution.Requests["rootfs"] = slices.DeleteFunc(l.Resolution.Requests["rootfs"], func(r string) bool { return r == "tzdata" })
	noTz := filepath.Join(d.dir, "no-tzdata.lock.json")
	if b, err := l.Marshal(); err != nil || os.WriteFile(noTz, b, 0o644) != nil {
		t.Fatal(err)
	}
	tz, err := runBuilder(t, "diff", "--exit-code", "--cache", d.cache, filepath.Join(d.dir, "demo.lock.json"), noTz)
	if ee := (*exitError)(nil); !errors.As(err, &ee) || ee.code != 1 ||
		!strings.Contains(tz, "- tzdata left rootfs (x86_64): tzdata-2025b-alt1.noarch; still in installer\n  - was there by: requested tzdata -> tzdata-2025b-alt1.noarch\n") {
		t.Errorf("tzdata leaving rootfs: %v\n%s", err, tz)
	}
}

// lockedByName reads a lock's packages by name.arch.
func lockedByName(t *testing.T, path string) map[string]lock.Package {
	t.Helper()
	l, err := lock.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]lock.Package{}
	for _, a := range l.Architectures {
		for _, p := range a.Packages {
			out[p.Name+"."+p.Arch] = p
		}
	}
	return out
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
