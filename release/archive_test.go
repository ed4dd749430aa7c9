package release

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/random"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/attest/signing/signingtest"
	"github.com/nodeforge/builder/oci"
)

// testArchive seals a layout holding one signed image and writes it as a
// tar (in parts when partSize > 0); it returns the tar's path, the items
// and the manifest.
func testArchive(t testing.TB, partSize int64) (string, []Item, *ArchiveManifest, *signing.Signer) {
	t.Helper()
	ctx := context.Background()
	src, err := oci.CreateLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(300<<10, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.WriteImage(ctx, "app", "v1", img); err != nil {
		t.Fatal(err)
	}
	signer := signingtest.Signer(t)
	d, _ := img.Digest()
	if _, err := signer.Sign(ctx, src, "app", d); err != nil {
		t.Fatal(err)
	}
	items, err := CollectRepo(ctx, src, "app", "v1")
	if err != nil {
		t.Fatal(err)
	}
	stage, err := oci.CreateLayout(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Copy(ctx, src, stage, items, nil, nil); err != nil {
		t.Fatal(err)
	}
	m, err := SealArchive(stage, items, SealOptions{Version: "v1", Source: src.String(), Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "a.tar")
	if _, err := WriteArchiveTar(path, stage.Dir, m, partSize); err != nil {
		t.Fatal(err)
	}
	return path, items, m, signer
}

func TestArchiveRoundTrip(t *testing.T) {
	for _, part := range []int64{0, 128 << 10} {
		path, items, m, signer := testArchive(t, part)
		lay, got, err := OpenArchive(path, false, OpenArchiveOptions{Keys: []signing.Verifier{signer.Verifier()}, Work: t.TempDir()})
		if err != nil {
			t.Fatalf("parts of %d: %v", part, err)
		}
		if got.Digest != m.Digest || !got.Pinned || len(got.Predicate.Items) != len(items) {
			t.Errorf("manifest read back: %+v", got)
		}
		if _, problems := CheckParity(context.Background(), lay, items); len(problems) > 0 {
			t.Errorf("unpacked archive lacks: %v", problems)
		}
		if part > 0 {
			if _, err := os.Stat(path + ".002"); err != nil {
				t.Errorf("300 KiB in 128 KiB parts: %v", err)
			}
			// A missing last part is refused.
			last := path + ".002"
			if err := os.Remove(last); err != nil {
				t.Fatal(err)
			}
			if _, _, err := OpenArchive(path, false, OpenArchiveOptions{Work: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "part") {
				t.Errorf("archive without its last part: %v", err)
			}
		}
	}
}

// rewriteTar rebuilds a tar archive's entries through edit.
func rewriteTar(t *testing.T, path string, edit func(tw *tar.Writer, h *tar.Header, body []byte) bool) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		var body bytes.Buffer
		body.ReadFrom(tr)
		if edit(tw, h, body.Bytes()) {
			continue
		}
		tw.WriteHeader(h)
		tw.Write(body.Bytes())
	}
	tw.Close()
	p := filepath.Join(t.TempDir(), "edited.tar")
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestArchiveRefusals(t *testing.T) {
	path, _, _, signer := testArchive(t, 0)
	other := signingtest.Signer(t)
	cases := map[string]struct {
		path string
		keys []signing.Verifier
		want string
	}{
		"another key pinned": {path, []signing.Verifier{other.Verifier()}, "does not verify"},
		"extra entry": {rewriteTar(t, path, func(tw *tar.Writer, h *tar.Header, body []byte) bool {
			if h.Name == "index.json" {
				tw.WriteHeader(&tar.Header{Name: "../evil", Size: 1, Mode: 0o644, Typeflag: tar.TypeReg})
				tw.Write([]byte("x"))
			}
			return false
		}), nil, "not in its manifest"},
		"entry missing": {rewriteTar(t, path, func(_ *tar.Writer, h *tar.Header, _ []byte) bool {
			return h.Name == "index.json"
		}), nil, "lacks"},
		"index.json changed": {rewriteTar(t, path, func(tw *tar.Writer, h *tar.Header, body []byte) bool {
			if h.Name != "index.json" {
				return false
			}
			body = bytes.Replace(body, []byte("v1"), []byte("v2"), 1)
			h.Size = int64(len(body))
			tw.WriteHeader(h)
			tw.Write(body)
			return true
		}), nil, "tampered"},
		"manifest not first": {rewriteTar(t, path, func(tw *tar.Writer, h *tar.Header, body []byte) bool {
			return h.Name == ArchiveManifestName
		}), nil, "first entries"},
		"key swapped": {rewriteTar(t, path, func(tw *tar.Writer, h *tar.Header, body []byte) bool {
			if h.Name != ArchiveKeyName {
				return false
			}
			m := &ArchiveManifest{pub: other.Verifier()}
			pem, _ := m.publicKeyPEM()
			h.Size = int64(len(pem))
			tw.WriteHeader(h)
			tw.Write(pem)
			return true
		}), nil, "does not verify"},
	}
	_ = signer
	for name, c := range cases {
		work := t.TempDir()
		_, _, err := OpenArchive(c.path, false, OpenArchiveOptions{Keys: c.keys, Work: work})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(work), "evil")); err == nil {
			t.Errorf("%s: a path outside the work directory was written", name)
		}
	}
}

func TestValidArchivePath(t *testing.T) {
	for p, want := range map[string]bool{
		"index.json": true, "oci-layout": true,
		"blobs/sha256/" + strings.Repeat("a", 64): true,
		"blobs/sha256/" + strings.Repeat("A", 64): false,
		"blobs/sha256/../../etc/passwd":           false,
		"/etc/passwd":                             false,
		"blobs/sha512/" + strings.Repeat("a", 64): false,
	} {
		if got := validArchivePath(p); got != want {
			t.Errorf("validArchivePath(%q) = %v", p, got)
		}
	}
}

// FuzzOpenArchive feeds arbitrary bytes as a tar archive: never a panic,
// never a file outside the work directory.
func FuzzOpenArchive(f *testing.F) {
	path, _, _, _ := testArchive(f, 0)
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b[:min(len(b), 4096)])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		p := filepath.Join(dir, "a.tar")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		OpenArchive(p, false, OpenArchiveOptions{Work: filepath.Join(dir, "work")})
	})
}
