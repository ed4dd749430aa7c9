package builder

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/builder/compressors"
	"github.com/nodeforge/builder/internal/digest"
	"github.com/nodeforge/builder/pkgbase/cache"
)

// withoutCgo makes this builder's compressors those of a builder built
// without cgo for the test.
func withoutCgo(t *testing.T) []compressors.Implementation {
	t.Helper()
	list := compressors.This()
	list[0].Module = "github.com/klauspost/compress"
	old := thisCompressors
	thisCompressors = func() []compressors.Implementation { return list }
	t.Cleanup(func() { thisCompressors = old })
	return list
}

// tinyRelease is a spec and a lock nothing could be built from: what is
// refused must be refused before the build looks at them.
func tinyRelease() (*specs.Spec, *lock.Lock) {
	s := &specs.Spec{Name: "t", Version: "1", Raw: []byte("a spec")}
	s.Image.SquashfsWriter, s.Image.Compression = "go", "zstd"
	l := &lock.Lock{Spec: lock.SpecRef{Name: "t", Version: "1", SHA256: digest.SHA256Hex(s.Raw)},
		Architectures: map[string]*lock.Arch{"x86_64": {Packages: []lock.Package{{NEVRA: "missing-1-1.x86_64"}}}}}
	return s, l
}

// TestNonReferenceBuilderRefuses: a builder whose squashfs zstd is not
// libzstd builds nothing and runs no reproduction, with the one line of
// compressors.Refusal; it writes nothing, not even its output's parent.
func TestNonReferenceBuilderRefuses(t *testing.T) {
	if err := CheckBuilder(); err != nil {
		t.Fatalf("the test's builder (cgo) is refused: %v", err)
	}
	want := compressors.Refusal(withoutCgo(t))
	if want == nil || CheckBuilder() == nil || CheckBuilder().Error() != want.Error() {
		t.Fatalf("CheckBuilder: %v, want %v", CheckBuilder(), want)
	}
	s, l := tinyRelease()
	out := filepath.Join(t.TempDir(), "parent", "out")
	_, err := Build(context.Background(), Options{Spec: s, Lock: l, Out: out, Cache: &cache.Cache{Dir: t.TempDir()}})
	if err == nil || err.Error() != want.Error() {
		t.Errorf("Build: %v, want %v", err, want)
	}
	if _, err := os.Stat(filepath.Dir(out)); err == nil {
		t.Error("the refused build wrote beside its output")
	}
	root := t.TempDir()
	_, err = Reproduce(context.Background(), ReproOptions{Run: func(context.Context, ReproBuild) error { t.Error("a refused reproduction ran a build"); return nil }, Root: root, Variants: make([]ReproVariant, 2)})
	if err == nil || err.Error() != want.Error() {
		t.Errorf("Reproduce: %v, want %v", err, want)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("the refused reproduction wrote %d entries", len(ents))
	}
}

// TestReportNamesCompressors: the report records the compressors that
// write the artifacts, as the builder has them.
func TestReportNamesCompressors(t *testing.T) {
	s, l := tinyRelease()
	r, err := newRun(Options{Spec: s, Lock: l, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if want := compressors.Map(compressors.This()); !maps.Equal(r.rep.Compressors, want) || r.rep.Compressors["squashfs zstd"] == "" {
		t.Errorf("report compressors %v, want %v", r.rep.Compressors, want)
	}
	withoutCgo(t)
	if r, err = newRun(Options{Spec: s, Lock: l, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	if got := r.rep.Compressors["squashfs zstd"]; !strings.HasPrefix(got, "github.com/klauspost/compress@") {
		t.Errorf("the report names %q as the squashfs zstd", got)
	}
}

// TestCompareNamesImplementations: a difference between builds whose
// compressors differ says which.
func TestCompareNamesImplementations(t *testing.T) {
	a := &report.Report{Compressors: map[string]string{"squashfs zstd": "github.com/DataDog/zstd@v1.5.7", "layers gzip": "k@1"}, Tools: map[string]string{"iso": "xorriso 1.5.4"}}
	b := &report.Report{Compressors: map[string]string{"squashfs zstd": "github.com/klauspost/compress@v1.20.4", "layers gzip": "k@1"}, Tools: map[string]string{"iso": "xorriso 1.5.4"}}
	got := unlike(a, b)
	if got != "; written by other implementations: squashfs zstd github.com/DataDog/zstd@v1.5.7 vs github.com/klauspost/compress@v1.20.4" {
		t.Errorf("unlike: %q", got)
	}
	if unlike(a, a) != "" || unlike(a, nil) != "" {
		t.Error("alike builds named as unlike")
	}
}
