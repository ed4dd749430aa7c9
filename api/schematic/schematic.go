// Package schematic reads image schematics (extensions, kernel arguments,
// META values, an embedded machine configuration, boot loader, Secure
// Boot and disk options, an overlay) and computes their IDs as Talos's
// Image Factory does: the sha256 of the schematic marshalled as sent
// (lists in the order given), with the YAML library upstream uses
// (go.yaml.in/yaml/v4) and upstream's field order, so any schematic gets
// the ID Talos gives it.
//
// A schematic is version-independent: what a release can make of it
// (which extensions it has, which options its media support) is checked
// when media of a version are asked for, not here.
package schematic

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	// Upstream pins a commit after v4.0.0-rc.6 that the module proxy does
	// not serve; rc.6 is the last release before it (and the version
	// Talos's machinery pins). docs/talos-compatibility.md says where the
	// versions' output differs and which vectors hold it.
	"github.com/google/go-containerregistry/pkg/name"
	"go.yaml.in/yaml/v4"
)

// Schematic is an image customisation. Field order and YAML names are
// upstream's: they decide the marshalled form, hence the ID.
type Schematic struct {
	// Owner is upstream's Enterprise field: accepted by the decoder and
	// refused by Validate, as upstream's non-Enterprise factory does.
	Owner         string        `yaml:"owner,omitempty"`
	Overlay       Overlay       `yaml:"overlay,omitempty"`
	Customization Customization `yaml:"customization"`
}

// Overlay names a board overlay image and its options.
type Overlay struct {
	Image   string         `yaml:"image"`
	Name    string         `yaml:"name"`
	Options map[string]any `yaml:"options,omitempty"`
}

// Requested says whether the schematic asks for an overlay.
func (o Overlay) Requested() bool { return o.Image != "" || o.Name != "" || len(o.Options) > 0 }

// overlayName is what an overlay's name may be (Talos's: rpi_generic,
// rock64, jetson_nano).
var overlayName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// check refuses an overlay whose name is not a name or whose image is not
// an image reference (../../../etc/passwd): upstream stores any string
// there, but a factory that takes hostile input refuses what can only be
// an attack or a typo. Both may be empty (not asked for).
func (o Overlay) check() error {
	if o.Name != "" && !overlayName.MatchString(o.Name) {
		return fmt.Errorf("overlay name %q is not a name (lower-case letters, digits, '_', '.', '-'; at most 64)", o.Name)
	}
	if o.Image != "" {
		if _, err := name.ParseReference(o.Image); err != nil || len(o.Image) > 255 || strings.Contains(o.Image, "..") {
			return fmt.Errorf("overlay image %q is not an image reference (REGISTRY/REPOSITORY[:TAG][@DIGEST])", o.Image)
		}
	}
	return nil
}

// Customization is what a schematic changes in the image.
type Customization struct {
	EmbeddedMachineConfiguration string           `yaml:"embeddedMachineConfiguration,omitempty"`
	ExtraKernelArgs              []string         `yaml:"extraKernelArgs,omitempty"`
	Meta                         []MetaValue      `yaml:"meta,omitempty"`
	SystemExtensions             SystemExtensions `yaml:"systemExtensions,omitempty"`
	Bootloader                   Bootloader       `yaml:"bootloader,omitempty"`
	SecureBoot                   SecureBoot       `yaml:"secureboot,omitempty"`
	DiskImage                    DiskImage        `yaml:"diskImage,omitempty"`
}

// MetaValue is an initial value of the META partition.
type MetaValue struct {
	Key   uint8  `yaml:"key"`
	Value string `yaml:"value"`
}

// SystemExtensions lists extensions by name: NAMESPACE/NAME (Talos's
// siderolabs/zfs) or NAME.
type SystemExtensions struct {
	OfficialExtensions []string `yaml:"officialExtensions,omitempty"`
}

// SecureBoot holds the Secure Boot options.
type SecureBoot struct {
	// EnrollKeys is systemd-boot's secure-boot-enroll: off, manual,
	// if-safe or force ("" is the media's default).
	EnrollKeys string `yaml:"enrollKeys,omitempty"`
	// IncludeWellKnownCertificates: the Secure Boot ISO and disk images
	// enrol Microsoft's UEFI certificates besides the factory's keys.
	IncludeWellKnownCertificates bool `yaml:"includeWellKnownCertificates,omitempty"`
}

// EnrollKeysValues are the values of SecureBoot.EnrollKeys.
var EnrollKeysValues = []string{"off", "manual", "if-safe", "force"}

// DiskImage holds the disk image options.
type DiskImage struct {
	// SectorSize is the disk images' logical sector size (0: 512).
	SectorSize uint `yaml:"sectorSize,omitempty"`
}

// Bootloader is the boot loader of the ISO and disk images; the zero
// value is the media's default. Its YAML form is Talos's name.
type Bootloader int

// The boot loaders, in Talos's order (its enum's values).
const (
	BootloaderDefault  Bootloader = iota // "none": the media's default
	BootloaderDualBoot                   // dual-boot: GRUB for BIOS, sd-boot for UEFI
	BootloaderSDBoot                     // sd-boot
	BootloaderGrub                       // grub
)

var bootloaderNames = []string{"none", "dual-boot", "sd-boot", "grub"}

func (b Bootloader) String() string {
	if b < 0 || int(b) >= len(bootloaderNames) {
		return fmt.Sprintf("BootloaderKind(%d)", int(b))
	}
	return bootloaderNames[b]
}

// MarshalText writes the name (what upstream's enum writes).
func (b Bootloader) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText reads a name, in any case, as upstream does.
func (b *Bootloader) UnmarshalText(text []byte) error {
	if i := slices.Index(bootloaderNames, strings.ToLower(string(text))); i >= 0 {
		*b = Bootloader(i)
		return nil
	}
	return fmt.Errorf("%s does not belong to BootloaderKind values", text)
}

// Parse reads a schematic (YAML or JSON) as upstream's factory does:
// one document, unknown fields refused, the decoder's errors as they are
// (clients match on them), then Validate.
func Parse(data []byte) (*Schematic, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Schematic
	if err := dec.Decode(&s); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate checks what upstream checks when a schematic is stored, and
// that an overlay's name and image are a name and a reference; the rest
// depends on the release and the media asked for.
func (s *Schematic) Validate() error {
	if s.Owner != "" {
		return errors.New("owner field is only supported in Enterprise edition")
	}
	return s.Overlay.check()
}

// Canonical returns the schematic marshalled as upstream marshals it:
// what its ID is taken from, what the factory stores and returns.
func (s *Schematic) Canonical() ([]byte, error) {
	return yaml.Marshal(s)
}

// ID is the hex sha256 of the canonical form.
func (s *Schematic) ID() (string, error) {
	b, err := s.Canonical()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Extensions returns the extensions' names without their namespace
// (siderolabs/zfs is zfs), sorted, each once: what the media are composed
// of, whatever the order and spelling the schematic lists them in. Which
// namespaces a release answers to is its own (see Namespace).
func (s *Schematic) Extensions() []string {
	var out []string
	for _, e := range s.Customization.SystemExtensions.OfficialExtensions {
		out = append(out, BareName(e))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// BareName is an extension's name without its namespace.
func BareName(name string) string { return name[strings.LastIndex(name, "/")+1:] }

// Namespace is how a release names its extensions: Name/NAME (listed),
// each Aliases/NAME and the bare NAME (accepted too).
type Namespace struct {
	Name    string
	Aliases []string
}

// The boot index's annotations that record a release's namespace (its
// spec's extensions-namespace and extension-aliases, comma-separated);
// a release without them has the default namespace.
const (
	AnnotationNamespace = "dev.nodeforge.extensions.namespace"
	AnnotationAliases   = "dev.nodeforge.extensions.aliases"
)

// NamespaceOf reads a release's namespace from its boot index's
// annotations.
func NamespaceOf(annotations map[string]string) Namespace {
	n := Namespace{Name: annotations[AnnotationNamespace]}
	if a := annotations[AnnotationAliases]; a != "" {
		n.Aliases = strings.Split(a, ",")
	}
	return n
}

// DefaultNamespace is a release's namespace when its spec names none:
// Talos's, so clients that ask for siderolabs/NAME work unchanged.
const DefaultNamespace = "siderolabs"

// name is the namespace's name: DefaultNamespace when the spec names
// none.
func (n Namespace) name() string { return cmp.Or(n.Name, DefaultNamespace) }

// Qualified is an extension's listed name.
func (n Namespace) Qualified(bare string) string { return n.name() + "/" + bare }

// Resolve is the bare name an extension's name denotes in the namespace,
// false when it is not one of its forms (another namespace).
func (n Namespace) Resolve(name string) (string, bool) {
	ns, bare, qualified := strings.Cut(name, "/")
	if !qualified {
		return name, name != ""
	}
	if strings.Contains(bare, "/") || bare == "" {
		return "", false
	}
	if ns == n.name() || slices.Contains(n.Aliases, ns) {
		return bare, true
	}
	return "", false
}
