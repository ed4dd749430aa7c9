package testbase

// SchematicLine is the node init's banner line naming the schematic of
// the media it booted from (the schematic layer's version, its ID).
func SchematicLine(id string) string { return "nodeforge-init:   schematic   " + id }

// NoSchematicLine is the banner line of a boot from the release's own
// initramfs, which carries no schematic layer.
const NoSchematicLine = "nodeforge-init:   schematic   none named in the initramfs"
