// Package direntries names what a directory holds, for the messages that
// refuse to write over it.
package direntries

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
)

// Describe names up to five entries, quoted, directories with a trailing
// slash, and says how many there are when there are more.
func Describe(ents []fs.DirEntry) string {
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
		if e.IsDir() {
			names[i] += "/"
		}
	}
	return DescribeNames(names)
}

// DescribeNames is Describe of names given as they are to be shown
// (paths, directories with their trailing slash).
func DescribeNames(names []string) string {
	var quoted []string
	for _, n := range names[:min(5, len(names))] {
		quoted = append(quoted, fmt.Sprintf("%q", n))
	}
	s := strings.Join(quoted, ", ")
	if len(names) > 5 {
		s = fmt.Sprintf("%d entries (%s, ...)", len(names), s)
	}
	return s
}

// Unlisted lists what is under root that is not listed: files are the
// regular files expected (slash-separated paths relative to root), dirs
// the directories, each with its ancestors. What it returns is relative
// to root, a directory with a trailing slash and not looked into, in
// walk order. What is listed but missing is no matter.
func Unlisted(root string, files, dirs map[string]bool) ([]string, error) {
	known := map[string]bool{}
	for _, set := range []map[string]bool{files, dirs} {
		for p := range set {
			for d := path.Dir(p); d != "."; d = path.Dir(d) {
				known[d] = true
			}
		}
	}
	var out []string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case e.IsDir() && (dirs[rel] || known[rel]):
			return nil
		case e.Type().IsRegular() && files[rel]:
			return nil
		case e.IsDir():
			out = append(out, rel+"/")
			return fs.SkipDir
		}
		out = append(out, rel)
		return nil
	})
	return out, err
}
