package certification

import (
	"strings"
)

// relocated counts the extensions' files their definitions relocated
// (relocate: in extensions/<name>.yaml) and holds each to a package: a
// relocated file is still its package's, at another path, so it is laid
// from the locked RPM like any other (files checks that); one without a
// package, or outside an extension, is a report the audit cannot trust.
func relocated(r *Report, fail func(string, ...any)) {
	var bad []string
	for _, f := range r.Files.List {
		if f.RelocatedFrom == "" {
			continue
		}
		r.Files.Relocated++
		if f.Package == "" || !strings.HasPrefix(f.Artifact, "extension/") {
			bad = append(bad, f.Artifact+":"+f.Path+" (from "+f.RelocatedFrom+")")
		}
	}
	if len(bad) > 0 {
		if len(bad) > 10 {
			bad = bad[:10]
		}
		fail("relocated files not traced to an extension's package: %s", strings.Join(bad, ", "))
	}
}
