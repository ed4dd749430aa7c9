package builder

import (
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Media types of the boot assets as OCI artifact layers.
const (
	ArtifactType       = "application/vnd.nodeforge.node-os.v1"
	MediaTypeVmlinuz   = "application/vnd.nodeforge.node-os.vmlinuz.v1"
	MediaTypeInitramfs = "application/vnd.nodeforge.node-os.initramfs.v1"
	MediaTypeRootfs    = "application/vnd.nodeforge.node-os.rootfs.squashfs.v1"
	MediaTypeCmdline   = "application/vnd.nodeforge.node-os.cmdline.v1"
)

// ociAsset is one file of an architecture's artifact.
type ociAsset struct {
	name      string
	mediaType types.MediaType
	data      []byte
}

// goArch maps rpm architecture names to OCI's.
func goArch(arch string) string {
	switch arch {
	case "x86_64":
		return "amd64"
	case "aarch64":
		return "arm64"
	case "i586", "i686":
		return "386"
	}
	return arch
}

// writeOCILayout writes an OCI image layout with one artifact manifest per
// architecture (a layer per boot asset, titled by file name) under an
// index annotated with the release's identity. Every timestamp is the
// source date, so the digests are reproducible.
func writeOCILayout(dir string, sde int64, annotations map[string]string, arches []string, assets map[string][]ociAsset) (v1.Hash, error) {
	created := v1.Time{Time: time.Unix(sde, 0).UTC()}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range arches {
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.MediaType(ArtifactType+"+json"))
		for _, a := range assets[arch] {
			l := static.NewLayer(a.data, a.mediaType)
			var err error
			img, err = mutate.Append(img, mutate.Addendum{Layer: l, Annotations: map[string]string{"org.opencontainers.image.title": a.name}})
			if err != nil {
				return v1.Hash{}, err
			}
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return v1.Hash{}, err
		}
		cf = cf.DeepCopy()
		cf.Architecture, cf.OS, cf.Created = goArch(arch), "linux", created
		cf.History = nil
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return v1.Hash{}, err
		}
		ann := map[string]string{"org.opencontainers.image.created": created.Format(time.RFC3339)}
		for k, v := range annotations {
			ann[k] = v
		}
		img = mutate.Annotations(img, ann).(v1.Image)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform:     &v1.Platform{OS: "linux", Architecture: goArch(arch)},
			ArtifactType: ArtifactType,
		}})
	}
	idx = mutate.Annotations(idx, annotations).(v1.ImageIndex)
	if _, err := layout.Write(dir, idx); err != nil {
		return v1.Hash{}, fmt.Errorf("oci layout: %w", err)
	}
	return idx.Digest()
}
