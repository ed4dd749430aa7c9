package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// withUsage makes the command line's mistakes self-explaining: a wrong
// number of arguments shows the command's usage line, and an unknown
// flag suggests the nearest of the command's flags; both say where the
// help is. (Usage is otherwise silenced: a failing command prints only
// its error.)
func withUsage(root *cobra.Command) {
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		msg := err.Error()
		if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
			if near := nearFlags(c.Flags(), name); len(near) > 0 {
				msg += " (did you mean --" + strings.Join(near, " or --") + "?)"
			}
		}
		return fmt.Errorf("%s: %s\nrun '%s --help' for its flags", subPath(c), msg, c.CommandPath())
	})
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if check := c.Args; check != nil {
			c.Args = func(c *cobra.Command, args []string) error {
				if err := check(c, args); err != nil {
					return fmt.Errorf("%s: %w\nusage: %s\nrun '%s --help' for more", subPath(c), err, c.UseLine(), c.CommandPath())
				}
				return nil
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// subPath is the command's path without the root's name (main prints
// that before the error), or the root's name.
func subPath(c *cobra.Command) string {
	if !c.HasParent() {
		return c.Name()
	}
	_, p, _ := strings.Cut(c.CommandPath(), " ")
	return p
}

// nearFlags are the flags of fs nearest to a mistyped name: within an
// edit distance of 2 (a third of the name for long ones), or the name
// starting them, nearest first and at most three.
func nearFlags(fs *pflag.FlagSet, name string) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editDistance(name, f.Name)
		if d <= max(2, len(name)/3) || len(name) >= 3 && strings.HasPrefix(f.Name, name) {
			cs = append(cs, cand{f.Name, d})
		}
	})
	slices.SortStableFunc(cs, func(a, b cand) int { return a.d - b.d })
	var out []string
	for _, c := range cs[:min(len(cs), 3)] {
		out = append(out, c.name)
	}
	return out
}

// editDistance is the Levenshtein distance between a and b (bytes: flag
// names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
