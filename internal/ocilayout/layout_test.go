package ocilayout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodeforge/builder/internal/atomicfile"
)

func testImage(t *testing.T, content string) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, static.NewLayer([]byte(content), types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	return mutate.MediaType(mutate.ConfigMediaType(img, types.OCIConfigJSON), types.OCIManifestSchema1)
}

func descOf(t *testing.T, img v1.Image, tag string) v1.Descriptor {
	t.Helper()
	d, err := partial.Descriptor(img)
	if err != nil {
		t.Fatal(err)
	}
	d.Annotations = map[string]string{"org.opencontainers.image.ref.name": tag}
	return *d
}

func byTag(tag string) func(v1.Descriptor) bool {
	return func(d v1.Descriptor) bool { return d.Annotations["org.opencontainers.image.ref.name"] == tag }
}

func TestCreateAndOpenRefuse(t *testing.T) {
	base := t.TempDir()
	// Open never creates.
	missing := filepath.Join(base, "typo")
	if _, err := Open(missing); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open(missing) = %v, want a not-exist error", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("Open created the directory")
	}
	// Create refuses a file and a directory of other things, touching nothing.
	file := filepath.Join(base, "file")
	os.WriteFile(file, []byte("mine"), 0o600)
	if _, err := Create(file); err == nil || !strings.Contains(err.Error(), "is a file") {
		t.Errorf("Create(file) = %v", err)
	}
	foreign := filepath.Join(base, "foreign")
	os.MkdirAll(filepath.Join(foreign, "photos"), 0o755)
	os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o600)
	_, err := Create(foreign)
	if err == nil || !strings.Contains(err.Error(), `"notes.txt"`) || !strings.Contains(err.Error(), `"photos/"`) {
		t.Errorf("Create(foreign) = %v, want it to name what is there", err)
	}
	if ents, _ := os.ReadDir(foreign); len(ents) != 2 {
		t.Errorf("Create changed a foreign directory: %d entries", len(ents))
	}
	// A missing and an empty directory become layouts; a layout is reopened.
	for _, p := range []string{missing, t.TempDir()} {
		if _, err := Create(p); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(p); err != nil {
			t.Fatal(err)
		}
		if _, err := Create(p); err != nil {
			t.Fatal(err)
		}
	}
	// Garbage index.json: the message names the file.
	os.WriteFile(filepath.Join(missing, IndexFile), []byte("{garbage"), 0o644)
	_, err = Open(missing)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(missing, IndexFile)) {
		t.Errorf("Open(garbage index) = %v, want the path named", err)
	}
}

func TestModesWhateverTheUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	d, err := Create(filepath.Join(t.TempDir(), "l"))
	if err != nil {
		t.Fatal(err)
	}
	img := testImage(t, "hello")
	if _, err := d.WriteImage(context.Background(), img); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(context.Background(), descOf(t, img, "a"), byTag("a")); err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(d.Path(), func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := e.Info()
		if want := fs.FileMode(0o644); e.Type().IsRegular() && fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		return nil
	})
}

func TestReadsAreChecked(t *testing.T) {
	d, err := Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	img := testImage(t, strings.Repeat("layer content ", 100))
	if _, err := d.WriteImage(context.Background(), img); err != nil {
		t.Fatal(err)
	}
	desc := descOf(t, img, "a")
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	size, _ := layers[0].Size()
	cfg, _ := img.ConfigName()

	read := func() error {
		got, err := d.Image(desc)
		if err != nil {
			return err
		}
		if _, err := got.RawConfigFile(); err != nil {
			return err
		}
		l, err := got.LayerByDigest(ld)
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(io.Discard, rc)
		return err
	}
	if err := read(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		h    v1.Hash
		how  func(p string)
		want string
	}{
		{"flipped layer", ld, flip, "damaged or tampered"},
		{"truncated layer", ld, func(p string) { os.Truncate(p, size-1) }, "truncated"},
		{"deleted layer", ld, func(p string) { os.Remove(p) }, "missing"},
		{"flipped config", cfg, flip, "damaged or tampered"},
		{"flipped manifest", desc.Digest, flip, "damaged or tampered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := d.BlobPath(tc.h)
			orig, _ := os.ReadFile(p)
			defer os.WriteFile(p, orig, 0o644)
			tc.how(p)
			err := read()
			if err == nil || !strings.Contains(err.Error(), tc.h.String()) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("read = %v, want an error naming %s and %q", err, tc.h, tc.want)
			}
			// A rewrite repairs a damaged or missing blob.
			w, err := d.WriteImage(context.Background(), img)
			if err != nil {
				t.Fatal(err)
			}
			if w.Blobs+w.Manifests != 1 {
				t.Errorf("rewrite stored %+v, want the one bad blob", w)
			}
			if err := read(); err != nil {
				t.Fatalf("after rewrite: %v", err)
			}
		})
	}
}

func flip(p string) {
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 1
	os.WriteFile(p, b, 0o644)
}

// A source whose bytes do not match the digest leaves nothing behind.
func TestWriteBlobRefusesWrongContent(t *testing.T) {
	d, err := Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	_, err = d.WriteBlobBytes(h, []byte("not that"))
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("WriteBlobBytes = %v, want ErrDamaged", err)
	}
	ents, _ := os.ReadDir(filepath.Join(d.Path(), "blobs", "sha256"))
	if len(ents) != 0 {
		t.Errorf("%d files left in blobs/sha256", len(ents))
	}
}

// Writers in parallel (each with its own lock, as separate processes
// would have) never lose an index entry.
func TestConcurrentPuts(t *testing.T) {
	dir := t.TempDir()
	if _, err := Create(dir); err != nil {
		t.Fatal(err)
	}
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := Create(dir) // sweeping while the others write
			if err != nil {
				errs <- err
				return
			}
			img := testImage(t, fmt.Sprint("image ", i))
			if _, err := d.WriteImage(context.Background(), img); err != nil {
				errs <- err
				return
			}
			tag := fmt.Sprint("v", i)
			errs <- d.Put(context.Background(), descOf(t, img, tag), byTag(tag))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	d, _ := Open(dir)
	m, err := d.Index()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != n {
		t.Fatalf("index.json has %d entries, want %d", len(m.Manifests), n)
	}
}

// Opening a layout for writing sweeps what killed writers left, never
// the temporary file of a writer still at work.
func TestCreateSweepsLeftovers(t *testing.T) {
	dir := t.TempDir()
	if _, err := Create(dir); err != nil {
		t.Fatal(err)
	}
	blobs := filepath.Join(dir, "blobs", "sha256")
	dead := filepath.Join(blobs, ".tmp-abc-123")
	os.WriteFile(dead, []byte("partial"), 0o600)
	live, err := atomicfile.CreateTemp(blobs, "def")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if _, err := Create(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !errors.Is(err, fs.ErrNotExist) {
		t.Error("a dead writer's leftover was not swept")
	}
	if _, err := os.Stat(live.Name()); err != nil {
		t.Errorf("a live writer's temporary file was swept: %v", err)
	}
}

// hashedFileLayer is a layer written to a file and hashed as it was, as
// a build's boot assets and installer layer are.
type hashedFileLayer struct {
	v1.Layer
	file string
}

func (l hashedFileLayer) HashedFile() string { return l.file }

// A layer hashed as it was written to a file is stored without a second
// hash, and as a hard link to the file when that file has a blob's mode
// (else a copy); the blob is the same either way.
func TestFileBlobsAreLinked(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o600} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			data := []byte("a boot asset")
			file := filepath.Join(dir, "asset")
			if err := os.WriteFile(file, data, mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(file, mode); err != nil {
				t.Fatal(err)
			}
			l := hashedFileLayer{Layer: static.NewLayer(data, types.OCILayer), file: file}
			img, err := mutate.AppendLayers(empty.Image, l)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Create(filepath.Join(dir, "layout"))
			if err != nil {
				t.Fatal(err)
			}
			w, err := d.WriteImage(context.Background(), img)
			if err != nil {
				t.Fatal(err)
			}
			if w.Blobs != 2 {
				t.Errorf("wrote %d blobs, want the layer and the config", w.Blobs)
			}
			h, _ := l.Digest()
			if err := d.Check(h, int64(len(data))); err != nil {
				t.Fatal(err)
			}
			bi, err := os.Stat(d.BlobPath(h))
			if err != nil {
				t.Fatal(err)
			}
			fi, _ := os.Stat(file)
			if linked := os.SameFile(bi, fi); linked != (mode == 0o644) {
				t.Errorf("blob linked to the file: %v, want %v", linked, mode == 0o644)
			}
			if bi.Mode().Perm() != 0o644 {
				t.Errorf("blob mode %v", bi.Mode().Perm())
			}
			// Written again: the blob is there, whole, and stays.
			if w, err := d.WriteImage(context.Background(), img); err != nil || w.Blobs != 0 {
				t.Errorf("written again: %d blobs, %v", w.Blobs, err)
			}
		})
	}
}

// Bytes that do not have the size their descriptor says are refused.
func TestHashedBlobOfTheWrongSize(t *testing.T) {
	d, err := Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	if _, err := d.writeHashed(h, 3, []byte("four")); !errors.Is(err, ErrDamaged) {
		t.Fatalf("writeHashed = %v, want ErrDamaged", err)
	}
}

// TestForeign: what a layout holds beside what its index.json leads to is
// named; a layout WriteRoot wrote, a missing and an empty directory hold
// nothing foreign; a directory of other things is no layout.
func TestForeign(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: testImage(t, "a")}, mutate.IndexAddendum{Add: testImage(t, "b")})
	for _, name := range []string{"clean", "mine", "stray-blob", "top"} {
		if err := WriteRoot(ctx, filepath.Join(base, name), idx); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(base, "mine", "mine"), 0o755)
	os.WriteFile(filepath.Join(base, "mine", "mine", "x"), []byte("x"), 0o644)
	stray := strings.Repeat("a", 64)
	os.WriteFile(filepath.Join(base, "stray-blob", "blobs", "sha256", stray), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(base, "top", "notes"), []byte("x"), 0o644)
	os.MkdirAll(filepath.Join(base, "empty"), 0o755)
	os.MkdirAll(filepath.Join(base, "other"), 0o755)
	os.WriteFile(filepath.Join(base, "other", "notes"), []byte("x"), 0o644)

	for dir, want := range map[string]string{
		"clean": "", "missing": "", "empty": "",
		"mine": "mine/", "stray-blob": "blobs/sha256/" + stray, "top": "notes",
	} {
		got, err := Foreign(ctx, filepath.Join(base, dir))
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("%s: %q, %v; want %q", dir, got, err, want)
		}
	}
	if _, err := Foreign(ctx, filepath.Join(base, "other")); err == nil || !strings.Contains(err.Error(), "not an OCI image layout") {
		t.Errorf("a directory of other things: %v", err)
	}
}
