// Package compressors names the libraries that write the compressed bytes
// of the artifacts, and says whether this builder's are the reference ones
// a release is built with.
//
// A compressed format does not fix its bytes: two encoders of zstd, or two
// versions of one, write different streams from the same input, each
// valid. Every library here is pinned by go.mod or vendored, so every
// build of a source writes the same bytes, but for two: the squashfs
// writer's zstd is libzstd through cgo (github.com/DataDog/zstd) and, in
// a builder built with CGO_ENABLED=0, klauspost's pure-Go encoder, whose
// blocks differ; the .xz disk images are liblzma's Block encoder,
// a Block per goroutine (vendored in internal/xzdec, through cgo) and, without cgo, ulikunitz/xz
// in concatenated streams. Such a builder refuses to build releases
// (Refusal) and still verifies, audits, mirrors and serves them.
package compressors

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nodeforge/builder/builder/rootfs/sqfs"
	"github.com/nodeforge/builder/internal/xzdec"
)

// The modules of the compressors.
const (
	klauspost = "github.com/klauspost/compress"
	ulikunitz = "github.com/ulikunitz/xz"
	datadog   = "github.com/DataDog/zstd"
	// liblzma is the xz-utils library vendored in internal/xzdec: not a
	// Go module, its version is xzdec.LiblzmaVersion.
	liblzma = "liblzma"
)

// Implementation is the library that writes one compressed format.
type Implementation struct {
	// Writes names the format and what it compresses: "squashfs zstd"
	// (rootfs.sqsh, the extensions' images in the media), "squashfs xz",
	// "squashfs gzip", "initramfs zstd" (also the .zst disk images and
	// the zstd layers of container images),
	// "initramfs xz", "disk xz" (the .xz disk images), "layers gzip" (the
	// OCI layers, the .gz disk images, the VMDK's zlib grains).
	Writes string
	// Module is the Go module, Version its version as compiled in
	// ("unknown" in a binary without build information).
	Module, Version string
	// Reference is the module releases are built with.
	Reference string
	// ReferenceName, Lacks and Remedy word the refusal of a builder that
	// is not the reference (only where a build can be other than it).
	ReferenceName, Lacks, Remedy string
}

// IsReference says whether the implementation is the one releases are
// built with.
func (i Implementation) IsReference() bool { return i.Module == i.Reference }

// String is "module@version".
func (i Implementation) String() string { return i.Module + "@" + i.Version }

// This lists the implementations of this builder, in the order above.
func This() []Implementation {
	list := []Implementation{
		{Writes: "squashfs zstd", Module: sqfs.ZstdModule, Reference: datadog, ReferenceName: "libzstd via " + datadog,
			Lacks: "was built without cgo", Remedy: "build the builder with CGO_ENABLED=1 (a C compiler and libc headers) to build releases"},
		{Writes: "squashfs xz", Module: ulikunitz, Reference: ulikunitz},
		{Writes: "squashfs gzip", Module: klauspost, Reference: klauspost},
		{Writes: "initramfs zstd", Module: klauspost, Reference: klauspost},
		{Writes: "initramfs xz", Module: ulikunitz, Reference: ulikunitz},
		{Writes: "layers gzip", Module: klauspost, Reference: klauspost},
		{Writes: "disk xz", Module: diskXZModule(), Reference: liblzma, ReferenceName: "liblzma " + xzdec.LiblzmaVersion + " via internal/xzdec",
			Lacks: "was built without cgo", Remedy: "build the builder with CGO_ENABLED=1 (a C compiler and libc headers) to build releases"},
	}
	for i := range list {
		list[i].Version = sqfs.ModuleVersion(list[i].Module)
		if list[i].Module == liblzma {
			list[i].Version = xzdec.LiblzmaVersion
		}
	}
	return list
}

// diskXZModule writes the .xz disk images in this build: liblzma with
// cgo, ulikunitz/xz without (builder/compose).
func diskXZModule() string {
	if xzdec.CanEncode {
		return liblzma
	}
	return ulikunitz
}

// Map is what the build report records: format -> module@version.
func Map(list []Implementation) map[string]string {
	m := make(map[string]string, len(list))
	for _, i := range list {
		m[i.Writes] = i.String()
	}
	return m
}

// Key is the list as one line, for cache keys: another implementation or
// version, another key.
func Key(list []Implementation) string {
	m := Map(list)
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s=%s;", k, m[k])
	}
	return b.String()
}

// Refusal is nil when every implementation is the reference one, and
// otherwise the one line that says what the builder lacks and how to
// build one that can build releases.
func Refusal(list []Implementation) error {
	for _, i := range list {
		if i.IsReference() {
			continue
		}
		lacks, ref, remedy := i.Lacks, i.ReferenceName, i.Remedy
		if lacks == "" {
			lacks = "is not built as releases need"
		}
		if ref == "" {
			ref = i.Reference
		}
		if remedy == "" {
			remedy = "build the builder from the release's source with its go.mod to build releases"
		}
		return fmt.Errorf("this builder %s: its %s compressor (%s) writes other bytes than the releases' reference (%s); %s (verify, audit, mirror and the factory work as they are)",
			lacks, i.Writes, i.Module, ref, remedy)
	}
	return nil
}
