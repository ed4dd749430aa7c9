package rootfs

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/pkgbase/demobase"
)

// TestLayCache: a tree laid from the cache equals one laid from the RPMs,
// node for node and byte for byte; damaged or missing cache entries fall
// back to reading the package.
func TestLayCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	if err := demobase.Write(dir); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "alt", "*", "RPMS.classic", "*.rpm"))
	var rpms []string
	for _, f := range files {
		if b := filepath.Base(f); !strings.Contains(b, "6.12.30") && !strings.Contains(b, "396318") {
			rpms = append(rpms, f)
		}
	}
	origin := func(f string) report.Origin {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		return report.Origin{Package: filepath.Base(f), RPMSHA256: hex.EncodeToString(s[:])}
	}
	lay := func(c *LayCache) (*Tree, []*PackageResult) {
		t.Helper()
		tr := New()
		var rs []*PackageResult
		for _, f := range rpms {
			r, err := tr.AddRPMCached(f, origin(f), LayOptions{}, c)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			// nil and empty lists mean the same; gob keeps no difference.
			if len(r.Scripts) == 0 {
				r.Scripts = nil
			}
			if len(r.Triggers) == 0 {
				r.Triggers = nil
			}
			if len(r.Ghosts) == 0 {
				r.Ghosts = nil
			}
			rs = append(rs, r)
		}
		return tr, rs
	}
	want, wantRes := lay(nil)
	cacheDir := t.TempDir()
	c, err := OpenLayCache(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	same := func(what string) {
		t.Helper()
		got, gotRes := lay(c)
		if !reflect.DeepEqual(got.Nodes(), want.Nodes()) {
			t.Errorf("%s: the tree differs from one laid from the packages", what)
		}
		if !reflect.DeepEqual(gotRes, wantRes) {
			for i := range gotRes {
				if !reflect.DeepEqual(gotRes[i], wantRes[i]) {
					t.Errorf("%s: %s: package results differ:\n%#v\n%#v", what, rpms[i], gotRes[i], wantRes[i])
					break
				}
			}
		}
	}
	same("cold cache")
	c.Wait()
	same("warm cache")

	// Damage one entry and remove another: misses, not errors.
	c.Wait()
	var entries []string
	filepath.Walk(cacheDir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			entries = append(entries, p)
		}
		return nil
	})
	if len(entries) < 2 {
		t.Fatalf("%d entries stored", len(entries))
	}
	b, _ := os.ReadFile(entries[0])
	b[len(b)/2] ^= 0xff
	os.WriteFile(entries[0], b, 0o644)
	os.Remove(entries[1])
	same("damaged cache")
	c.Wait()
	same("repaired cache")

	// A size limit the cached package exceeds is still enforced.
	big := rpms[0]
	for _, f := range rpms {
		if fi, _ := os.Stat(f); fi.Size() > 10000 {
			big = f
		}
	}
	if _, err := New().AddRPMCached(big, origin(big), LayOptions{MaxInstallSize: 100}, c); err == nil || !strings.Contains(err.Error(), "more than the limit") {
		t.Errorf("limit through the cache: %v", err)
	}
}
