package subset

import (
	"context"
	"crypto"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"

	"github.com/nodeforge/builder/api/lock"
	"github.com/nodeforge/builder/api/specs"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/pkgbase/demobase"
	"github.com/nodeforge/builder/pkgbase/demobase/demotest"
	"github.com/nodeforge/builder/pkgbase/locker"
)

// perimeter is a perimeter's key, created before the demo base's dates.
func perimeter(t *testing.T) *openpgp.Entity {
	t.Helper()
	created := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := &packet.Config{Algorithm: packet.PubKeyAlgoEdDSA, DefaultHash: crypto.SHA256, Time: func() time.Time { return created }}
	e, err := openpgp.NewEntity("Perimeter", "test", "perimeter@nodeforge.invalid", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// demo is the demo base, locked: its spec, the lock and its bytes, and the
// options it was locked with (whose cache holds its packages).
func demo(t *testing.T) (*specs.Spec, *lock.Lock, []byte, locker.Options) {
	t.Helper()
	dir, l, lo := demotest.Locked(t)
	s, err := specs.Load(filepath.Join(dir, demobase.SpecFile))
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return s, l, b, lo
}

// pinned is each architecture's packages as NEVRA and sha256.
func pinned(l *lock.Lock) map[string][]string {
	out := map[string][]string{}
	for arch, a := range l.Architectures {
		for _, p := range a.Packages {
			out[arch] = append(out[arch], p.NEVRA+" "+p.SHA256)
		}
		slices.Sort(out[arch])
	}
	return out
}

// TestRelockInside: the locker, given only the subset (its repositories,
// the perimeter's key), pins the very packages of the release; the subset
// holds the spec and the lock as they were, and writing it twice gives
// the same bytes.
func TestRelockInside(t *testing.T) {
	s, l, lockBytes, lo := demo(t)
	signer := perimeter(t)
	dir := filepath.Join(t.TempDir(), "subset")
	files, err := Write(context.Background(), dir, Options{Spec: s, Lock: l, LockBytes: lockBytes, Cache: lo.Cache, Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, f := range files {
		kinds[f.Kind]++
	}
	for _, k := range []string{"rpm", "index", "spec", "lock", "key", "readme"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among %v", k, files)
		}
	}
	if !slices.IsSortedFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) }) {
		t.Errorf("files not in order: %v", files)
	}
	for name, want := range map[string][]byte{SpecFile: s.Raw, LockFile: lockBytes} {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != string(want) {
			t.Errorf("%s is not the release's (%v)", name, err)
		}
	}

	inside, err := specs.Load(filepath.Join(dir, SpecFile))
	if err != nil {
		t.Fatal(err)
	}
	// Inside, as the README's lock command says: the perimeter's key signs
	// the indexes and the packages keep their signatures, so each keyring
	// holds the perimeter's key and the base's (both in the subset), and
	// the perimeter's is pinned beside the spec's pins. The spec pins.
	if len(inside.Repositories[0].Fingerprints) == 0 {
		t.Fatal("the demo spec pins no key: the test would prove less")
	}
	urls, keyrings, pins := readmeLockFlags(t, dir)
	if err := inside.Override(urls, keyrings); err != nil {
		t.Fatal(err)
	}
	// Without the pin, the spec's pins refuse the perimeter's indexes.
	if _, err := locker.Create(context.Background(), inside, locker.Options{Cache: &cache.Cache{Dir: t.TempDir()}}); err == nil || !strings.Contains(err.Error(), "the spec pins") {
		t.Errorf("locking against the subset without the perimeter's pin: %v", err)
	}
	if err := inside.Pin(pins); err != nil {
		t.Fatal(err)
	}
	relocked, err := locker.Create(context.Background(), inside, locker.Options{Cache: &cache.Cache{Dir: t.TempDir()}})
	if err != nil {
		t.Fatalf("locking against the subset: %v", err)
	}
	if got, want := pinned(relocked), pinned(l); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("the subset locks to\n%v\nnot the release's\n%v", got, want)
	}

	again := filepath.Join(t.TempDir(), "subset")
	if _, err := Write(context.Background(), again, Options{Spec: s, Lock: l, LockBytes: lockBytes, Cache: lo.Cache, Signer: signer}); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		a, errA := os.ReadFile(filepath.Join(dir, f.Path))
		b, errB := os.ReadFile(filepath.Join(again, f.Path))
		if errA != nil || errB != nil || string(a) != string(b) {
			t.Errorf("%s differs between two writes of the same subset (%v, %v)", f.Path, errA, errB)
		}
	}
}

// TestRefusals: another spec than the lock's, no key, an encrypted key, a
// directory in use, and a package of a repository the spec lacks are each
// refused, saying which and why, before a package is fetched.
func TestRefusals(t *testing.T) {
	s, l, lockBytes, lo := demo(t)
	signer := perimeter(t)
	write := func(o Options, dir string) error {
		_, err := Write(context.Background(), dir, o)
		return err
	}
	ok := Options{Spec: s, Lock: l, LockBytes: lockBytes, Cache: lo.Cache, Signer: signer}

	other := *s
	other.Raw = append(slices.Clone(s.Raw), '\n')
	o := ok
	o.Spec = &other
	wantErr(t, write(o, t.TempDir()), "is not the spec of the lock")

	o = ok
	o.Signer = nil
	wantErr(t, write(o, t.TempDir()), "private key")

	enc := perimeter(t)
	if err := enc.EncryptPrivateKeys([]byte("pw"), nil); err != nil {
		t.Fatal(err)
	}
	o = ok
	o.Signer = enc
	wantErr(t, write(o, t.TempDir()), "encrypted")

	used := t.TempDir()
	if err := os.WriteFile(filepath.Join(used, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wantErr(t, write(ok, used), "is not empty")

	renamed := *s
	renamed.Repositories = slices.Clone(s.Repositories)
	renamed.Repositories[0].Name = "elsewhere"
	o = ok
	o.Spec = &renamed
	wantErr(t, write(o, t.TempDir()), `repository "`+s.Repositories[0].Name+`" is not in spec`)
}

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one saying %q", err, want)
	}
}

// readmeLockFlags reads the subset README's builder lock command: its
// --repo-url, --repo-keyring and --repo-fingerprint values, paths taken
// from the subset's root as the README says to run it.
func readmeLockFlags(t *testing.T, dir string) (map[string]string, map[string][]string, map[string][]string) {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(dir, ReadmeFile))
	if err != nil {
		t.Fatal(err)
	}
	_, cmd, ok := strings.Cut(string(text), "builder lock ")
	if !ok {
		t.Fatalf("the README has no lock command:\n%s", text)
	}
	cmd, _, _ = strings.Cut(cmd, "\n\n")
	urls, keyrings, pins := map[string]string{}, map[string][]string{}, map[string][]string{}
	fields := strings.Fields(strings.ReplaceAll(cmd, "\\\n", " "))
	for i := 0; i+1 < len(fields); i++ {
		name, val, _ := strings.Cut(fields[i+1], "=")
		switch fields[i] {
		case "--repo-url":
			urls[name] = filepath.Join(dir, val)
		case "--repo-keyring":
			keyrings[name] = append(keyrings[name], filepath.Join(dir, val))
		case "--repo-fingerprint":
			pins[name] = append(pins[name], val)
		}
	}
	if len(urls) == 0 || len(keyrings) == 0 || len(pins) == 0 {
		t.Fatalf("the README's lock command names no repository, keyring or pin:\n%s", cmd)
	}
	return urls, keyrings, pins
}
