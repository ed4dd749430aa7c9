package lock

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadRejects(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.lock.json")
	for _, body := range []string{`{"lockVersion": 9}`, `{"lockVersion":2,"bogus":1}`, `not json`,
		`{"lockVersion":2,"architectures":{"x86_64":{"packages":[{"nevra":"a-1-1.x86_64","sha256":"00","location":"a.rpm"}],"components":{"rootfs":["b-1-1.x86_64"]}}}}`} {
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := Read(p); err == nil {
			t.Errorf("%s: accepted", body)
		}
	}
}

// TestPlace: a lock written elsewhere than beside its spec records where
// the spec is from it, and its relative URLs are read from there whatever
// the spec given with it; a lock beside its spec, or one with no relative
// URL, records nothing, and one that records nothing (written before
// SpecDir) is read from the spec's directory, or without a spec from its
// own.
func TestPlace(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	rel := func() *Lock { return &Lock{Repositories: []Repository{{URL: "alt/x86_64"}}} }

	l := rel()
	if err := l.Place(filepath.Join(b, "x.lock.json"), a); err != nil || l.SpecDir != "../a" {
		t.Fatalf("written elsewhere: SpecDir %q, %v", l.SpecDir, err)
	}
	for _, spec := range []string{"", a, filepath.Join(root, "copy")} {
		if got := l.Locate("alt/x86_64", filepath.Join(b, "x.lock.json"), spec); got != filepath.Join(a, "alt/x86_64") {
			t.Errorf("with spec dir %q: %s", spec, got)
		}
	}
	if got := l.Locate("https://mirror/alt", filepath.Join(b, "x.lock.json"), ""); got != "https://mirror/alt" {
		t.Errorf("a remote URL: %s", got)
	}

	for name, place := range map[string]func(*Lock) error{
		"beside its spec": func(l *Lock) error { return l.Place(filepath.Join(a, "x.lock.json"), a) },
		"no relative URL": func(l *Lock) error {
			l.Repositories[0].URL = "/srv/alt/x86_64"
			return l.Place(filepath.Join(b, "x.lock.json"), a)
		},
	} {
		l := rel()
		if err := place(l); err != nil || l.SpecDir != "" {
			t.Errorf("%s: SpecDir %q, %v", name, l.SpecDir, err)
		}
	}
	// Written before SpecDir: the spec's directory; without a spec, the
	// lock's own.
	old := rel()
	if got := old.Base(filepath.Join(b, "x.lock.json"), a); got != a {
		t.Errorf("an old lock with its spec: %s", got)
	}
	if got := old.Base(filepath.Join(b, "x.lock.json"), ""); got != b {
		t.Errorf("an old lock alone: %s", got)
	}
}
