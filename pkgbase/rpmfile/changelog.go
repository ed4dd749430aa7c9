package rpmfile

import (
	"fmt"
	"strings"

	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// Change is one changelog entry of a package, newest first as rpm keeps them.
type Change struct {
	Time   int64  `json:"time"`   // seconds since the epoch (rpmbuild dates entries at noon)
	Author string `json:"author"` // "Name <email> version-release", as written
	Text   string `json:"text"`
}

// Changelog reads a header's changelog. The three arrays must be of one
// length: a header whose are not is refused rather than misread.
func Changelog(h *rpmhdr.Header) ([]Change, error) {
	times, names, texts := h.Ints(rpmhdr.TagChangelogTime), h.Strings(rpmhdr.TagChangelogName), h.Strings(rpmhdr.TagChangelogText)
	if len(times) != len(names) || len(names) != len(texts) {
		return nil, fmt.Errorf("changelog: %d times, %d names and %d texts", len(times), len(names), len(texts))
	}
	out := make([]Change, len(times))
	for i := range times {
		out[i] = Change{Time: times[i], Author: names[i], Text: texts[i]}
	}
	return out, nil
}

// ChangesSince returns the entries of a newer package's changelog that
// came after the version-release of an older one: those above the first
// entry that names it ("... 1.2-alt1", "... - 1.2-3", with or without an
// epoch), or, when no entry names it, those dated after the older
// package's build day (entries are dated by day).
func ChangesSince(log []Change, version, release string, buildTime int64) []Change {
	vr := version + "-" + release
	for i, c := range log {
		f := strings.Fields(c.Author)
		if len(f) == 0 {
			continue
		}
		last := f[len(f)-1]
		if _, after, ok := strings.Cut(last, ":"); ok {
			last = after
		}
		if last == vr {
			return log[:i]
		}
	}
	day := buildTime - buildTime%86400
	out := []Change{}
	for _, c := range log {
		if c.Time >= day+86400 {
			out = append(out, c)
		}
	}
	return out
}
