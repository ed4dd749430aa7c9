package specs

import "github.com/nodeforge/builder/api/target"

// GoArch maps rpm architecture names to OCI's (see api/target).
func GoArch(a string) string { return target.OCIName(a) }
