package builder

import (
	"testing"

	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/api/specs"
)

// TestCheckSchematicEmbeddedConfig: builder image embeds a configuration
// for a spec whose version reads one (Talos 1.12 on) and refuses it
// before any work otherwise, with the factory's (upstream's) text.
func TestCheckSchematicEmbeddedConfig(t *testing.T) {
	sch := &schematic.Schematic{}
	sch.Customization.EmbeddedMachineConfiguration = "machine: {}\n"
	for version, want := range map[string]string{
		"1.12.0-alpha": "",
		"1.13.0":       "",
		"1.11.0":       "embedding configuration is not supported for Talos version v1.11.0",
	} {
		err := checkSchematic(&specs.Spec{Version: version}, Options{Schematic: sch})
		if want == "" && err != nil || want != "" && (err == nil || err.Error() != want) {
			t.Errorf("%s: %v, want %q", version, err, want)
		}
	}
}
