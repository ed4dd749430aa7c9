package certification

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// JSON writes the diff as builder diff --json prints it
// (docs/schemas/diff.schema.json).
func (d *Diff) JSON(w io.Writer) error { return indentedJSON(w, d) }

// indentedJSON writes v as two-space indented JSON, <, > and & as they are.
func indentedJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// Empty says nothing changed.
func (d *Diff) Empty() bool {
	return len(d.Identity)+len(d.Added)+len(d.Removed)+len(d.Updated)+len(d.Components)+len(d.Artifacts)+len(d.Kernel)+len(d.Extensions)+len(d.Images) == 0
}

// Text writes the diff for a terminal; with md, as Markdown release notes.
func (d *Diff) Text(w io.Writer, md bool) error {
	h := func(level int, s string) {
		if md {
			fmt.Fprintf(w, "%s %s\n\n", strings.Repeat("#", level), s)
		} else if level == 1 {
			fmt.Fprintf(w, "%s\n%s\n\n", s, strings.Repeat("=", len(s)))
		} else {
			fmt.Fprintf(w, "%s\n\n", s)
		}
	}
	code := func(s string) string {
		if md {
			return "`" + s + "`"
		}
		return s
	}
	h(1, "Changes from "+d.Old+" to "+d.New)
	if d.Empty() {
		fmt.Fprintln(w, "No changes.")
		return nil
	}
	if len(d.Identity) > 0 {
		h(2, "Release")
		for _, c := range d.Identity {
			fmt.Fprintf(w, "- %s: %s -> %s\n", c.Field, code(c.Old), code(c.New))
		}
		fmt.Fprintln(w)
	}
	if len(d.Fixes) > 0 {
		h(2, "Fixes in this update")
		for _, f := range d.Fixes {
			fmt.Fprintf(w, "- %s: %s\n", f.ID, strings.Join(f.Packages, ", "))
		}
		fmt.Fprintln(w)
	}
	d.textPackages(w, h, code)
	d.textComponents(w, h, code)
	if len(d.Kernel) > 0 {
		h(2, "Kernel")
		for _, k := range d.Kernel {
			if k.OldVersion != k.NewVersion {
				fmt.Fprintf(w, "- %s: %s -> %s\n", k.Arch, code(k.OldVersion), code(k.NewVersion))
			}
			if len(k.ArgsAdded)+len(k.ArgsRemoved) > 0 {
				fmt.Fprintf(w, "- %s command line: %s\n", k.Arch, plusMinus(k.ArgsAdded, k.ArgsRemoved, code))
			}
			if len(k.ModulesAdded)+len(k.ModulesRemoved) > 0 {
				fmt.Fprintf(w, "- %s modules: %s\n", k.Arch, plusMinus(k.ModulesAdded, k.ModulesRemoved, code))
			}
		}
		fmt.Fprintln(w)
	}
	heldText(w, h, "Extensions", d.Extensions, false, code)
	heldText(w, h, "Container images", d.Images, true, code)
	if len(d.Artifacts) > 0 {
		h(2, "Artifacts")
		if md {
			fmt.Fprintln(w, "| artifact | change | size | delta | files added | removed | changed |")
			fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|")
		}
		for _, a := range d.Artifacts {
			if md {
				fmt.Fprintf(w, "| %s | %s | %d | %+d | %d | %d | %d |\n", code(a.Name), a.Change, a.NewSize, a.SizeDelta, len(a.FilesAdded), len(a.FilesRemoved), len(a.FilesChanged))
			} else {
				fmt.Fprintf(w, "- %s %s: %d bytes (%+d); files +%d -%d ~%d\n", a.Name, a.Change, a.NewSize, a.SizeDelta, len(a.FilesAdded), len(a.FilesRemoved), len(a.FilesChanged))
			}
		}
		fmt.Fprintln(w)
	}
	return nil
}

func (d *Diff) textPackages(w io.Writer, h func(int, string), code func(string) string) {
	if len(d.Updated) > 0 {
		h(2, "Updated packages")
		for _, u := range d.Updated {
			fmt.Fprintf(w, "- %s (%s): %s -> %s", u.Name, u.Arch, u.From, u.To)
			if u.ToSourceRPM != "" {
				fmt.Fprintf(w, " from %s", code(u.ToSourceRPM))
			}
			fmt.Fprintln(w)
			for _, c := range u.Changelog {
				fmt.Fprintf(w, "  - %s %s\n", time.Unix(c.Time, 0).UTC().Format("2006-01-02"), c.Author)
				for _, line := range strings.Split(strings.TrimSpace(c.Text), "\n") {
					fmt.Fprintf(w, "    %s\n", line)
				}
			}
			if u.ChangelogNote != "" {
				fmt.Fprintf(w, "  (%s)\n", u.ChangelogNote)
			}
		}
		fmt.Fprintln(w)
	}
	for _, list := range []struct {
		title string
		refs  []PackageRef
	}{{"Added packages", d.Added}, {"Removed packages", d.Removed}} {
		if len(list.refs) == 0 {
			continue
		}
		h(2, list.title)
		for _, p := range list.refs {
			fmt.Fprintf(w, "- %s (%s) %s\n", p.Name, p.Arch, p.EVR)
		}
		fmt.Fprintln(w)
	}
}

func plusMinus(added, removed []string, code func(string) string) string {
	var parts []string
	for _, a := range added {
		parts = append(parts, "+"+code(a))
	}
	for _, r := range removed {
		parts = append(parts, "-"+code(r))
	}
	return strings.Join(parts, " ")
}

// textComponents says which package left or joined which component, why
// it was (or is) there and what changed on the way.
func (d *Diff) textComponents(w io.Writer, h func(int, string), code func(string) string) {
	if len(d.Components) == 0 {
		return
	}
	h(2, "Components")
	for _, c := range d.Components {
		if c.Change != "changed" {
			var names []string
			for _, m := range append(slices.Clone(c.Joined), c.Left...) {
				names = append(names, code(m.Name))
			}
			fmt.Fprintf(w, "- %s (%s): component %s, with %d packages: %s\n", c.Component, c.Arch, c.Change, len(names), strings.Join(names, ", "))
			continue
		}
		for _, m := range c.Left {
			fmt.Fprintf(w, "- %s left %s (%s): %s; %s\n", code(m.Name), c.Component, c.Arch, code(m.NEVRA), where(m.Elsewhere, "still in ", "in no other component now"))
			textWhy(w, m, "was there by", "why it left", code)
		}
		for _, m := range c.Joined {
			fmt.Fprintf(w, "- %s joined %s (%s): %s; %s\n", code(m.Name), c.Component, c.Arch, code(m.NEVRA), where(m.Elsewhere, "already in ", "in no component before"))
			textWhy(w, m, "is there by", "why it joined", code)
		}
	}
	fmt.Fprintln(w)
}

func where(list []string, some, none string) string {
	if len(list) == 0 {
		return none
	}
	return some + strings.Join(list, ", ")
}

// textWhy writes a member's chain as one line: requested "R" -> P requires
// X -> Q ...
func textWhy(w io.Writer, m Member, there, why string, code func(string) string) {
	if m.WhyNote != "" {
		fmt.Fprintf(w, "  - (%s)\n", m.WhyNote)
	}
	if m.Why == nil {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "requested %s", code(m.Why.Request))
	for i, s := range m.Why.Steps {
		if i > 0 {
			fmt.Fprintf(&b, " requires %s", code(s.Requirement))
		}
		fmt.Fprintf(&b, " -> %s", code(s.Provider))
	}
	fmt.Fprintf(w, "  - %s: %s\n", there, b.String())
	if m.Because != "" {
		fmt.Fprintf(w, "  - %s: %s\n", why, m.Because)
	}
}

// heldText writes the extensions or container images that changed, each
// with the packages that joined or left it (for an image also when it was
// added or removed as a whole).
func heldText(w io.Writer, h func(int, string), title string, list []ExtensionChange, always bool, code func(string) string) {
	if len(list) == 0 {
		return
	}
	h(2, title)
	for _, e := range list {
		fmt.Fprintf(w, "- %s (%s): %s", e.Name, e.Arch, e.Change)
		if len(e.PackagesAdded)+len(e.PackagesRemoved) > 0 && (always || e.Change == "changed") {
			fmt.Fprintf(w, ", packages %s", plusMinus(e.PackagesAdded, e.PackagesRemoved, code))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}
