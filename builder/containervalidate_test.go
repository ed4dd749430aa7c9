package builder

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	ocilayout "github.com/nodeforge/builder/internal/ocilayout"
	"github.com/nodeforge/builder/internal/testutil"
)

// layerFile is one entry of a test layer.
type layerFile struct {
	name string
	mode int64
	data []byte
	link string // a symbolic link's target
}

// testLayer is a layer of the entries, as a tar a runtime reads.
func testLayer(t *testing.T, files ...layerFile) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg}
		if f.link != "" {
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, f.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(f.data)
	}
	tw.Close()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// writeTestLayout writes an OCI layout of one linux/amd64 image of the
// layers, configured with the entrypoint and user.
func writeTestLayout(t *testing.T, entrypoint []string, user string, layers ...v1.Layer) string {
	t.Helper()
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	for _, l := range layers {
		var err error
		if img, err = mutate.Append(img, mutate.Addendum{Layer: l, MediaType: types.OCILayer}); err != nil {
			t.Fatal(err)
		}
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint, cf.Config.User = entrypoint, user
	cf.Config.Healthcheck = &v1.HealthConfig{Test: []string{"CMD", "/usr/bin/echo", "ok"}}
	img, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{Add: img,
		Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	dir := filepath.Join(t.TempDir(), "layout")
	if err := ocilayout.WriteRoot(context.Background(), dir, idx); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestValidateLayout: builder image validate's checks on layouts made by
// another tool (go-containerregistry), of real programs (the host's echo
// and glibc): a good image passes; a second layer that whites out libc,
// adds a setuid file and a dangling link, with a user the passwd lacks,
// fails with every reason, each naming the file and its layer.
func TestValidateLayout(t *testing.T) {
	testutil.NeedFile(t, "/lib/x86_64-linux-gnu/libc.so.6", "libc6")
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	base := testLayer(t,
		layerFile{name: "usr/bin/echo", mode: 0o755, data: read("/bin/echo")},
		layerFile{name: "lib/x86_64-linux-gnu/libc.so.6", mode: 0o755, data: read("/lib/x86_64-linux-gnu/libc.so.6")},
		layerFile{name: "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", mode: 0o755, data: read("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")},
		layerFile{name: "lib64/ld-linux-x86-64.so.2", link: "../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"},
		layerFile{name: "etc/ld.so.conf", mode: 0o644, data: []byte("/lib/x86_64-linux-gnu\n")},
		layerFile{name: "etc/ld.so.cache", mode: 0o644, data: []byte("stands for ldconfig's")},
		layerFile{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/:/bin/sh\napp:x:1000:1000::/:/bin/sh\n")},
		layerFile{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\napp:x:1000:\n")},
		layerFile{name: "usr/local/bin/echo", link: "/usr/bin/echo"},
	)
	good := writeTestLayout(t, []string{"/usr/local/bin/echo", "hi"}, "app", base)
	if got, err := ValidateLayout(writeTestLayout(t, []string{"echo"}, "app", base), ValidateOptions{}); err == nil || !strings.Contains(err.Error(), `entrypoint "echo" is not an absolute path`) {
		t.Errorf("a relative entrypoint: %+v, %v", got, err)
	}
	got, err := ValidateLayout(good, ValidateOptions{Paths: []string{"/usr/local/bin/echo"}})
	if err != nil || len(got) != 1 || got[0].Platform != "linux/amd64" || got[0].Program != "/usr/local/bin/echo" {
		t.Fatalf("a good image: %+v, %v", got, err)
	}

	bad := testLayer(t,
		layerFile{name: "lib/x86_64-linux-gnu/.wh.libc.so.6"},
		layerFile{name: "usr/bin/su2", mode: 0o4755, data: read("/bin/echo")},
	)
	broken := writeTestLayout(t, []string{"/usr/local/bin/echo"}, "nobody2", base, bad)
	_, err = ValidateLayout(broken, ValidateOptions{Paths: []string{"/usr/local/bin/etcd"}})
	if err == nil {
		t.Fatal("a broken image passes")
	}
	for _, want := range []string{
		"linux/amd64 (", "entrypoint /usr/local/bin/echo from layer 1 (", "needs libc.so.6, which no library directory of the image holds",
		"/usr/bin/su2 is setuid/setgid (mode 4755) from layer 2 (", "--allow-setuid /usr/bin/su2",
		"user nobody2 is not in the image's /etc/passwd", "/usr/local/bin/etcd is not in the image",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nwant %q", err, want)
		}
	}
	if _, err := ValidateLayout(broken, ValidateOptions{Setuid: []string{"/usr/bin/su2"}}); err == nil || strings.Contains(err.Error(), "su2") {
		t.Errorf("--allow-setuid: %v", err)
	}
	if _, err := ValidateLayout(filepath.Join(t.TempDir(), "none"), ValidateOptions{}); err == nil || !strings.Contains(err.Error(), "no such file or directory") {
		t.Errorf("a missing layout: %v", err)
	}
	if _, err := ValidateLayout(t.TempDir(), ValidateOptions{}); err == nil || !strings.Contains(err.Error(), "not an OCI layout (no index.json)") {
		t.Errorf("a directory that is no layout: %v", err)
	}
	if _, err := ValidateLayout(good, ValidateOptions{Arch: "arm64"}); err == nil || !strings.Contains(err.Error(), `no image for architecture "arm64"`) {
		t.Errorf("another architecture: %v", err)
	}
}
