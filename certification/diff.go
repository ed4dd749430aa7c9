package certification

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/pkgbase/rpmfile"
	"github.com/nodeforge/builder/release"
)

// Side is one end of a comparison: a lock alone, a build (its report, and
// its lock when known) or a published release (both, verified).
type Side struct {
	Ref    string
	Lock   *lock.Lock     // nil: packages come from the report
	Report *report.Report // nil: a lock alone (no artifacts to compare)
}

// Diff is what changed from one side to the other.
type Diff struct {
	Old      string           `json:"old"`
	New      string           `json:"new"`
	Identity []IdentityChange `json:"identity"` // name, version, branch
	Added    []PackageRef     `json:"added"`
	Removed  []PackageRef     `json:"removed"`
	Updated  []PackageChange  `json:"updated"`
	// Components are the packages that joined or left each component,
	// also those the release keeps through another component.
	Components []ComponentChange `json:"components"`
	Fixes      []Fix             `json:"fixes"`
	Artifacts  []ArtifactChange  `json:"artifacts"`
	Kernel     []KernelChange    `json:"kernel"`
	Extensions []ExtensionChange `json:"extensions"`
	// Images are the container images (the spec's images section) added,
	// removed, or changed in their packages or files.
	Images []ImageChange `json:"images"`
}

// PackageRef is a package added or removed.
type PackageRef struct {
	NEVRA     string `json:"nevra"`
	Name      string `json:"name"`
	Arch      string `json:"arch"`
	EVR       string `json:"evr"`
	SourceRPM string `json:"sourceRpm,omitempty"`
}

// PackageChange is a package whose version (or build) changed, with the
// changelog entries of the new one that the old one does not have.
type PackageChange struct {
	Name          string           `json:"name"`
	Arch          string           `json:"arch"`
	From          string           `json:"from"`
	To            string           `json:"to"`
	FromSourceRPM string           `json:"fromSourceRpm,omitempty"`
	ToSourceRPM   string           `json:"toSourceRpm,omitempty"`
	Changelog     []rpmfile.Change `json:"changelog"`
	Fixes         []string         `json:"fixes"`                   // CVE identifiers its new entries name
	ChangelogNote string           `json:"changelogNote,omitempty"` // why there is no changelog
	// SizeDelta is, per artifact, the bytes of its files from the new
	// package minus those from the old.
	SizeDelta map[string]int64 `json:"sizeDelta,omitempty"`
	old, new  *lock.Package
}

// Fix is a CVE identifier and the updates whose changelog names it.
type Fix struct {
	ID       string   `json:"id"`
	Packages []string `json:"packages"`
}

// ArtifactChange is one artifact of the release, compared.
type ArtifactChange struct {
	Name         string   `json:"name"` // "<arch>/<file>"
	Change       string   `json:"change"`
	OldSHA256    string   `json:"oldSha256,omitempty"`
	NewSHA256    string   `json:"newSha256,omitempty"`
	OldSize      int64    `json:"oldSize"`
	NewSize      int64    `json:"newSize"`
	SizeDelta    int64    `json:"sizeDelta"`
	FilesAdded   []string `json:"filesAdded"`
	FilesRemoved []string `json:"filesRemoved"`
	FilesChanged []string `json:"filesChanged"`
}

// KernelChange compares the kernel of one architecture.
type KernelChange struct {
	Arch           string   `json:"arch"`
	OldVersion     string   `json:"oldVersion"`
	NewVersion     string   `json:"newVersion"`
	OldCmdline     string   `json:"oldCmdline"`
	NewCmdline     string   `json:"newCmdline"`
	ArgsAdded      []string `json:"argsAdded"`
	ArgsRemoved    []string `json:"argsRemoved"`
	ModulesAdded   []string `json:"modulesAdded"`
	ModulesRemoved []string `json:"modulesRemoved"`
}

// ExtensionChange is an extension of an architecture added, removed, or
// changed in what it holds (its packages or files).
type ExtensionChange struct {
	Name            string   `json:"name"`
	Arch            string   `json:"arch"`
	Change          string   `json:"change"` // added, removed, changed
	OldDigest       string   `json:"oldDigest,omitempty"`
	NewDigest       string   `json:"newDigest,omitempty"`
	PackagesAdded   []string `json:"packagesAdded"`
	PackagesRemoved []string `json:"packagesRemoved"`
}

// ImageChange is a container image of an architecture added, removed, or
// changed in what it holds, as an extension is.
type ImageChange = ExtensionChange

// ChangelogFunc reads the changelog of a package of a side (its header, from
// the package cache or the repository the lock names).
type ChangelogFunc func(ctx context.Context, side *Side, p *lock.Package) ([]rpmfile.Change, error)

// Compare lists what changed from old to new. Changelogs are read with
// changelog, and the packages that joined or left a component explained
// with why, when each is not nil.
func Compare(ctx context.Context, old, new *Side, changelog ChangelogFunc, why WhyFunc) *Diff {
	d := &Diff{Old: old.Ref, New: new.Ref, Identity: []IdentityChange{}, Added: []PackageRef{}, Removed: []PackageRef{}, Updated: []PackageChange{},
		Components: []ComponentChange{}, Fixes: []Fix{}, Artifacts: []ArtifactChange{}, Kernel: []KernelChange{}, Extensions: []ExtensionChange{}, Images: []ImageChange{}}
	compareIdentity(d, old, new)
	comparePackages(ctx, d, old, new, changelog)
	compareComponents(ctx, d, old, new, why)
	if old.Report != nil && new.Report != nil {
		compareArtifacts(d, old.Report, new.Report)
		compareKernels(d, old.Report, new.Report)
		compareExtensions(d, old.Report, new.Report)
		compareImages(d, old.Report, new.Report)
		packageSizes(d, old.Report, new.Report)
	}
	return d
}

// pkgKey is a package's slot: its name and architecture.
type pkgKey struct{ name, arch string }

// sidePackages are a side's packages by slot (several for a multi-version
// name): from its lock, or else from its build report's NEVRAs.
func sidePackages(s *Side) map[pkgKey][]*lock.Package {
	out := map[pkgKey][]*lock.Package{}
	seen := map[string]bool{}
	add := func(p *lock.Package) {
		if seen[p.NEVRA] {
			return
		}
		seen[p.NEVRA] = true
		k := pkgKey{p.Name, p.Arch}
		out[k] = append(out[k], p)
	}
	if s.Lock != nil {
		for _, arch := range slices.Sorted(maps.Keys(s.Lock.Architectures)) {
			for i := range s.Lock.Architectures[arch].Packages {
				add(&s.Lock.Architectures[arch].Packages[i])
			}
		}
		return out
	}
	if s.Report == nil {
		return out
	}
	rpmOf := map[string]string{}
	for _, f := range reportFiles(s.Report) {
		if f.Package != "" {
			rpmOf[f.Package] = f.rpmSHA256
		}
	}
	for _, arch := range slices.Sorted(maps.Keys(s.Report.Architectures)) {
		a := s.Report.Architectures[arch]
		names := slices.Clone(a.Packages)
		for _, e := range a.Extensions {
			names = append(names, e.Packages...)
		}
		for _, im := range a.Images {
			names = append(names, im.Packages...)
		}
		slices.Sort(names)
		for _, n := range names {
			if p, ok := parseNEVRA(n); ok {
				p.SHA256 = rpmOf[n]
				add(p)
			}
		}
	}
	return out
}

// parseNEVRA splits name-[epoch:]version-release.arch.
func parseNEVRA(s string) (*lock.Package, bool) {
	dot := strings.LastIndexByte(s, '.')
	if dot < 0 {
		return nil, false
	}
	nvr, arch := s[:dot], s[dot+1:]
	r := strings.LastIndexByte(nvr, '-')
	if r < 0 {
		return nil, false
	}
	v := strings.LastIndexByte(nvr[:r], '-')
	if v < 0 {
		return nil, false
	}
	p := &lock.Package{Name: nvr[:v], Version: nvr[v+1 : r], Release: nvr[r+1:], Arch: arch, NEVRA: s}
	if e, ver, ok := strings.Cut(p.Version, ":"); ok {
		n := 0
		if _, err := fmt.Sscanf(e, "%d", &n); err == nil {
			p.Epoch, p.Version = &n, ver
		}
	}
	return p, true
}

// evrLabel is [epoch:]version-release.
func evrLabel(p *lock.Package) string {
	v := p.Version + "-" + p.Release
	if p.Epoch != nil {
		v = fmt.Sprintf("%d:%s", *p.Epoch, v)
	}
	return v
}

func ref(p *lock.Package) PackageRef {
	return PackageRef{NEVRA: p.NEVRA, Name: p.Name, Arch: p.Arch, EVR: evrLabel(p), SourceRPM: p.SourceRPM}
}

// cveID finds CVE identifiers in changelog text.
var cveID = regexp.MustCompile(`(?i)\bCVE-\d{4}-\d{4,}\b`)

func comparePackages(ctx context.Context, d *Diff, old, new *Side, changelog ChangelogFunc) {
	a, b := sidePackages(old), sidePackages(new)
	fixes := map[string][]string{}
	keys := slices.SortedFunc(func(yield func(pkgKey) bool) {
		for k := range a {
			if !yield(k) {
				return
			}
		}
		for k := range b {
			if _, ok := a[k]; !ok && !yield(k) {
				return
			}
		}
	}, func(x, y pkgKey) int { return cmp.Or(strings.Compare(x.name, y.name), strings.Compare(x.arch, y.arch)) })
	for _, k := range keys {
		was, is := a[k], b[k]
		if len(was) == 1 && len(is) == 1 {
			if was[0].NEVRA != is[0].NEVRA || (was[0].SHA256 != is[0].SHA256 && was[0].SHA256 != "" && is[0].SHA256 != "") {
				c := update(ctx, new, was[0], is[0], changelog)
				for _, id := range c.Fixes {
					fixes[id] = append(fixes[id], c.Name+" "+c.To)
				}
				d.Updated = append(d.Updated, c)
			}
			continue
		}
		// Multi-version slots (kernels): compared as sets of NEVRAs.
		for _, p := range was {
			if !slices.ContainsFunc(is, func(q *lock.Package) bool { return q.NEVRA == p.NEVRA }) {
				d.Removed = append(d.Removed, ref(p))
			}
		}
		for _, p := range is {
			if !slices.ContainsFunc(was, func(q *lock.Package) bool { return q.NEVRA == p.NEVRA }) {
				d.Added = append(d.Added, ref(p))
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(fixes)) {
		d.Fixes = append(d.Fixes, Fix{ID: id, Packages: slices.Compact(slices.Sorted(slices.Values(fixes[id])))})
	}
}

// update describes one updated package, with the changelog entries of the
// new package after the old version.
func update(ctx context.Context, new *Side, was, is *lock.Package, changelog ChangelogFunc) PackageChange {
	c := PackageChange{Name: is.Name, Arch: is.Arch, From: evrLabel(was), To: evrLabel(is),
		FromSourceRPM: was.SourceRPM, ToSourceRPM: is.SourceRPM, Changelog: []rpmfile.Change{}, Fixes: []string{}, old: was, new: is}
	if changelog == nil {
		c.ChangelogNote = "changelogs not read"
		return c
	}
	log, err := changelog(ctx, new, is)
	if err != nil {
		c.ChangelogNote = "changelog not available: " + err.Error()
		return c
	}
	c.Changelog = rpmfile.ChangesSince(log, was.Version, was.Release, was.BuildTime)
	seen := map[string]bool{}
	for _, e := range c.Changelog {
		for _, id := range cveID.FindAllString(e.Text, -1) {
			id = strings.ToUpper(id)
			if !seen[id] {
				seen[id] = true
				c.Fixes = append(c.Fixes, id)
			}
		}
	}
	slices.Sort(c.Fixes)
	return c
}

// releaseArtifacts are a report's artifacts by name ("<arch>/<file>",
// "<arch>/extensions/<name>" for an extension's tree and
// "<arch>/images/<name>" for a container image's), each with its
// digest, size and files (those the report lists for it).
func releaseArtifacts(rep *report.Report) map[string]*artifactView {
	out := map[string]*artifactView{}
	for n, a := range rep.Artifacts {
		out[n] = &artifactView{sha256: a.SHA256, size: a.Size}
	}
	for _, f := range reportFiles(rep) {
		n := groupArtifact(f.Artifact)
		v := out[n]
		if v == nil {
			v = &artifactView{}
			out[n] = v
		}
		if v.files == nil {
			v.files = map[string]File{}
		}
		v.files[f.Path] = f
		if ext, ok := strings.CutPrefix(f.Artifact, "extension/"); ok {
			name, _, _ := strings.Cut(ext, "/")
			v.sha256 = rep.Extensions[name]
			v.size += f.Size
		}
		if im, ok := strings.CutPrefix(f.Artifact, "image/"); ok {
			name, _, _ := strings.Cut(im, "/")
			v.sha256 = rep.Images[name]
			v.size += f.Size
		}
	}
	return out
}

type artifactView struct {
	sha256 string
	size   int64
	files  map[string]File
}

// groupArtifact names the artifact that holds a file list of the report.
func groupArtifact(group string) string {
	kind, rest, _ := strings.Cut(group, "/")
	switch kind {
	case "rootfs":
		return rest + "/rootfs.sqsh"
	case "initramfs":
		return rest + "/initramfs.xz"
	case "extension":
		name, arch, _ := strings.Cut(rest, "/")
		return arch + "/extensions/" + name
	case "image":
		name, arch, _ := strings.Cut(rest, "/")
		return arch + "/images/" + name
	}
	return group
}

func compareArtifacts(d *Diff, old, new *report.Report) {
	fa, fb := releaseArtifacts(old), releaseArtifacts(new)
	names := slices.Sorted(maps.Keys(fa))
	for n := range fb {
		if fa[n] == nil {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		was, is := fa[n], fb[n]
		c := ArtifactChange{Name: n, FilesAdded: []string{}, FilesRemoved: []string{}, FilesChanged: []string{}}
		switch {
		case was == nil:
			c.Change, was = "added", &artifactView{}
		case is == nil:
			c.Change, is = "removed", &artifactView{}
		}
		c.OldSHA256, c.NewSHA256, c.OldSize, c.NewSize, c.SizeDelta = was.sha256, is.sha256, was.size, is.size, is.size-was.size
		for p, f := range is.files {
			g, ok := was.files[p]
			switch {
			case !ok:
				c.FilesAdded = append(c.FilesAdded, p)
			case g.SHA256 != f.SHA256 || g.Type != f.Type || g.Size != f.Size:
				c.FilesChanged = append(c.FilesChanged, p)
			}
		}
		for p := range was.files {
			if _, ok := is.files[p]; !ok {
				c.FilesRemoved = append(c.FilesRemoved, p)
			}
		}
		slices.Sort(c.FilesAdded)
		slices.Sort(c.FilesRemoved)
		slices.Sort(c.FilesChanged)
		if c.Change == "" {
			if was.sha256 == is.sha256 && len(c.FilesAdded)+len(c.FilesRemoved)+len(c.FilesChanged) == 0 {
				continue // the same bytes
			}
			c.Change = "changed"
		}
		d.Artifacts = append(d.Artifacts, c)
	}
}

// modules lists the kernel modules a root filesystem holds, by their path
// under the modules directory.
func modules(a *report.ArchReport) []string {
	var out []string
	for _, f := range a.Rootfs {
		rest, ok := strings.CutPrefix(f.Path, "/lib/modules/")
		if !ok {
			rest, ok = strings.CutPrefix(f.Path, "/usr/lib/modules/")
		}
		_, mod, _ := strings.Cut(rest, "/")
		if ok && f.Type == "file" && isModule(mod) {
			out = append(out, mod)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func isModule(p string) bool {
	for _, ext := range []string{".ko", ".ko.xz", ".ko.zst", ".ko.gz"} {
		if strings.HasSuffix(p, ext) {
			return true
		}
	}
	return false
}

// setDiff lists what b has that a has not, and what a has that b has not.
func setDiff(a, b []string) (added, removed []string) {
	added, removed = []string{}, []string{}
	for _, x := range b {
		if !slices.Contains(a, x) {
			added = append(added, x)
		}
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			removed = append(removed, x)
		}
	}
	return added, removed
}

func compareKernels(d *Diff, old, new *report.Report) {
	for _, arch := range slices.Sorted(maps.Keys(new.Architectures)) {
		a, b := old.Architectures[arch], new.Architectures[arch]
		if a == nil || b == nil {
			continue
		}
		c := KernelChange{Arch: arch, OldCmdline: a.Cmdline, NewCmdline: b.Cmdline}
		if a.Kernel != nil {
			c.OldVersion = a.Kernel.Version
		}
		if b.Kernel != nil {
			c.NewVersion = b.Kernel.Version
		}
		c.ArgsAdded, c.ArgsRemoved = setDiff(strings.Fields(a.Cmdline), strings.Fields(b.Cmdline))
		c.ModulesAdded, c.ModulesRemoved = setDiff(modules(a), modules(b))
		if c.OldVersion != c.NewVersion || len(c.ArgsAdded)+len(c.ArgsRemoved)+len(c.ModulesAdded)+len(c.ModulesRemoved) > 0 {
			d.Kernel = append(d.Kernel, c)
		}
	}
}

// held is what an extension or a container image of an architecture
// holds: its packages and files.
type held struct {
	packages []string
	files    []report.FileEntry
}

// heldKind reads one kind of held thing (extensions, container images)
// from a build report: the index digest of each, and what each holds per
// architecture.
type heldKind struct {
	digests func(*report.Report) map[string]string
	of      func(*report.ArchReport) map[string]held
}

var extensionKind = heldKind{
	digests: func(r *report.Report) map[string]string { return r.Extensions },
	of: func(a *report.ArchReport) map[string]held {
		return heldMap(a.Extensions, func(e *report.ExtensionReport) held { return held{e.Packages, e.Files} })
	},
}

var imageKind = heldKind{
	digests: func(r *report.Report) map[string]string { return r.Images },
	of: func(a *report.ArchReport) map[string]held {
		return heldMap(a.Images, func(im *report.ImageReport) held { return held{im.Packages, im.Files} })
	},
}

// heldMap is what each of m holds.
func heldMap[T any](m map[string]T, of func(T) held) map[string]held {
	out := map[string]held{}
	for n, x := range m {
		out[n] = of(x)
	}
	return out
}

func compareExtensions(d *Diff, old, new *report.Report) {
	d.Extensions = append(d.Extensions, compareHeld(old, new, extensionKind)...)
}

// compareImages lists the container images added, removed, or changed in
// their packages or files, per architecture.
func compareImages(d *Diff, old, new *report.Report) {
	d.Images = append(d.Images, compareHeld(old, new, imageKind)...)
}

// compareHeld compares one kind of held thing of two reports.
func compareHeld(old, new *report.Report, k heldKind) []ExtensionChange {
	var out []ExtensionChange
	for _, arch := range slices.Sorted(maps.Keys(new.Architectures)) {
		a, b := old.Architectures[arch], new.Architectures[arch]
		if a == nil {
			a = &report.ArchReport{}
		}
		ha, hb := k.of(a), k.of(b)
		for _, n := range unionKeys(ha, hb) {
			was, okA := ha[n]
			is, okB := hb[n]
			c := ExtensionChange{Name: n, Arch: arch, OldDigest: k.digests(old)[n], NewDigest: k.digests(new)[n]}
			switch {
			case !okA:
				c.Change = "added"
			case !okB:
				c.Change = "removed"
			}
			c.PackagesAdded, c.PackagesRemoved = setDiff(was.packages, is.packages)
			if c.Change == "" {
				if len(c.PackagesAdded)+len(c.PackagesRemoved) == 0 && sameFiles(was.files, is.files) {
					continue // what it holds is the same
				}
				c.Change = "changed"
			}
			out = append(out, c)
		}
	}
	return out
}

// sameFiles says whether two file lists hold the same paths and contents.
func sameFiles(a, b []report.FileEntry) bool {
	return slices.EqualFunc(a, b, func(x, y report.FileEntry) bool {
		return x.Path == y.Path && x.Type == y.Type && x.SHA256 == y.SHA256 && x.Mode == y.Mode && x.Target == y.Target
	})
}

// packageSizes fills each update's size delta per artifact from the
// reports' files.
func packageSizes(d *Diff, old, new *report.Report) {
	sum := func(rep *report.Report) map[string]map[string]int64 { // NEVRA -> artifact -> bytes
		out := map[string]map[string]int64{}
		for _, f := range reportFiles(rep) {
			if f.Package == "" {
				continue
			}
			if out[f.Package] == nil {
				out[f.Package] = map[string]int64{}
			}
			out[f.Package][f.Artifact] += f.Size
		}
		return out
	}
	a, b := sum(old), sum(new)
	for i := range d.Updated {
		c := &d.Updated[i]
		delta := map[string]int64{}
		for art, n := range b[c.new.NEVRA] {
			delta[art] += n
		}
		for art, n := range a[c.old.NEVRA] {
			delta[art] -= n
		}
		for art, n := range delta {
			if n == 0 {
				delete(delta, art)
			}
		}
		if len(delta) > 0 {
			c.SizeDelta = delta
		}
	}
}

// ReleaseSide reads a published release as a side of a comparison: its
// lock and build report, each from a verified image or attestation. A
// release that fails verification is refused with every reason.
func ReleaseSide(ctx context.Context, st oci.Reader, version string, keys []signing.Verifier) (*Side, error) {
	var problems []string
	rel, err := readRelease(ctx, st, version, keys, nil, nil, func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) })
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s %s does not verify:\n  %s", st.Ref(release.RepoLock, version), version, strings.Join(problems, "\n  "))
	}
	return &Side{Ref: st.Ref(release.RepoLock, version), Lock: rel.lock, Report: rel.report}, nil
}
