package certification

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/internal/testutil"
	"github.com/nodeforge/builder/pkgbase/demobase"
	"github.com/nodeforge/builder/pkgbase/demobase/demotest"
	"github.com/nodeforge/builder/pkgbase/locker"
	"github.com/nodeforge/builder/pkgbase/resolve"
)

// validateJSON checks a document against a schema of docs/.
func validateJSON(t *testing.T, schema string, doc []byte) {
	t.Helper()
	s, err := jsonschema.NewCompiler().Compile(filepath.Join(testutil.RepoRoot(), "docs", schema))
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(v); err != nil {
		msg := err.Error()
		if ve, ok := err.(*jsonschema.ValidationError); ok {
			b, _ := json.Marshal(ve.BasicOutput())
			msg = string(b)
		}
		t.Errorf("the document does not follow %s: %s\n%s", schema, msg, doc)
	}
}

// TestDiffTzdata is the hostile user's case on the demo base's real lock:
// NEW is another version whose rootfs no longer requests tzdata (the
// installer still pulls it in through talos-installer's file dependency)
// and whose cri extension requests ca-certificates. The diff names the
// version change, tzdata leaving rootfs and ca-certificates joining cri,
// each with its chain from the lock that holds it, in every format.
func TestDiffTzdata(t *testing.T) {
	ctx := context.Background()
	dir, old, opts := demotest.Locked(t)
	b, err := old.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(l *lock.Lock, a *lock.Arch)) *lock.Lock {
		l, err := lock.Parse(b, "new")
		if err != nil {
			t.Fatal(err)
		}
		f(l, l.Architectures[demobase.Arch])
		return l
	}
	named := func(name string) func(string) bool {
		return func(n string) bool { p, ok := parseNEVRA(n); return ok && p.Name == name }
	}
	new := edit(func(l *lock.Lock, a *lock.Arch) {
		l.Spec.Version = "1.12.0-demo"
		a.Components["rootfs"] = slices.DeleteFunc(a.Components["rootfs"], named("tzdata"))
		l.Resolution.Requests["rootfs"] = slices.DeleteFunc(l.Resolution.Requests["rootfs"], func(r string) bool { return r == "tzdata" })
		ca := a.Components["rootfs"][slices.IndexFunc(a.Components["rootfs"], named("ca-certificates"))]
		a.Components["cri"] = append(a.Components["cri"], ca)
		l.Resolution.Requests["cri"] = append(l.Resolution.Requests["cri"], "ca-certificates")
	})
	explainers := map[*Side]*locker.LockExplainer{}
	why := func(ctx context.Context, s *Side, arch, comp string, nevras []string) (map[string]resolve.Path, error) {
		if explainers[s] == nil {
			explainers[s] = locker.NewLockExplainer(s.Lock, dir, opts)
		}
		return explainers[s].Shortest(ctx, arch, comp, nevras)
	}
	oldSide, newSide := &Side{Ref: "old.lock.json", Lock: old}, &Side{Ref: "new.lock.json", Lock: new}
	d := Compare(ctx, oldSide, newSide, nil, why)

	if len(d.Identity) != 1 || d.Identity[0] != (IdentityChange{Field: "version", Old: "1.11.0-demo", New: "1.12.0-demo"}) {
		t.Errorf("identity: %+v", d.Identity)
	}
	if len(d.Added)+len(d.Removed)+len(d.Updated) != 0 || d.Empty() {
		t.Errorf("the release keeps every package: added %v, removed %v, updated %v (empty %v)", d.Added, d.Removed, d.Updated, d.Empty())
	}
	if len(d.Components) != 2 {
		t.Fatalf("components: %+v", d.Components)
	}
	cri, rootfs := d.Components[0], d.Components[1]
	if rootfs.Component != "rootfs" || rootfs.Change != "changed" || len(rootfs.Joined) != 0 || len(rootfs.Left) != 1 {
		t.Fatalf("rootfs: %+v", rootfs)
	}
	tz := rootfs.Left[0]
	if tz.Name != "tzdata" || tz.NEVRA != "tzdata-2025b-alt1.noarch" || !slices.Equal(tz.Elsewhere, []string{"installer"}) ||
		tz.Why == nil || tz.Why.Request != "tzdata" || len(tz.Why.Steps) != 1 || tz.Why.Steps[0].Provider != tz.NEVRA ||
		tz.Because != `rootfs no longer requests "tzdata"` {
		t.Errorf("tzdata leaving rootfs: %+v (why %+v)", tz, tz.Why)
	}
	if cri.Component != "cri" || len(cri.Joined) != 1 || len(cri.Left) != 0 {
		t.Fatalf("cri: %+v", cri)
	}
	if ca := cri.Joined[0]; ca.Name != "ca-certificates" || !slices.Contains(ca.Elsewhere, "rootfs") || ca.Why == nil ||
		ca.Why.Request != "ca-certificates" || ca.Because != `cri now requests "ca-certificates"` {
		t.Errorf("ca-certificates joining cri: %+v (why %+v)", ca, ca.Why)
	}

	var text, md, js bytes.Buffer
	if err := d.Text(&text, false); err != nil {
		t.Fatal(err)
	}
	if err := d.Text(&md, true); err != nil {
		t.Fatal(err)
	}
	if err := d.JSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		format, got string
		want        []string
	}{
		{"text", text.String(), []string{"- version: 1.11.0-demo -> 1.12.0-demo", "- tzdata left rootfs (x86_64): tzdata-2025b-alt1.noarch; still in installer",
			"  - was there by: requested tzdata -> tzdata-2025b-alt1.noarch", `  - why it left: rootfs no longer requests "tzdata"`, "- ca-certificates joined cri (x86_64)"}},
		{"md", md.String(), []string{"## Release", "- version: `1.11.0-demo` -> `1.12.0-demo`", "## Components", "- `tzdata` left rootfs (x86_64): `tzdata-2025b-alt1.noarch`; still in installer"}},
		{"json", js.String(), []string{`"field": "version"`, `"component": "rootfs"`, `"name": "tzdata"`, `"because": "rootfs no longer requests \"tzdata\""`}},
	} {
		for _, w := range c.want {
			if !strings.Contains(c.got, w) {
				t.Errorf("%s lacks %q:\n%s", c.format, w, c.got)
			}
		}
	}
	validateJSON(t, "schemas/diff.schema.json", js.Bytes())
	var back Diff
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Components) != 2 {
		t.Errorf("the JSON does not read back: %v", err)
	}

	// A longer chain: tzdata is in the installer by talos-installer's
	// file dependency.
	d = Compare(ctx, oldSide, &Side{Ref: "new", Lock: edit(func(l *lock.Lock, a *lock.Arch) {
		a.Components["installer"] = slices.DeleteFunc(a.Components["installer"], named("tzdata"))
	})}, nil, why)
	text.Reset()
	d.Text(&text, false)
	if want := "  - was there by: requested talos-installer -> talos-installer-1.11.0-alt1.x86_64 requires /usr/share/zoneinfo/UTC -> tzdata-2025b-alt1.noarch\n"; !strings.Contains(text.String(), want) {
		t.Errorf("the chain through talos-installer: want %q in\n%s", want, text.String())
	}

	// A lock against itself: no changes. A lock that records no
	// resolution: the change without its chain, saying why.
	same := Compare(ctx, oldSide, &Side{Ref: "again", Lock: old}, nil, why)
	if !same.Empty() {
		t.Errorf("a lock against itself: %+v", same)
	}
	bare := edit(func(l *lock.Lock, a *lock.Arch) {
		l.Resolution = nil
		a.Components["rootfs"] = slices.DeleteFunc(a.Components["rootfs"], named("tzdata"))
	})
	d = Compare(ctx, &Side{Ref: "bare", Lock: bare}, oldSide, nil, why)
	if j := d.Components[0].Joined; len(j) != 1 || j[0].Why == nil || j[0].Because != "" || len(d.Identity) != 0 {
		t.Errorf("against a lock without a resolution, tzdata joins rootfs explained from NEW: %+v", d.Components)
	}
	d = Compare(ctx, oldSide, &Side{Ref: "bare", Lock: bare}, nil, why)
	if l := d.Components[0].Left; len(l) != 1 || l[0].Why == nil || l[0].Because != "" {
		t.Errorf("tzdata leaves rootfs for a lock without a resolution: %+v", d.Components)
	}
	d = Compare(ctx, &Side{Ref: "bare", Lock: bare}, &Side{Ref: "bare2", Lock: edit(func(l *lock.Lock, a *lock.Arch) { l.Resolution = nil })}, nil, why)
	if j := d.Components[0].Joined; len(j) != 1 || j[0].Why != nil || !strings.Contains(j[0].WhyNote, "records no resolution") {
		t.Errorf("no resolution on either side: %+v", d.Components)
	}
}

// TestDiffReportComponents: two build reports (no lock) compare the root
// filesystem's packages and each extension's.
func TestDiffReportComponents(t *testing.T) {
	side := func(ref, version string, rootfs []string, ext map[string][]string) *Side {
		a := &report.ArchReport{Packages: rootfs, Extensions: map[string]*report.ExtensionReport{}}
		for n, p := range ext {
			a.Extensions[n] = &report.ExtensionReport{Packages: p}
		}
		return &Side{Ref: ref, Report: &report.Report{Spec: report.SpecInfo{Name: "demo", Branch: "p11", Version: version},
			Architectures: map[string]*report.ArchReport{"x86_64": a}}}
	}
	old := side("out-1", "1.0", []string{"glibc-2.38-alt1.x86_64", "tzdata-2025b-alt1.noarch"}, map[string][]string{"cri": {"runc-1.2-alt1.x86_64"}})
	new := side("out-2", "1.0", []string{"glibc-2.38-alt2.x86_64"}, map[string][]string{"cri": {"runc-1.2-alt1.x86_64", "tzdata-2025b-alt1.noarch"}})
	d := Compare(context.Background(), old, new, nil, nil)
	if len(d.Identity) != 0 || len(d.Components) != 2 || d.Components[0].Component != "cri" || d.Components[0].Joined[0].Name != "tzdata" ||
		!slices.Equal(d.Components[0].Joined[0].Elsewhere, []string{"rootfs"}) ||
		d.Components[1].Component != "rootfs" || d.Components[1].Left[0].Name != "tzdata" || !slices.Equal(d.Components[1].Left[0].Elsewhere, []string{"cri"}) {
		t.Errorf("components from the reports: %+v", d.Components)
	}
}

// TestBecause: what the other side changed on a chain, first change first.
func TestBecause(t *testing.T) {
	c := &Chain{Request: "talos-installer", Steps: []Step{
		{Requirement: "talos-installer", Provider: "talos-installer-1.11.0-alt1.x86_64"},
		{From: "talos-installer-1.11.0-alt1.x86_64", Requirement: "/usr/share/zoneinfo/UTC", Provider: "tzdata-2025b-alt1.noarch"},
	}}
	res := &lock.Resolution{Requests: map[string][]string{"installer": {"talos-installer"}}}
	for _, tc := range []struct {
		joined bool
		other  map[string]string
		res    *lock.Resolution
		want   string
	}{
		{false, map[string]string{}, &lock.Resolution{}, `installer no longer requests "talos-installer"`},
		{true, map[string]string{}, &lock.Resolution{}, `installer now requests "talos-installer"`},
		{false, map[string]string{}, res, "talos-installer-1.11.0-alt1.x86_64, on the chain, left installer too"},
		{true, map[string]string{}, nil, "talos-installer-1.11.0-alt1.x86_64, on the chain, joined installer too"},
		{false, map[string]string{"talos-installer": "talos-installer-1.12.0-alt1.x86_64"}, res, "talos-installer-1.11.0-alt1.x86_64, on the chain, is now talos-installer-1.12.0-alt1.x86_64"},
		{true, map[string]string{"talos-installer": "talos-installer-1.10.0-alt1.x86_64"}, res, "talos-installer-1.11.0-alt1.x86_64, on the chain, was talos-installer-1.10.0-alt1.x86_64"},
		{false, map[string]string{"talos-installer": "talos-installer-1.11.0-alt1.x86_64"}, res, ""},
	} {
		if got := because(c, "installer", tc.joined, tc.other, tc.res); got != tc.want {
			t.Errorf("because(joined %v, %v): %q, want %q", tc.joined, tc.other, got, tc.want)
		}
	}
}
