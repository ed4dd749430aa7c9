package factory

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/empty"

	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/release"
)

// TestCatalogSpellings: a version tagged 1.0 and v1.0 (in one store, or
// two) is one release: listed once, found by either spelling, and the
// other tag is not opened again (a retry finds nothing left to serve).
func TestCatalogSpellings(t *testing.T) {
	ctx := context.Background()
	st, err := oci.CreateLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"1.0", "v1.0"} {
		// Not a release: opening it fails, which the test would see.
		if err := st.WriteImage(ctx, release.RepoLock, tag, empty.Image); err != nil {
			t.Fatal(err)
		}
	}
	cache, err := oci.CreateLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := newService(Options{Cache: cache, Releases: []ReleaseStore{{Store: st}, {Store: st}}})
	if err != nil {
		t.Fatal(err)
	}
	rel := &VerifiedRelease{Version: "v1.0"}
	s.ServeUnverified(rel, &VerifiedRelease{Version: "1.0"})
	if c := s.served(); len(c.versions) != 1 || len(s.Listed()) != 1 {
		t.Fatalf("serve of 1.0 and v1.0: %v", c.versions)
	}
	s.ServeUnverified(rel)
	c := s.served()
	c.failures = []failure{{store: 0, cause: errors.New("unreachable")}, {store: 1, cause: errors.New("unreachable")}}
	next := s.load(ctx, c)
	if !slices.Equal(next.versions, []string{"1.0"}) || len(next.failures) != 0 {
		t.Errorf("load: versions %v, failures %v", next.versions, next.failures)
	}
	for _, v := range []string{"1.0", "v1.0"} {
		if next.find(v) != rel {
			t.Errorf("find(%s): %v", v, next.find(v))
		}
	}
	if got := next.talosVersions(); !slices.Equal(got, []string{"v1.0"}) {
		t.Errorf("talosVersions: %v", got)
	}
}
