package repo

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/pkgbase/evr"
)

// RPMMDWriteOptions tunes WriteRPMMD.
type RPMMDWriteOptions struct {
	// Compression of primary.xml and filelists.xml: "gz" (the default,
	// what every dnf reads), "zst" or "xz".
	Compression string
	// Revision is repomd.xml's <revision> and every <timestamp>
	// (0: 1700000000), so the output depends only on the packages.
	Revision int64
}

// WriteRPMMD writes an rpm-md index of pkgs under dir the way createrepo_c
// lays it out: repodata/<sha256>-primary.xml.<ext> (with primary's subset
// of files, PrimaryFile), repodata/<sha256>-filelists.xml.<ext> (every
// file) and repodata/repomd.xml listing both with their sizes and sha256
// checksums, compressed and open. Each package must carry SHA256 (its
// pkgid) and Location; Repo, Semantics and the Disttag are not written.
// A dependency's Version is written as epoch, ver and rel attributes
// (createrepo_c's epoch="0" when it has none). The metadata files are
// written before repomd.xml, each atomically. It is the reader's mirror
// image: ReadRPMMD gives back pkgs (sorted) with their full file lists.
// Meant for tests and benchmarks: it does not read the .rpm files.
func WriteRPMMD(dir string, pkgs []*Package, opts RPMMDWriteOptions) error {
	ext := opts.Compression
	if ext == "" {
		ext = "gz"
	}
	rev := opts.Revision
	if rev == 0 {
		rev = 1700000000
	}
	var prim, fl bytes.Buffer
	fmt.Fprintf(&prim, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<metadata xmlns=\"http://linux.duke.edu/metadata/common\" xmlns:rpm=\"http://linux.duke.edu/metadata/rpm\" packages=\"%d\">\n", len(pkgs))
	fmt.Fprintf(&fl, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<filelists xmlns=\"http://linux.duke.edu/metadata/filelists\" packages=\"%d\">\n", len(pkgs))
	for _, p := range pkgs {
		if p.SHA256 == "" || p.Location == "" || p.Name == "" || p.Arch == "" || p.EVR.Version == "" {
			return fmt.Errorf("write rpm-md: package %q: name, arch, version, location and sha256 are required", p.NEVRA())
		}
		writePrimaryPackage(&prim, p)
		fl.WriteString("<package pkgid=\"")
		xmlEscape(&fl, p.SHA256)
		fl.WriteString("\" name=\"")
		xmlEscape(&fl, p.Name)
		fl.WriteString("\" arch=\"")
		xmlEscape(&fl, p.Arch)
		fl.WriteString("\">\n  ")
		writeVersion(&fl, p.EVR)
		fl.WriteString("\n")
		for _, f := range p.Files {
			fl.WriteString("  <file>")
			xmlEscape(&fl, f)
			fl.WriteString("</file>\n")
		}
		fl.WriteString("</package>\n")
	}
	prim.WriteString("</metadata>\n")
	fl.WriteString("</filelists>\n")

	rd := filepath.Join(dir, "repodata")
	if err := os.MkdirAll(rd, 0o755); err != nil {
		return err
	}
	var repomd bytes.Buffer
	fmt.Fprintf(&repomd, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<repomd xmlns=\"http://linux.duke.edu/metadata/repo\" xmlns:rpm=\"http://linux.duke.edu/metadata/rpm\">\n  <revision>%d</revision>\n", rev)
	for _, f := range []struct {
		typ  string
		open []byte
	}{{"primary", prim.Bytes()}, {"filelists", fl.Bytes()}} {
		z, err := compressMD(ext, f.open)
		if err != nil {
			return fmt.Errorf("write rpm-md: %s: %w", f.typ, err)
		}
		zs, osum := sha256.Sum256(z), sha256.Sum256(f.open)
		name := hex.EncodeToString(zs[:]) + "-" + f.typ + ".xml." + ext
		if err := atomicfile.Write(filepath.Join(rd, name), z, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(&repomd, "  <data type=\"%s\">\n    <checksum type=\"sha256\">%x</checksum>\n    <open-checksum type=\"sha256\">%x</open-checksum>\n    <location href=\"repodata/%s\"/>\n    <timestamp>%d</timestamp>\n    <size>%d</size>\n    <open-size>%d</open-size>\n  </data>\n",
			f.typ, zs, osum, name, rev, len(z), len(f.open))
	}
	repomd.WriteString("</repomd>\n")
	return atomicfile.Write(filepath.Join(rd, "repomd.xml"), repomd.Bytes(), 0o644)
}

func compressMD(ext string, b []byte) ([]byte, error) {
	var out bytes.Buffer
	var w io.WriteCloser
	var err error
	switch ext {
	case "gz":
		w, err = gzip.NewWriterLevel(&out, gzip.DefaultCompression)
	case "zst":
		w, err = zstd.NewWriter(&out, zstd.WithEncoderConcurrency(1))
	case "xz":
		w, err = xz.NewWriter(&out)
	default:
		return nil, fmt.Errorf("unknown compression %q (want gz, zst or xz)", ext)
	}
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func writeVersion(b *bytes.Buffer, e evr.EVR) {
	b.WriteString("<version epoch=\"")
	b.WriteString(strconv.Itoa(e.Epoch))
	b.WriteString("\" ver=\"")
	xmlEscape(b, e.Version)
	b.WriteString("\" rel=\"")
	xmlEscape(b, e.Release)
	b.WriteString("\"/>")
}

func writePrimaryPackage(b *bytes.Buffer, p *Package) {
	b.WriteString("<package type=\"rpm\">\n  <name>")
	xmlEscape(b, p.Name)
	b.WriteString("</name>\n  <arch>")
	xmlEscape(b, p.Arch)
	b.WriteString("</arch>\n  ")
	writeVersion(b, p.EVR)
	b.WriteString("\n  <checksum type=\"sha256\" pkgid=\"YES\">")
	xmlEscape(b, p.SHA256)
	b.WriteString("</checksum>\n  <summary>")
	xmlEscape(b, p.Name)
	b.WriteString(" package</summary>\n  <description>The ")
	xmlEscape(b, p.Name)
	b.WriteString(" package.</description>\n  <packager></packager>\n  <url></url>\n")
	fmt.Fprintf(b, "  <time file=\"%d\" build=\"%d\"/>\n  <size package=\"%d\" installed=\"%d\" archive=\"%d\"/>\n  <location href=\"",
		p.BuildTime, p.BuildTime, p.FileSize, p.Size, p.Size)
	xmlEscape(b, p.Location)
	b.WriteString("\"/>\n  <format>\n    <rpm:license>")
	xmlEscape(b, p.License)
	b.WriteString("</rpm:license>\n    <rpm:vendor></rpm:vendor>\n    <rpm:group>Unspecified</rpm:group>\n    <rpm:buildhost>localhost</rpm:buildhost>\n    <rpm:sourcerpm>")
	xmlEscape(b, p.SourceRPM)
	b.WriteString("</rpm:sourcerpm>\n    <rpm:header-range start=\"4504\" end=\"8000\"/>\n")
	for _, l := range []struct {
		tag  string
		deps []Dep
	}{{"provides", p.Provides}, {"requires", p.Requires}, {"conflicts", p.Conflicts}, {"obsoletes", p.Obsoletes}} {
		if len(l.deps) == 0 {
			continue
		}
		b.WriteString("    <rpm:" + l.tag + ">\n")
		for _, d := range l.deps {
			writeEntry(b, d)
		}
		b.WriteString("    </rpm:" + l.tag + ">\n")
	}
	for _, f := range p.Files {
		if PrimaryFile(f) {
			b.WriteString("    <file>")
			xmlEscape(b, f)
			b.WriteString("</file>\n")
		}
	}
	b.WriteString("  </format>\n</package>\n")
}

// flagNames are rpm-md's names for rpm's sense flags (senseFlags' inverse).
var flagNames = map[uint32]string{
	evr.FlagEqual:                   "EQ",
	evr.FlagLess:                    "LT",
	evr.FlagGreater:                 "GT",
	evr.FlagLess | evr.FlagEqual:    "LE",
	evr.FlagGreater | evr.FlagEqual: "GE",
}

func writeEntry(b *bytes.Buffer, d Dep) {
	b.WriteString("      <rpm:entry name=\"")
	xmlEscape(b, d.Name)
	b.WriteString("\"")
	if f, ok := flagNames[d.Flags&evr.FlagSense]; ok && d.Version != "" {
		e := evr.Parse(d.Version)
		fmt.Fprintf(b, " flags=\"%s\" epoch=\"%d\" ver=\"", f, e.Epoch)
		xmlEscape(b, e.Version)
		b.WriteString("\"")
		if e.Release != "" {
			b.WriteString(" rel=\"")
			xmlEscape(b, e.Release)
			b.WriteString("\"")
		}
	}
	if d.Flags&evr.FlagPrereq != 0 {
		b.WriteString(" pre=\"1\"")
	}
	b.WriteString("/>\n")
}

// xmlEscape writes s with XML's five special characters escaped.
func xmlEscape(b *bytes.Buffer, s string) {
	for {
		i := strings.IndexAny(s, "&<>\"'")
		if i < 0 {
			b.WriteString(s)
			return
		}
		b.WriteString(s[:i])
		switch s[i] {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&apos;")
		}
		s = s[i+1:]
	}
}
