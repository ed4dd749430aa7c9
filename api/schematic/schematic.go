// Package schematic reads image schematics (extensions, extra kernel
// arguments, META values, overlay) and computes their IDs the way Talos's
// Image Factory does: the sha256 of the YAML marshalled from a fixed field
// order, so a schematic written for Talos gets the ID Talos gives it.
//
// One difference, on purpose: extension names are sorted before the ID is
// taken, so the order in which a user lists them does not matter (upstream
// gives two IDs for one image). A Talos schematic whose extensions are
// already sorted has the same ID in both.
package schematic

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"go.yaml.in/yaml/v3"
)

// Schematic is an image customisation. Field order and YAML names are
// Talos's: they decide the canonical form.
type Schematic struct {
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

// check lists what is wrong with an overlay: a name and an image, the
// image an OCI reference (repository[:tag][@digest], no path tricks).
func (o Overlay) check() []string {
	if !o.Requested() {
		return nil
	}
	var errs []string
	if !overlayName.MatchString(o.Name) {
		errs = append(errs, fmt.Sprintf("overlay name %q is not a name (lower-case letters, digits, '_', '.', '-'; at most 64)", o.Name))
	}
	if _, err := name.ParseReference(o.Image); err != nil || len(o.Image) > 255 || strings.Contains(o.Image, "..") {
		errs = append(errs, fmt.Sprintf("overlay image %q is not an image reference (REGISTRY/REPOSITORY[:TAG][@DIGEST])", o.Image))
	}
	return errs
}

// Customization is what a schematic changes in the image.
type Customization struct {
	ExtraKernelArgs  []string                `yaml:"extraKernelArgs,omitempty"`
	Meta             []MetaValue             `yaml:"meta,omitempty"`
	SystemExtensions SystemExtensions        `yaml:"systemExtensions,omitempty"`
	SecureBoot       SecureBootCustomization `yaml:"secureboot,omitempty"`
}

// MetaValue is an initial value of the META partition.
type MetaValue struct {
	Key   uint8  `yaml:"key"`
	Value string `yaml:"value"`
}

// SystemExtensions lists extensions by name.
type SystemExtensions struct {
	OfficialExtensions []string `yaml:"officialExtensions,omitempty"`
}

// SecureBootCustomization holds the secure boot options.
type SecureBootCustomization struct {
	IncludeWellKnownCertificates bool `yaml:"includeWellKnownCertificates,omitempty"`
}

// Parse reads a schematic (YAML or JSON). Unknown fields are errors, as
// in Talos, so a typo does not silently give another image.
func Parse(data []byte) (*Schematic, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Schematic
	if err := dec.Decode(&s); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("schematic: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Bounds of the kernel arguments a schematic adds: the kernel's command
// line is 2 KiB on x86, and the release and the platform take their share.
const (
	MaxKernelArgs      = 32
	MaxKernelArgLen    = 256
	MaxKernelArgsTotal = 1024 // bytes, joined by spaces
)

// Validate checks what the YAML types cannot.
func (s *Schematic) Validate() error {
	errs := s.Overlay.check()
	seen := map[string]bool{}
	for _, e := range s.Customization.SystemExtensions.OfficialExtensions {
		switch {
		case strings.TrimSpace(e) == "":
			errs = append(errs, "an extension name is empty")
		case seen[e]:
			errs = append(errs, fmt.Sprintf("extension %s is listed twice", e))
		}
		seen[e] = true
	}
	keys := map[uint8]bool{}
	for _, m := range s.Customization.Meta {
		if keys[m.Key] {
			errs = append(errs, fmt.Sprintf("META key 0x%x is set twice", m.Key))
		}
		keys[m.Key] = true
	}
	args := s.Customization.ExtraKernelArgs
	if len(args) > MaxKernelArgs {
		errs = append(errs, fmt.Sprintf("%d kernel arguments, at most %d", len(args), MaxKernelArgs))
	}
	if total := len(strings.Join(args, " ")); total > MaxKernelArgsTotal {
		errs = append(errs, fmt.Sprintf("the kernel arguments take %d bytes, at most %d", total, MaxKernelArgsTotal))
	}
	for _, a := range args {
		switch {
		case a == "" || strings.ContainsAny(a, " \t\n"):
			errs = append(errs, fmt.Sprintf("kernel argument %q is empty or holds white space", a))
		case len(a) > MaxKernelArgLen:
			errs = append(errs, fmt.Sprintf("kernel argument %.32q... is %d bytes long, at most %d", a, len(a), MaxKernelArgLen))
		case strings.IndexFunc(a, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
			errs = append(errs, fmt.Sprintf("kernel argument %q holds a control character", a))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("schematic: %s", strings.Join(errs, "; "))
	}
	return nil
}

// Canonical returns the canonical form: extension names sorted, then
// marshalled as Talos marshals it (yaml.v3, empty fields dropped,
// customization always present).
func (s *Schematic) Canonical() ([]byte, error) {
	c := *s
	c.Customization.SystemExtensions.OfficialExtensions = slices.Sorted(slices.Values(s.Customization.SystemExtensions.OfficialExtensions))
	if len(c.Customization.SystemExtensions.OfficialExtensions) == 0 {
		c.Customization.SystemExtensions.OfficialExtensions = nil
	}
	return yaml.Marshal(&c)
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

// Extensions returns the extension names, sorted.
func (s *Schematic) Extensions() []string {
	return slices.Sorted(slices.Values(s.Customization.SystemExtensions.OfficialExtensions))
}
