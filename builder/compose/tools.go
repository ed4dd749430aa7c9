package compose

import (
	"os/exec"
	"strings"
)

// Tool is an outside program that composing some media runs: everything
// else is written in Go.
type Tool struct {
	Name    string   // the program, found on PATH
	Package string   // the Debian package that installs it
	Formats []string // the disk formats (api/platform suffixes) that need it
}

// Tools are the outside programs Media may run: xorriso writes the ISO.
var Tools = []Tool{{Name: "xorriso", Package: "xorriso", Formats: []string{"iso"}}}

// MissingTools are the Tools not found on PATH now.
func MissingTools() []Tool {
	var out []Tool
	for _, t := range Tools {
		if _, err := exec.LookPath(t.Name); err != nil {
			out = append(out, t)
		}
	}
	return out
}

// String says what is missing and what needs it: "xorriso (Debian's
// xorriso), needed for .iso media".
func (t Tool) String() string {
	return t.Name + " (Debian's " + t.Package + "), needed for ." + strings.Join(t.Formats, ", .") + " media"
}
