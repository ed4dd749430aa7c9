package repo

// The rpm-md readers as they were before mdScanner: encoding/xml's
// DecodeElement per <package>. Kept as the reference that the streaming
// readers must agree with (rpmmd_equiv_test.go).

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nodeforge/builder/pkgbase/evr"
)

// primary.xml, one <package> element.
type refXMLPackage struct {
	Name    string      `xml:"name"`
	Arch    string      `xml:"arch"`
	Version refXMLEVR   `xml:"version"`
	Sum     xmlChecksum `xml:"checksum"`
	Time    struct {
		Build string `xml:"build,attr"`
	} `xml:"time"`
	Size struct {
		Package   string `xml:"package,attr"`
		Installed string `xml:"installed,attr"`
	} `xml:"size"`
	Location struct {
		Href string `xml:"href,attr"`
		Base string `xml:"base,attr"` // xml:base: packages hosted elsewhere
	} `xml:"location"`
	Format struct {
		License   string        `xml:"license"`
		SourceRPM string        `xml:"sourcerpm"`
		Provides  []refXMLEntry `xml:"provides>entry"`
		Requires  []refXMLEntry `xml:"requires>entry"`
		Conflicts []refXMLEntry `xml:"conflicts>entry"`
		Obsoletes []refXMLEntry `xml:"obsoletes>entry"`
		Files     []refXMLFile  `xml:"file"`
	} `xml:"format"`
}

type refXMLEVR struct {
	Epoch *string `xml:"epoch,attr"`
	Ver   string  `xml:"ver,attr"`
	Rel   string  `xml:"rel,attr"`
}

type refXMLEntry struct {
	Name  string  `xml:"name,attr"`
	Flags string  `xml:"flags,attr"`
	Epoch *string `xml:"epoch,attr"`
	Ver   string  `xml:"ver,attr"`
	Rel   string  `xml:"rel,attr"`
	Pre   string  `xml:"pre,attr"`
}

type refXMLFile struct {
	Type string `xml:"type,attr"` // "dir", "ghost" or absent
	Path string `xml:",chardata"`
}

// parsePrimary calls fn for each package with its pkgid (the checksum
// primary.xml marks pkgid="YES", which filelists.xml refers to).
func refParsePrimaryFn(r io.Reader, repoURL string, fn func(pkgid string, p *Package) error) error {
	d := newMDDecoder(r)
	if _, err := mdRootElement(d, "metadata", "a primary.xml"); err != nil {
		return err
	}
	return refEachPackage(d, "primary.xml", func(x *refXMLPackage, n, line int) error {
		p, pkgid, err := x.toPackage(repoURL)
		if err != nil {
			return fmt.Errorf("primary.xml: package %d (line %d): %w", n, line, err)
		}
		return fn(pkgid, p)
	})
}

// refEachPackage walks the <package> elements below an open root element,
// decoding one at a time (metadata files can be hundreds of megabytes) and
// passing each on with its number and line; it returns at the root's end.
func refEachPackage[T any](d *xml.Decoder, file string, fn func(x *T, n, line int) error) error {
	n := 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // the root element was not closed
			}
			return fmt.Errorf("%s: after %d packages: %w", file, n, err)
		}
		switch t := tok.(type) {
		case xml.EndElement:
			return nil
		case xml.StartElement:
			if t.Name.Local != "package" {
				if err := d.Skip(); err != nil {
					return fmt.Errorf("%s: after %d packages: %w", file, n, err)
				}
				continue
			}
			line, _ := d.InputPos()
			var x T
			if err := d.DecodeElement(&x, &t); err != nil {
				return fmt.Errorf("%s: package %d (line %d): %w", file, n+1, line, err)
			}
			n++
			if err := fn(&x, n, line); err != nil {
				return err
			}
		}
	}
}

func (x *refXMLPackage) toPackage(repoURL string) (*Package, string, error) {
	p := &Package{
		Name:      strings.TrimSpace(x.Name),
		Arch:      strings.TrimSpace(x.Arch),
		SourceRPM: strings.TrimSpace(x.Format.SourceRPM),
		License:   strings.TrimSpace(x.Format.License),
		Semantics: evr.RPM,
		Repo:      repoURL,
		Location:  strings.TrimSpace(x.Location.Href),
	}
	if p.Name == "" {
		return nil, "", errors.New("no <name>")
	}
	if p.Arch == "" {
		return nil, "", fmt.Errorf("%s: no <arch>", p.Name)
	}
	if x.Version.Ver == "" {
		return nil, "", fmt.Errorf("%s: no version/@ver", p.Name)
	}
	if p.Location == "" {
		return nil, "", fmt.Errorf("%s: no location/@href", p.Name)
	}
	if b := strings.TrimSpace(x.Location.Base); b != "" {
		p.Repo = strings.TrimSuffix(b, "/")
	}
	p.EVR = evr.EVR{Version: x.Version.Ver, Release: x.Version.Rel}
	// createrepo writes epoch="0" whether or not the package has one, so
	// 0 cannot be told from none; like dnf, treat it as none (under rpm
	// rules a missing epoch compares as 0 anyway).
	if x.Version.Epoch != nil && *x.Version.Epoch != "" {
		e, err := parseEpoch(*x.Version.Epoch)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", p.Name, err)
		}
		p.EVR.Epoch, p.EVR.HasEpoch = e, e != 0
	}
	var err error
	if p.BuildTime, err = parseMDNumber(x.Time.Build); err != nil {
		return nil, "", fmt.Errorf("%s: time/@build: %w", p.Name, err)
	}
	if p.Size, err = parseMDNumber(x.Size.Installed); err != nil {
		return nil, "", fmt.Errorf("%s: size/@installed: %w", p.Name, err)
	}
	if p.FileSize, err = parseMDNumber(x.Size.Package); err != nil {
		return nil, "", fmt.Errorf("%s: size/@package: %w", p.Name, err)
	}
	sum := mdChecksum(&x.Sum)
	switch sum.Type {
	case "sha256":
		p.SHA256 = sum.Value
	case "sha", "sha1":
		p.SHA1 = sum.Value
	case "md5":
		p.MD5 = sum.Value
	}
	for _, dl := range []struct {
		dst  *[]Dep
		src  []refXMLEntry
		what string
	}{
		{&p.Provides, x.Format.Provides, "provides"},
		{&p.Requires, x.Format.Requires, "requires"},
		{&p.Conflicts, x.Format.Conflicts, "conflicts"},
		{&p.Obsoletes, x.Format.Obsoletes, "obsoletes"},
	} {
		for _, e := range dl.src {
			dep, err := e.toDep()
			if err != nil {
				return nil, "", fmt.Errorf("%s: %s: %w", p.Name, dl.what, err)
			}
			*dl.dst = append(*dl.dst, dep)
		}
	}
	for _, f := range x.Format.Files {
		if f.Path != "" {
			p.Files = append(p.Files, f.Path)
		}
	}
	return p, sum.Value, nil
}

func (e *refXMLEntry) toDep() (Dep, error) {
	if e.Name == "" {
		return Dep{}, errors.New("rpm:entry without a name")
	}
	dep := Dep{Name: e.Name}
	if e.Flags != "" {
		f, ok := senseFlags[e.Flags]
		if !ok {
			return Dep{}, fmt.Errorf("%s: unknown flags %q", e.Name, e.Flags)
		}
		dep.Flags = f
	}
	if e.Pre == "1" || e.Pre == "true" {
		dep.Flags |= evr.FlagPrereq
	}
	dep.Version = refDepVersion(e.Epoch, e.Ver, e.Rel)
	return dep, nil
}

// depVersion renders [epoch:]ver[-rel]. createrepo_c writes epoch="0" for
// every versioned dependency whether or not it had one, so (like libsolv)
// epoch 0 is dropped; under rpm's rules a missing epoch compares as 0 anyway.
// A version that itself looks like "N:..." keeps an explicit "0:" so it
// cannot be misread as an epoch.
func refDepVersion(epoch *string, ver, rel string) string {
	e := ""
	if epoch != nil && *epoch != "0" {
		e = *epoch
	}
	if ver == "" && rel == "" {
		if e == "" {
			return ""
		}
		return e + ":"
	}
	s := ver
	if rel != "" {
		s += "-" + rel
	}
	if e != "" {
		return e + ":" + s
	}
	if i := strings.IndexFunc(ver, func(r rune) bool { return r < '0' || r > '9' }); i > 0 && ver[i] == ':' {
		return "0:" + s
	}
	return s
}

// filelists.xml, one <package> element.
type refXMLFilelistsPackage struct {
	PkgID string       `xml:"pkgid,attr"`
	Name  string       `xml:"name,attr"`
	Arch  string       `xml:"arch,attr"`
	Files []refXMLFile `xml:"file"`
}

// ParseFilelists reads filelists.xml (decompressed) one <package> at a time
// and calls fn with each package's pkgid, name, arch and full file list
// (directories and ghosts included). An error from fn stops the parse and is
// returned as is.
func refParseFilelists(r io.Reader, fn func(pkgid, name, arch string, files []string) error) error {
	d := newMDDecoder(r)
	if _, err := mdRootElement(d, "filelists", "a filelists.xml"); err != nil {
		return err
	}
	return refEachPackage(d, "filelists.xml", func(x *refXMLFilelistsPackage, n, line int) error {
		pkgid := strings.ToLower(strings.TrimSpace(x.PkgID))
		if pkgid == "" {
			return fmt.Errorf("filelists.xml: package %d (line %d, %q): no pkgid", n, line, x.Name)
		}
		files := make([]string, 0, len(x.Files))
		for _, f := range x.Files {
			if f.Path != "" {
				files = append(files, f.Path)
			}
		}
		return fn(pkgid, x.Name, x.Arch, files)
	})
}
