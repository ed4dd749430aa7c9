package server

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// maxRanges bounds the ranges of one request; past it the whole artifact
// is sent, as nginx's max_ranges and Apache's MaxRanges do: many small
// ranges would turn a small request into a large multipart answer.
const maxRanges = 16

// normalizeRange rewrites a Range header for an artifact of size bytes
// before http.ServeContent sees it: unsatisfiable parts (a suffix of 0,
// a start past the end) are dropped and overlapping or adjacent ranges
// merged. ok is false when nothing is satisfiable (416); fixed is "" when
// the whole artifact is to be sent (more than maxRanges). A header that is
// not a byte range is passed on as it is (ServeContent answers it).
func normalizeRange(h string, size int64) (fixed string, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found {
		return h, true
	}
	type span struct{ start, end int64 } // end inclusive
	var spans []span
	for part := range strings.SplitSeq(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		a, b, dash := strings.Cut(part, "-")
		a, b = strings.TrimSpace(a), strings.TrimSpace(b)
		if !dash {
			return h, true
		}
		var sp span
		switch {
		case a == "":
			n, err := strconv.ParseInt(b, 10, 64)
			if err != nil || n < 0 {
				return h, true
			}
			if n == 0 || size == 0 {
				continue // an empty suffix is not satisfiable
			}
			sp = span{max(size-n, 0), size - 1}
		default:
			start, err := strconv.ParseInt(a, 10, 64)
			if err != nil || start < 0 {
				return h, true
			}
			end := size - 1
			if b != "" {
				if end, err = strconv.ParseInt(b, 10, 64); err != nil || end < start {
					return h, true
				}
			}
			if start >= size {
				continue
			}
			sp = span{start, min(end, size-1)}
		}
		spans = append(spans, sp)
	}
	if len(spans) == 0 {
		return "", false
	}
	slices.SortFunc(spans, func(x, y span) int { return cmp.Compare(x.start, y.start) })
	merged := spans[:1]
	for _, sp := range spans[1:] {
		last := &merged[len(merged)-1]
		if sp.start <= last.end+1 {
			last.end = max(last.end, sp.end)
			continue
		}
		merged = append(merged, sp)
	}
	if len(merged) > maxRanges {
		return "", true
	}
	parts := make([]string, len(merged))
	for i, sp := range merged {
		parts[i] = fmt.Sprintf("%d-%d", sp.start, sp.end)
	}
	return "bytes=" + strings.Join(parts, ","), true
}
