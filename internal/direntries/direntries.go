// Package direntries names what a directory holds, for the messages that
// refuse to write over it.
package direntries

import (
	"fmt"
	"io/fs"
	"strings"
)

// Describe names up to five entries, quoted, directories with a trailing
// slash, and says how many there are when there are more.
func Describe(ents []fs.DirEntry) string {
	var names []string
	for _, e := range ents[:min(5, len(ents))] {
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		names = append(names, fmt.Sprintf("%q", n))
	}
	s := strings.Join(names, ", ")
	if len(ents) > 5 {
		s = fmt.Sprintf("%d entries (%s, ...)", len(ents), s)
	}
	return s
}
