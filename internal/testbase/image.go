package testbase

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"os"
	"time"

	"github.com/nodeforge/builder/internal/digest"
)

// writeHelloImage writes the container image of the extensions' boot
// test: an OCI image layout in a tar archive (what ctr images import
// reads), one uncompressed layer holding the init at /nodeforge-init, run
// as "nodeforge-init hello". Dated sde, so the same init gives the same
// bytes.
func writeHelloImage(path, initBin string, sde int64) error {
	initData, err := os.ReadFile(initBin)
	if err != nil {
		return err
	}
	mtime := time.Unix(sde, 0).UTC()
	layer, err := tarOf(mtime, entry{"nodeforge-init", 0o755, initData})
	if err != nil {
		return err
	}
	layerDigest := "sha256:" + digest.SHA256Hex(layer)
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux", "created": mtime.Format(time.RFC3339),
		"config": map[string]any{"Entrypoint": []string{"/nodeforge-init", "hello"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	if err != nil {
		return err
	}
	desc := func(mediaType string, b []byte) map[string]any {
		return map[string]any{"mediaType": mediaType, "digest": "sha256:" + digest.SHA256Hex(b), "size": len(b)}
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": desc("application/vnd.oci.image.config.v1+json", config),
		"layers": []any{desc("application/vnd.oci.image.layer.v1.tar", layer)},
	})
	if err != nil {
		return err
	}
	md := desc("application/vnd.oci.image.manifest.v1+json", manifest)
	md["annotations"] = map[string]string{"io.containerd.image.name": HelloImageName, "org.opencontainers.image.ref.name": "test"}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []any{md}})
	if err != nil {
		return err
	}
	blob := func(b []byte) entry { return entry{"blobs/sha256/" + digest.SHA256Hex(b), 0o644, b} }
	archive, err := tarOf(mtime, entry{"oci-layout", 0o644, []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		entry{"index.json", 0o644, index}, blob(manifest), blob(config), blob(layer))
	if err != nil {
		return err
	}
	return os.WriteFile(path, archive, 0o644)
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
