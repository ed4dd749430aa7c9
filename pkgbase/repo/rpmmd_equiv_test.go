package repo

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/nodeforge/builder/pkgbase/evr"
)

// The streaming readers must give what encoding/xml's decoding gave
// (rpmmd_ref_test.go): the same packages, or an error where it failed.

type primaryResult struct {
	pkgs   []*Package
	pkgids []string
	err    error
}

func parsePrimaryBoth(data []byte) (got, want primaryResult) {
	got.err = parsePrimary(bytes.NewReader(data), "file:///r", func(id string, p *Package) error {
		got.pkgs, got.pkgids = append(got.pkgs, p), append(got.pkgids, id)
		return nil
	})
	want.err = refParsePrimaryFn(bytes.NewReader(data), "file:///r", func(id string, p *Package) error {
		want.pkgs, want.pkgids = append(want.pkgs, p), append(want.pkgids, id)
		return nil
	})
	return got, want
}

type flRecord struct {
	pkgid, name, arch string
	files             []string
}

type filelistsResult struct {
	recs []flRecord
	err  error
}

func parseFilelistsBoth(data []byte) (got, want filelistsResult) {
	got.err = ParseFilelists(bytes.NewReader(data), func(id, name, arch string, files []string) error {
		got.recs = append(got.recs, flRecord{id, name, arch, files})
		return nil
	})
	want.err = refParseFilelists(bytes.NewReader(data), func(id, name, arch string, files []string) error {
		want.recs = append(want.recs, flRecord{id, name, arch, files})
		return nil
	})
	return got, want
}

// checkPrimarySame fails unless both readers agree on data: both fail, or
// both give the same packages (up to the error, the packages read before
// it are not compared: the old reader stopped at the same package).
func checkPrimarySame(t *testing.T, what string, data []byte) {
	t.Helper()
	got, want := parsePrimaryBoth(data)
	if (got.err == nil) != (want.err == nil) {
		t.Fatalf("%s: streaming reader: %v; encoding/xml: %v\n%q", what, got.err, want.err, truncate(data))
	}
	if got.err != nil {
		return
	}
	if !reflect.DeepEqual(got.pkgids, want.pkgids) {
		t.Fatalf("%s: pkgids %q, want %q", what, got.pkgids, want.pkgids)
	}
	if len(got.pkgs) != len(want.pkgs) {
		t.Fatalf("%s: %d packages, want %d", what, len(got.pkgs), len(want.pkgs))
	}
	for i := range got.pkgs {
		if !reflect.DeepEqual(got.pkgs[i], want.pkgs[i]) {
			t.Fatalf("%s: package %d:\n got %#v\nwant %#v\n%q", what, i, got.pkgs[i], want.pkgs[i], truncate(data))
		}
	}
}

func checkFilelistsSame(t *testing.T, what string, data []byte) {
	t.Helper()
	got, want := parseFilelistsBoth(data)
	if (got.err == nil) != (want.err == nil) {
		t.Fatalf("%s: streaming reader: %v; encoding/xml: %v\n%q", what, got.err, want.err, truncate(data))
	}
	if got.err == nil && !reflect.DeepEqual(got.recs, want.recs) {
		t.Fatalf("%s:\n got %#v\nwant %#v", what, got.recs, want.recs)
	}
}

func truncate(b []byte) []byte {
	if len(b) > 2000 {
		return b[:2000]
	}
	return b
}

// readCorpusFile reads a seed in the go test fuzz v1 format.
func readCorpusFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSpace(string(b))
	s, ok := strings.CutPrefix(s, "go test fuzz v1\n[]byte(")
	if !ok || !strings.HasSuffix(s, ")") {
		t.Fatalf("%s: not a fuzz corpus file", path)
	}
	v, err := strconv.Unquote(strings.TrimSuffix(s, ")"))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(v)
}

func gunzipFile(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRPMMDReadersAgreeOnFixtures(t *testing.T) {
	var n int
	for _, dir := range []string{"FuzzPrimary", "FuzzPrimaryEquiv"} {
		files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", dir, "*"))
		for _, f := range files {
			checkPrimarySame(t, f, readCorpusFile(t, f))
			n++
		}
	}
	for _, dir := range []string{"FuzzFilelists", "FuzzFilelistsEquiv"} {
		files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", dir, "*"))
		for _, f := range files {
			checkFilelistsSame(t, f, readCorpusFile(t, f))
			n++
		}
	}
	prim, _ := filepath.Glob(filepath.Join("testdata", "rpmmd", "repo", "repodata", "*-primary.xml.gz"))
	fl, _ := filepath.Glob(filepath.Join("testdata", "rpmmd", "repo", "repodata", "*-filelists.xml.gz"))
	if len(prim) != 1 || len(fl) != 1 {
		t.Fatalf("fixture repository: %q %q", prim, fl)
	}
	p := gunzipFile(t, prim[0])
	checkPrimarySame(t, prim[0], p)
	checkFilelistsSame(t, fl[0], gunzipFile(t, fl[0]))
	if got, _ := parsePrimaryBoth(p); got.err != nil || len(got.pkgs) == 0 {
		t.Fatalf("fixture: %v, %d packages", got.err, len(got.pkgs))
	}
	if n < 5 {
		t.Fatalf("only %d corpus files", n)
	}
}

// mdTricky builds primary.xml documents from random pieces that exercise
// what encoding/xml's decoding did: prefixes, entities, character
// references, CDATA, comments, processing instructions, CRLF, repeated
// elements and attributes, unknown elements, non-ASCII text.
type mdTricky struct {
	r *rand.Rand
	b strings.Builder
}

var mdTrickyText = []string{"a", "b-1.0", " x ", "/usr/bin/a", "&amp;", "&lt;", "&gt;", "&quot;", "&apos;", "&#65;", "&#x42;",
	"é", "日本", "\r\n", "\r", "\t", "<![CDATA[c<d]]>", "<!-- c -->", "<?pi x?>", "0", "1", "-1", "EQ", "GE", "LT", "sha256", "SHA1",
	"ABCDEF", "99999999999", "4294967295", "1:2", "7:x", "]", "]]", "\u00a0", "&#x10FFFF;", "&#xD800;"}

func (g *mdTricky) text() string {
	var s strings.Builder
	if g.r.IntN(20) > 0 {
		s.WriteString([]string{"a", "b.1", "x86_64", "1.0"}[g.r.IntN(4)])
	}
	for range g.r.IntN(3) {
		s.WriteString(mdTrickyText[g.r.IntN(len(mdTrickyText))])
	}
	return s.String()
}

func (g *mdTricky) attrValue() string {
	s := g.text()
	if strings.ContainsAny(s, "<") {
		s = strings.NewReplacer("<", "&lt;").Replace(s)
	}
	q := `"`
	if g.r.IntN(4) == 0 {
		q = "'"
	}
	return q + strings.ReplaceAll(s, q, map[string]string{`"`: "&quot;", "'": "&apos;"}[q]) + q
}

// attrValueFor gives mostly what the attribute should hold, so that most
// documents are valid, and sometimes anything.
func (g *mdTricky) attrValueFor(a string) string {
	if g.r.IntN(10) == 0 {
		return g.attrValue()
	}
	switch a {
	case "epoch", "build", "file", "package", "installed", "archive", "start", "end":
		return []string{`"0"`, `"1"`, `" 12 "`, `'7'`, `""`}[g.r.IntN(5)]
	case "flags":
		return []string{`"EQ"`, `"GE"`, `"LT"`, `"LE"`, `"GT"`, `""`}[g.r.IntN(6)]
	case "pre":
		return []string{`"1"`, `"true"`, `"0"`}[g.r.IntN(3)]
	case "type":
		return []string{`"sha256"`, `"SHA"`, `"md5"`, `"rpm"`, `"dir"`}[g.r.IntN(5)]
	}
	return g.attrValue()
}

func (g *mdTricky) prefix() string {
	switch g.r.IntN(8) {
	case 0:
		return "rpm:"
	case 1:
		return "x:"
	}
	return ""
}

func (g *mdTricky) elem(name string, attrs []string, body func()) {
	p := g.prefix()
	g.b.WriteString("<" + p + name)
	for _, a := range attrs {
		if g.r.IntN(20) == 0 {
			continue
		}
		sep := " "
		if g.r.IntN(5) == 0 {
			sep = "\n\t"
		}
		p := g.prefix()
		if strings.Contains(a, ":") {
			p = ""
		}
		g.b.WriteString(sep + p + a + "=" + g.attrValueFor(a))
		if g.r.IntN(10) == 0 { // a repeated attribute: the last wins
			g.b.WriteString(" " + a + "=" + g.attrValueFor(a))
		}
	}
	if body == nil && g.r.IntN(2) == 0 {
		g.b.WriteString("/>")
		return
	}
	g.b.WriteString(">")
	if body != nil {
		body()
	} else if g.r.IntN(2) == 0 {
		g.b.WriteString(strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(g.text()))
	}
	g.b.WriteString("</" + p + name + ">")
}

func (g *mdTricky) textElem(name string) {
	g.elem(name, nil, func() {
		g.b.WriteString(g.text())
		if g.r.IntN(8) == 0 {
			g.elem("child", []string{"a"}, func() { g.b.WriteString("ignored") })
			g.b.WriteString(g.text())
		}
	})
}

func (g *mdTricky) noise() {
	switch g.r.IntN(12) {
	case 0:
		g.b.WriteString("<!-- noise -->")
	case 1:
		g.b.WriteString("<unknown a=\"1\"><name>no</name></unknown>")
	case 2:
		g.b.WriteString("\n  ")
	case 3:
		g.b.WriteString("<?pi data?>")
	}
}

func (g *mdTricky) primary(npkg int) []byte {
	g.b.Reset()
	g.b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	if g.r.IntN(5) == 0 {
		g.b.WriteString("<!DOCTYPE metadata [<!ENTITY x 'y'> <!-- c --> ]>\n")
	}
	g.b.WriteString(`<metadata xmlns="http://linux.duke.edu/metadata/common" xmlns:rpm="http://linux.duke.edu/metadata/rpm" packages="3">`)
	for range npkg {
		g.noise()
		g.elem("package", []string{"type"}, func() {
			for range 1 + g.r.IntN(2) {
				for _, k := range g.r.Perm(9) {
					g.noise()
					switch k {
					case 0:
						g.textElem("name")
					case 1:
						g.textElem("arch")
					case 2:
						g.elem("version", []string{"epoch", "ver", "rel"}, nil)
					case 3:
						g.elem("checksum", []string{"type", "pkgid"}, func() { g.b.WriteString(g.text()) })
					case 4:
						g.elem("time", []string{"file", "build"}, nil)
					case 5:
						g.elem("size", []string{"package", "installed", "archive"}, nil)
					case 6:
						g.elem("location", []string{"href", "xml:base"}, nil)
					case 7:
						g.textElem("summary")
					case 8:
						g.elem("format", nil, g.format)
					}
				}
			}
		})
	}
	g.b.WriteString("</metadata>\n")
	return []byte(g.b.String())
}

func (g *mdTricky) format() {
	for range 1 + g.r.IntN(8) {
		g.noise()
		switch g.r.IntN(7) {
		case 0:
			g.textElem("license")
		case 1:
			g.textElem("sourcerpm")
		case 2:
			g.textElem("file")
		case 3:
			g.elem("header-range", []string{"start", "end"}, nil)
		default:
			list := []string{"provides", "requires", "conflicts", "obsoletes", "recommends"}[g.r.IntN(5)]
			g.elem(list, nil, func() {
				for range g.r.IntN(5) {
					g.noise()
					g.elem("entry", []string{"name", "flags", "epoch", "ver", "rel", "pre"}, nil)
				}
			})
		}
	}
}

func (g *mdTricky) filelists(npkg int) []byte {
	g.b.Reset()
	g.b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<filelists packages=\"2\">")
	for range npkg {
		g.noise()
		g.elem("package", []string{"pkgid", "name", "arch"}, func() {
			g.elem("version", []string{"epoch", "ver", "rel"}, nil)
			for range g.r.IntN(5) {
				g.noise()
				g.textElem("file")
			}
		})
	}
	g.b.WriteString("</filelists>")
	return []byte(g.b.String())
}

// mutate damages a document a little: a byte changed, dropped or
// duplicated, or the document cut short.
func mutate(r *rand.Rand, b []byte) []byte {
	b = bytes.Clone(b)
	if len(b) == 0 {
		return b
	}
	i := r.IntN(len(b))
	switch r.IntN(5) {
	case 0:
		const pick = "<>&;\"'/=: \x00\xff]!?-x"
		b[i] = pick[r.IntN(len(pick))]
	case 1:
		b = append(b[:i], b[i+1:]...)
	case 2:
		b = append(b[:i+1], b[i:]...)
	case 3:
		b = b[:i]
	case 4:
		j := r.IntN(len(b))
		b[i], b[j] = b[j], b[i]
	}
	return b
}

func TestRPMMDReadersAgreeOnTrickyInput(t *testing.T) {
	g := &mdTricky{r: rand.New(rand.NewPCG(16, 1))}
	rounds := 1500
	if testing.Short() {
		rounds = 200
	}
	var ok int
	for i := range rounds {
		doc := g.primary(1 + g.r.IntN(3))
		checkPrimarySame(t, fmt.Sprintf("primary %d", i), doc)
		if got, _ := parsePrimaryBoth(doc); got.err == nil {
			ok++
		}
		checkPrimarySame(t, fmt.Sprintf("primary %d, damaged", i), mutate(g.r, doc))
		fl := g.filelists(1 + g.r.IntN(3))
		checkFilelistsSame(t, fmt.Sprintf("filelists %d", i), fl)
		checkFilelistsSame(t, fmt.Sprintf("filelists %d, damaged", i), mutate(g.r, fl))
	}
	// Enough documents must be valid for the comparison to mean something.
	if ok < rounds/20 {
		t.Errorf("only %d of %d documents parsed", ok, rounds)
	}
	t.Logf("%d of %d primary documents parsed", ok, rounds)
}

// FuzzPrimaryEquiv: on any bytes, the streaming primary.xml reader agrees
// with encoding/xml's decoding. Seeds: testdata/fuzz/FuzzPrimaryEquiv/.
func FuzzPrimaryEquiv(f *testing.F) {
	g := &mdTricky{r: rand.New(rand.NewPCG(1, 2))}
	for range 4 {
		f.Add(g.primary(2))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkPrimarySame(t, "fuzz", data)
	})
}

// FuzzFilelistsEquiv is FuzzPrimaryEquiv for filelists.xml.
func FuzzFilelistsEquiv(f *testing.F) {
	g := &mdTricky{r: rand.New(rand.NewPCG(3, 4))}
	for range 4 {
		f.Add(g.filelists(2))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFilelistsSame(t, "fuzz", data)
	})
}

// TestRPMMDReadersAgreeOnLargeRepository: a few thousand packages written
// by WriteRPMMD (with names and paths that need escaping), read by both.
func TestRPMMDReadersAgreeOnLargeRepository(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	odd := []string{"", "a&b", "<x>", `"q"`, "it's", "é日本", "\t"}
	word := func() string {
		return fmt.Sprintf("w%d%s", r.IntN(500), odd[r.IntN(len(odd))])
	}
	var pkgs []*Package
	for i := range 3000 {
		p := &Package{Name: fmt.Sprintf("pkg%d%s", i, odd[r.IntN(len(odd))]), Arch: []string{"x86_64", "noarch"}[r.IntN(2)],
			EVR:     evr.EVR{Version: fmt.Sprintf("%d.%d", r.IntN(9), r.IntN(20)), Release: fmt.Sprintf("%d.fc40", 1+r.IntN(3))},
			License: "MIT and " + word(), SourceRPM: fmt.Sprintf("src%d.src.rpm", i), BuildTime: r.Int64N(1 << 40),
			Size: r.Int64N(1 << 30), FileSize: r.Int64N(1 << 20), SHA256: fmt.Sprintf("%064x", i),
			Location: fmt.Sprintf("Packages/p/pkg%d.rpm", i), Semantics: evr.RPM}
		if r.IntN(4) == 0 {
			p.EVR.Epoch, p.EVR.HasEpoch = 1+r.IntN(3), true
		}
		for k, dst := range []*[]Dep{&p.Provides, &p.Requires, &p.Conflicts, &p.Obsoletes} {
			for range r.IntN([]int{8, 15, 2, 2}[k]) {
				d := Dep{Name: word()}
				switch r.IntN(4) {
				case 0:
					d.Flags, d.Version = evr.FlagGreater|evr.FlagEqual, fmt.Sprintf("%d.%d-%d", r.IntN(9), r.IntN(9), r.IntN(9))
				case 1:
					d.Flags, d.Version = evr.FlagEqual, fmt.Sprintf("%d:%d", 1+r.IntN(3), r.IntN(9))
				case 2:
					d.Flags = evr.FlagPrereq
				}
				*dst = append(*dst, d)
			}
		}
		for range r.IntN(30) {
			p.Files = append(p.Files, []string{"/usr/bin/", "/etc/", "/usr/share/doc/"}[r.IntN(3)]+word())
		}
		pkgs = append(pkgs, p)
	}
	dir := t.TempDir()
	if err := WriteRPMMD(dir, pkgs, RPMMDWriteOptions{}); err != nil {
		t.Fatal(err)
	}
	prim, _ := filepath.Glob(filepath.Join(dir, "repodata", "*-primary.xml.gz"))
	fl, _ := filepath.Glob(filepath.Join(dir, "repodata", "*-filelists.xml.gz"))
	p := gunzipFile(t, prim[0])
	checkPrimarySame(t, "primary", p)
	checkFilelistsSame(t, "filelists", gunzipFile(t, fl[0]))
	got, _ := parsePrimaryBoth(p)
	if got.err != nil || len(got.pkgs) != len(pkgs) {
		t.Fatalf("%v, %d packages", got.err, len(got.pkgs))
	}
}
