package debext

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"time"

	"github.com/nodeforge/builder/internal/digest"
)

// ImageName is the image's name in the archive.
const ImageName = "docker.io/nodeforge/hello:test"

// Init is the node init of one architecture, for Image.
type Init struct {
	GOARCH string // amd64, arm64: the image's architecture
	Binary []byte // a static linux executable
}

// Image is the container image of the node init: an OCI image layout in
// a tar archive (what ctr images import reads), one uncompressed layer
// holding the init at /nodeforge-init, run as "nodeforge-init hello".
// With several architectures ImageName is an image index of one such
// image per architecture (their platforms set), and containerd runs the
// node's. Every time is mtime, so the same inits give the same bytes.
func Image(inits []Init, mtime time.Time) ([]byte, error) {
	if len(inits) == 0 {
		return nil, errors.New("debext: a container image of no init")
	}
	mtime = mtime.UTC()
	blobs := []entry{{"oci-layout", 0o644, []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {}}
	blob := func(b []byte) entry { return entry{"blobs/sha256/" + digest.SHA256Hex(b), 0o644, b} }
	var manifests []any
	for _, in := range inits {
		manifest, layer, config, err := initManifest(in, mtime)
		if err != nil {
			return nil, err
		}
		blobs = append(blobs, blob(manifest), blob(config), blob(layer))
		md := ociDesc("application/vnd.oci.image.manifest.v1+json", manifest)
		if len(inits) > 1 {
			md["platform"] = map[string]string{"architecture": in.GOARCH, "os": "linux"}
		}
		manifests = append(manifests, md)
	}
	top := manifests[0].(map[string]any)
	if len(inits) > 1 {
		index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": manifests})
		if err != nil {
			return nil, err
		}
		blobs = append(blobs, blob(index))
		top = ociDesc("application/vnd.oci.image.index.v1+json", index)
	}
	top["annotations"] = map[string]string{"io.containerd.image.name": ImageName, "org.opencontainers.image.ref.name": "test"}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []any{top}})
	if err != nil {
		return nil, err
	}
	blobs[1] = entry{"index.json", 0o644, index}
	return tarOf(mtime, blobs...)
}

// initManifest makes the image of one architecture's init: its manifest,
// layer and config.
func initManifest(in Init, mtime time.Time) (manifest, layer, config []byte, err error) {
	if layer, err = tarOf(mtime, entry{"nodeforge-init", 0o755, in.Binary}); err != nil {
		return nil, nil, nil, err
	}
	layerDigest := "sha256:" + digest.SHA256Hex(layer)
	config, err = json.Marshal(map[string]any{
		"architecture": in.GOARCH, "os": "linux", "created": mtime.Format(time.RFC3339),
		"config": map[string]any{"Entrypoint": []string{"/nodeforge-init", "hello"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	if err != nil {
		return nil, nil, nil, err
	}
	manifest, err = json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": ociDesc("application/vnd.oci.image.config.v1+json", config),
		"layers": []any{ociDesc("application/vnd.oci.image.layer.v1.tar", layer)},
	})
	return manifest, layer, config, err
}

// ociDesc is an OCI descriptor of b.
func ociDesc(mediaType string, b []byte) map[string]any {
	return map[string]any{"mediaType": mediaType, "digest": "sha256:" + digest.SHA256Hex(b), "size": len(b)}
}

// entry is a file of a tar archive.
type entry struct {
	name string
	mode int64
	data []byte
}

// tarOf is a tar archive of the entries (their directories first).
func tarOf(mtime time.Time, entries ...entry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, e := range entries {
		for i := 0; i < len(e.name); i++ {
			if d := e.name[:i+1]; e.name[i] == '/' && !dirs[d] {
				dirs[d] = true
				if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
					return nil, err
				}
			}
		}
		h := &tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: e.mode, Size: int64(len(e.data)), ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
