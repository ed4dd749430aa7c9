package locker

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/demobase"
)

func demo(t *testing.T) (string, *specs.Spec) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo")
	if err := demobase.Write(dir); err != nil {
		t.Fatal(err)
	}
	s, err := specs.Load(filepath.Join(dir, "spec.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, s
}

func create(t *testing.T, s *specs.Spec, cacheDir string) (*lock.Lock, error) {
	return Create(context.Background(), s, Options{Cache: &cache.Cache{Dir: cacheDir}})
}

func TestCreateDemoLock(t *testing.T) {
	dir, s := demo(t)
	l, err := create(t, s, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fp, err := demobase.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	a := l.Architectures["x86_64"]
	if a == nil || len(a.Packages) < 20 {
		t.Fatalf("lock: %+v", l)
	}
	for _, p := range a.Packages {
		if len(p.SHA256) != 64 || p.IndexDigest.Algorithm != "blake2b" || p.SignerFingerprint != fp || p.License == "" || p.Size <= 0 {
			t.Errorf("%s: incomplete pin %+v", p.NEVRA, p)
		}
	}
	for _, c := range []string{"kernel", "rootfs", "installer", "cri", "zfs", "btrfs", "nvidia"} {
		if len(a.Components[c]) == 0 {
			t.Errorf("component %s is empty", c)
		}
	}
	if l.SourceDateEpoch == 0 || len(l.Repositories) != 2 || len(l.Keyrings) != 1 {
		t.Errorf("lock header: epoch %d, %d repos, %d keyrings", l.SourceDateEpoch, len(l.Repositories), len(l.Keyrings))
	}
	// Same inputs, same bytes: another copy of the base elsewhere, a cold
	// cache and one download at a time.
	_, s2 := demo(t)
	l2, err := Create(context.Background(), s2, Options{Cache: &cache.Cache{Dir: t.TempDir(), Workers: 1}})
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := l.Marshal()
	b2, _ := l2.Marshal()
	if !bytes.Equal(b1, b2) {
		t.Fatal("two locks of the same base differ")
	}
	// Round trip through a file.
	p := filepath.Join(dir, "demo.lock.json")
	if _, err := Write(p, l, dir); err != nil {
		t.Fatal(err)
	}
	back, err := lock.Read(p)
	if err != nil {
		t.Fatal(err)
	}
	b3, _ := back.Marshal()
	if !bytes.Equal(b1, b3) {
		t.Error("lock changes through a write and read")
	}
}

// cacheFiles lists the verified files in a cache.
func cacheFiles(t *testing.T, dir string) []string {
	var out []string
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && !strings.Contains(p, "partial") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestCreateRefusesTampering(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, dir string)
		want   string
	}{
		{"bad release signature", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "alt", "x86_64", "base", "release")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte("Components:"), []byte("Components: extra"), 1), 0o644)
		}, "does not verify"},
		{"index hash differs", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "alt", "x86_64", "base", "pkglist.classic.xz")
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0x40
			os.WriteFile(p, b, 0o644)
		}, "differs from the release"},
		{"index size differs", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "alt", "x86_64", "base", "pkglist.classic.xz")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b, 0), 0o644)
		}, "size differs from the release"},
		{"package hash differs", func(t *testing.T, dir string) {
			files, _ := filepath.Glob(filepath.Join(dir, "alt", "x86_64", "RPMS.classic", "containerd-*.rpm"))
			b, _ := os.ReadFile(files[0])
			b[len(b)-20] ^= 1
			os.WriteFile(files[0], b, 0o644)
		}, "containerd"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, s := demo(t)
			c.tamper(t, dir)
			cacheDir := t.TempDir()
			_, err := create(t, s, cacheDir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want an error containing %q, got %v", c.want, err)
			}
			for _, f := range cacheFiles(t, cacheDir) {
				if c.name != "package hash differs" {
					t.Errorf("cache has %s after a refused repository", f)
				}
			}
			if c.name == "package hash differs" {
				if !strings.Contains(err.Error(), "differs from the index") {
					t.Errorf("want the index mismatch named: %v", err)
				}
				for _, f := range cacheFiles(t, cacheDir) {
					b, _ := os.ReadFile(f)
					if bytes.Contains(b, []byte("containerd-1")) && bytes.Contains(b, []byte("config.toml")) {
						t.Errorf("tampered containerd entered the cache: %s", f)
					}
				}
			}
		})
	}
}
