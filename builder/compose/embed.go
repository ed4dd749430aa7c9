package compose

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nodeforge/builder/api/extensions"
	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/builder/rootfs"
	"github.com/nodeforge/builder/internal/digest"
)

// The schematic's customization.embeddedMachineConfiguration reaches the
// node as Talos's imager carries it: a virtual extension of that name,
// after the schematic's extensions, whose one file is the configuration,
// where Talos (1.12 on) reads an embedded configuration at boot.
const (
	EmbeddedConfigName = "embedded-config"
	EmbeddedConfigPath = "/usr/local/etc/talos/config.yaml"
)

// embeddedConfigSince is the first Talos version that reads an embedded
// configuration (major, minor, patch).
var embeddedConfigSince = [3]int{1, 12, 0}

// embeddedConfig is the virtual extension of a machine configuration:
// the configuration's bytes as given (Talos parses them at boot; neither
// upstream's factory nor its imager checks them), read-only to root in
// directories as Talos's imager writes them; its version is the
// configuration's SHA-256, its other metadata upstream's.
func embeddedConfig(config string) (*Extension, error) {
	data := []byte(config)
	t := rootfs.New()
	origin := report.Origin{Generator: EmbeddedConfigName}
	for _, d := range []string{"/usr", "/usr/local", "/usr/local/etc", "/usr/local/etc/talos"} {
		if err := t.Add(&rootfs.Node{Path: d, Kind: rootfs.KindDir, Mode: 0o755, User: "root", Group: "root", Origin: origin}); err != nil {
			return nil, err
		}
	}
	if err := t.Add(&rootfs.Node{Path: EmbeddedConfigPath, Kind: rootfs.KindFile, Mode: 0o400, User: "root", Group: "root",
		Data: data, Digest: digest.SHA256Hex(data), Origin: origin}); err != nil {
		return nil, err
	}
	return &Extension{Name: EmbeddedConfigName, Tree: t, Generator: EmbeddedConfigName, Metadata: extensions.Metadata{
		Name:          EmbeddedConfigName,
		Version:       digest.SHA256Hex(data),
		Author:        "Imager",
		Description:   "Virtual extension which embeds the machine configuration.",
		Compatibility: extensions.Compatibility{Talos: extensions.VersionConstraint{Version: ">= 1.0.0"}},
	}}, nil
}

// SupportsEmbeddedConfig says whether a release of version (Talos's
// numbering, "v" or not) reads an embedded configuration: 1.12.0 and
// later, a pre-release or build suffix ignored (1.12.0-alpha does), and,
// as upstream's quirks, a version that is not one taken as the newest.
func SupportsEmbeddedConfig(version string) bool { return versionAtLeast(version, embeddedConfigSince) }

// versionAtLeast says whether version (Talos's numbering, "v" or not) is
// since (major, minor, patch) or later as upstream's quirks compare: a
// pre-release or build suffix ignored, missing parts zero, and a version
// that is not one taken as the newest.
func versionAtLeast(version string, since [3]int) bool {
	core, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(version), "v"), "-")
	core, _, _ = strings.Cut(core, "+")
	parts := strings.Split(core, ".")
	if len(parts) > 3 {
		return true
	}
	var v [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return true
		}
		v[i] = n
	}
	for i := range v {
		if v[i] != since[i] {
			return v[i] > since[i]
		}
	}
	return true
}

// EmbeddedConfigRefusal refuses, as upstream's factory does (its text),
// an embedded configuration for out from a release of version that does
// not read one; the kernel and the command line do not carry it. version
// is as the client named it.
func EmbeddedConfigRefusal(sch *schematic.Schematic, out Output, version string) error {
	if sch.Customization.EmbeddedMachineConfiguration == "" || out.Kind == "kernel" || out.Kind == "cmdline" || SupportsEmbeddedConfig(version) {
		return nil
	}
	return fmt.Errorf("embedding configuration is not supported for Talos version v%s", strings.TrimPrefix(version, "v"))
}

// segmentLayers are the extensions of the initramfs segment in mount
// order, as upstream's factory and imager list them: the named ones
// (sorted, as Schematic.Extensions gives them), the schematic's own
// (schematicLayer; version is the release's), then the embedded
// configuration's when the schematic has one.
func segmentLayers(exts []*Extension, sch *schematic.Schematic, version string) ([]*Extension, error) {
	byName := map[string]*Extension{}
	var have []string
	for _, e := range exts {
		byName[e.Name] = e
		have = append(have, e.Name)
	}
	var layers []*Extension
	for _, name := range sch.Extensions() {
		e := byName[name]
		if e == nil {
			return nil, fmt.Errorf("schematic: extension %q is not built by this release (have %s)", name, strings.Join(have, ", "))
		}
		layers = append(layers, e)
	}
	s, err := schematicLayer(sch, version)
	if err != nil {
		return nil, err
	}
	layers = append(layers, s)
	if c := sch.Customization.EmbeddedMachineConfiguration; c != "" {
		e, err := embeddedConfig(c)
		if err != nil {
			return nil, err
		}
		layers = append(layers, e)
	}
	return layers, nil
}
