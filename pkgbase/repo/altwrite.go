package repo

import (
	"bytes"
	"crypto"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/packet"
	"github.com/ulikunitz/xz"
	"golang.org/x/crypto/blake2b"

	"github.com/nodeforge/builder/internal/atomicfile"
	"github.com/nodeforge/builder/pkgbase/rpmfile"
	"github.com/nodeforge/builder/pkgbase/rpmhdr"
)

// ALTDist describes one dist of an apt-rpm repository (e.g. DIR/alt/x86_64)
// whose packages are already in place, for WriteALTDist to index.
type ALTDist struct {
	// Dir is the dist directory; base/ is written under it.
	Dir string
	// Components maps a component name to its .rpm files, which must lie
	// directly in Dir/RPMS.<component>/.
	Components map[string][]string
	// Archs are listed in the release's Architectures field.
	Archs []string
	// Origin, Label and Suite are copied into the release (omitted when empty).
	Origin, Label, Suite string
	// Codename defaults to Date as Unix seconds, as girar writes it.
	Codename string
	// Date is the release date. It is required: it is also the creation time
	// of the signature, so the same input always gives the same bytes.
	Date time.Time
	// Signer signs base/release (detached, armored, appended); nil leaves it
	// unsigned. Its signing key must be valid at Date.
	Signer *openpgp.Entity
	// RequiredPaths are more paths to keep in the stripped file lists: file
	// dependencies of packages in other dists (a noarch package requiring
	// a file of the x86_64 dist). Those of this dist's packages are added
	// automatically.
	RequiredPaths []string
}

// indexKeepTags are the header tags an index entry keeps: the set ALT's
// genpkglist carries (see the real p10 index in the shared fixtures), plus
// LONGSIZE. Per-file arrays other than the name triple are dropped because
// they would no longer line up with the stripped file list; changelog,
// scriptlets, license, URL and vendor are not needed to resolve.
var indexKeepTags = map[uint32]bool{
	rpmhdr.TagHeaderI18NTable: true,
	rpmhdr.TagName:            true, rpmhdr.TagVersion: true, rpmhdr.TagRelease: true, rpmhdr.TagEpoch: true,
	rpmhdr.TagSummary: true, rpmhdr.TagDescription: true,
	rpmhdr.TagBuildTime: true, rpmhdr.TagSize: true, rpmhdr.TagLongSize: true,
	rpmhdr.TagPackager: true, rpmhdr.TagGroup: true, rpmhdr.TagArch: true, rpmhdr.TagSourceRPM: true,
	rpmhdr.TagProvideName: true, rpmhdr.TagProvideFlags: true, rpmhdr.TagProvideVersion: true,
	rpmhdr.TagRequireName: true, rpmhdr.TagRequireFlags: true, rpmhdr.TagRequireVersion: true,
	rpmhdr.TagConflictName: true, rpmhdr.TagConflictFlags: true, rpmhdr.TagConflictVersion: true,
	rpmhdr.TagObsoleteName: true, rpmhdr.TagObsoleteFlags: true, rpmhdr.TagObsoleteVersion: true,
	rpmhdr.TagDistTag: true,
}

// altPkg is one package read for the index.
type altPkg struct {
	file    string // path as given
	name    string // file name under RPMS.<comp>/
	hdr     *rpmhdr.Header
	size    int64
	md5     string
	blake2b string
}

// WriteALTDist writes base/pkglist.<comp>.xz for every component, then
// base/release.<comp> and finally the (optionally signed) base/release, so
// a reader never finds a release that names an index not yet written. Every
// file goes through a temporary file and a rename. The output depends only
// on d and the package bytes.
func WriteALTDist(d ALTDist) error {
	if d.Dir == "" {
		return errors.New("alt dist: no directory given")
	}
	if d.Date.IsZero() {
		return fmt.Errorf("alt dist %s: a release date is required (it makes the output reproducible)", d.Dir)
	}
	if len(d.Components) == 0 {
		return fmt.Errorf("alt dist %s: no components", d.Dir)
	}
	if len(d.Archs) == 0 {
		return fmt.Errorf("alt dist %s: no architectures", d.Dir)
	}
	comps := make([]string, 0, len(d.Components))
	for c := range d.Components {
		if c == "" || strings.ContainsAny(c, "/\\ \t\n") || c == "." || c == ".." {
			return fmt.Errorf("alt dist %s: component name %q is not valid", d.Dir, c)
		}
		comps = append(comps, c)
	}
	sort.Strings(comps)

	pkgs := map[string][]*altPkg{}
	required := map[string]bool{}
	for _, p := range d.RequiredPaths {
		required[p] = true
	}
	for _, comp := range comps {
		dir := filepath.Join(d.Dir, "RPMS."+comp)
		seen := map[string]string{}
		for _, f := range d.Components[comp] {
			if err := altInDir(f, dir); err != nil {
				return err
			}
			p, err := readALTPkg(f)
			if err != nil {
				return err
			}
			if prev, dup := seen[p.name]; dup {
				return fmt.Errorf("alt dist %s: component %s lists %s twice (%s and %s)", d.Dir, comp, p.name, prev, f)
			}
			seen[p.name] = f
			for _, r := range p.hdr.Strings(rpmhdr.TagRequireName) {
				if strings.HasPrefix(r, "/") {
					required[r] = true
				}
			}
			pkgs[comp] = append(pkgs[comp], p)
		}
		sort.Slice(pkgs[comp], func(i, j int) bool { return pkgs[comp][i].name < pkgs[comp][j].name })
	}

	base := filepath.Join(d.Dir, "base")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return fmt.Errorf("alt dist: %w", err)
	}
	codename := d.Codename
	if codename == "" {
		codename = strconv.FormatInt(d.Date.Unix(), 10)
	}
	var sums []altSum
	for _, comp := range comps {
		s, err := writeALTPkglist(base, comp, pkgs[comp], required)
		if err != nil {
			return err
		}
		sums = append(sums, s...)
		crel := altCompRelease(d, comp, codename)
		if err := altWriteFile(filepath.Join(base, "release."+comp), crel); err != nil {
			return err
		}
		sums = append(sums, altSumOf("base/release."+comp, crel))
	}
	rel, err := altGlobalRelease(d, comps, codename, sums)
	if err != nil {
		return err
	}
	return altWriteFile(filepath.Join(base, "release"), rel)
}

// altInDir checks that file lies directly in dir: the index records only the
// file name, so a package elsewhere would be unreachable.
func altInDir(file, dir string) error {
	af, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	ad, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if filepath.Dir(af) != ad {
		return fmt.Errorf("%s: not in %s (an index entry names only the file, so the package must be there)", file, dir)
	}
	return nil
}

// readALTPkg reads the main header and hashes the whole file in one pass.
func readALTPkg(file string) (*altPkg, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := md5.New()
	b, _ := blake2b.New512(nil)
	cnt := &altSizeCounter{}
	tee := io.TeeReader(f, io.MultiWriter(m, b, cnt))
	pkg, err := rpmfile.Open(tee)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if pkg.IsSource() {
		return nil, fmt.Errorf("%s: is a source package; only binary packages go into a pkglist", file)
	}
	if _, err := io.Copy(io.Discard, pkg.PayloadReader()); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if cnt.n > math.MaxInt32 {
		// CRPMTAG_FILESIZE is an INT32 in apt-rpm.
		return nil, fmt.Errorf("%s: %d bytes is too large for an apt-rpm index entry", file, cnt.n)
	}
	return &altPkg{
		file:    file,
		name:    filepath.Base(file),
		hdr:     pkg.Header,
		size:    cnt.n,
		md5:     hex.EncodeToString(m.Sum(nil)),
		blake2b: hex.EncodeToString(b.Sum(nil)),
	}, nil
}

type altSizeCounter struct{ n int64 }

func (c *altSizeCounter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// altKeepFile is genpkglist's rule for the stripped file list: programs in any
// bin/ or sbin/ directory, shared libraries, and whatever some package
// requires by path.
func altKeepFile(p string, required map[string]bool) bool {
	dir, base := path.Split(p)
	if strings.HasSuffix(dir, "/bin/") || strings.HasSuffix(dir, "/sbin/") {
		return true
	}
	if ok, _ := path.Match("lib*.so*", base); ok {
		return true
	}
	return required[p]
}

// altIndexEntry builds the pkglist entry of one package: its header reduced to
// what apt needs, with the stripped file list and the CRPMTAG_* fields.
func altIndexEntry(p *altPkg, comp string, required map[string]bool) ([]byte, error) {
	b := rpmhdr.NewBuilder()
	b.CopyFrom(p.hdr)
	for _, t := range p.hdr.Tags() {
		if !indexKeepTags[t] {
			b.Delete(t)
		}
	}
	paths, err := rpmfile.Paths(p.hdr)
	if err != nil {
		return nil, fmt.Errorf("%s: file list: %w", p.file, err)
	}
	var dirs, bases []string
	var idx []uint32
	dirIdx := map[string]uint32{}
	for _, fp := range paths {
		if !altKeepFile(fp, required) {
			continue
		}
		dir, base := path.Split(fp)
		i, ok := dirIdx[dir]
		if !ok {
			i = uint32(len(dirs))
			dirIdx[dir] = i
			dirs = append(dirs, dir)
		}
		bases = append(bases, base)
		idx = append(idx, i)
	}
	if len(bases) > 0 {
		b.SetStrings(rpmhdr.TagBaseNames, bases)
		b.SetInt32(rpmhdr.TagDirIndexes, idx...)
		b.SetStrings(rpmhdr.TagDirNames, dirs)
	}
	b.SetString(rpmhdr.CRPMTagFilename, p.name)
	b.SetInt32(rpmhdr.CRPMTagFileSize, uint32(p.size))
	b.SetString(rpmhdr.CRPMTagMD5, p.md5)
	b.SetString(rpmhdr.CRPMTagBLAKE2b, p.blake2b)
	b.SetString(rpmhdr.CRPMTagDirectory, "RPMS."+comp)
	return b.Marshal(), nil
}

type altSum struct {
	path        string
	size        int64
	md5, blake2 string
}

func altSumOf(p string, data []byte) altSum {
	m := md5.Sum(data)
	b := blake2b.Sum512(data)
	return altSum{path: p, size: int64(len(data)), md5: hex.EncodeToString(m[:]), blake2: hex.EncodeToString(b[:])}
}

type altHashCounter struct {
	md5, blake2 hash.Hash
	n           int64
}

func newALTHashCounter() *altHashCounter {
	b, _ := blake2b.New512(nil)
	return &altHashCounter{md5: md5.New(), blake2: b}
}

func (h *altHashCounter) Write(p []byte) (int, error) {
	h.md5.Write(p)
	h.blake2.Write(p)
	h.n += int64(len(p))
	return len(p), nil
}

func (h *altHashCounter) sum(p string) altSum {
	return altSum{path: p, size: h.n, md5: hex.EncodeToString(h.md5.Sum(nil)), blake2: hex.EncodeToString(h.blake2.Sum(nil))}
}

// writeALTPkglist streams the sorted entries through xz into
// base/pkglist.<comp>.xz and returns the checksum lines of the plain and
// compressed index.
func writeALTPkglist(base, comp string, pkgs []*altPkg, required map[string]bool) ([]altSum, error) {
	name := "pkglist." + comp + ".xz"
	final := filepath.Join(base, name)
	packed, plain := newALTHashCounter(), newALTHashCounter()
	err := atomicfile.WriteFrom(final, 0o644, func(f io.Writer) error {
		// ulikunitz/xz is single-threaded with fixed defaults: same input, same bytes.
		xw, err := xz.NewWriter(io.MultiWriter(f, packed))
		if err != nil {
			return err
		}
		w := io.MultiWriter(xw, plain)
		for _, p := range pkgs {
			e, err := altIndexEntry(p, comp, required)
			if err != nil {
				return err
			}
			if _, err := w.Write(e); err != nil {
				return err
			}
		}
		return xw.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", final, err)
	}
	return []altSum{plain.sum("base/pkglist." + comp), packed.sum("base/" + name)}, nil
}

// altCompRelease is base/release.<comp>, in the shape girar writes.
func altCompRelease(d ALTDist, comp, codename string) []byte {
	var b bytes.Buffer
	if d.Suite != "" {
		fmt.Fprintf(&b, "Archive: %s\n", d.Suite)
	}
	fmt.Fprintf(&b, "Component: %s\n", comp)
	fmt.Fprintf(&b, "Version: %s\n", codename)
	if d.Origin != "" {
		fmt.Fprintf(&b, "Origin: %s\n", d.Origin)
	}
	if d.Label != "" {
		fmt.Fprintf(&b, "Label: %s\n", d.Label)
	}
	fmt.Fprintf(&b, "Architecture: %s\n", strings.Join(d.Archs, " "))
	b.WriteString("NotAutomatic: false\n")
	return b.Bytes()
}

// altGlobalRelease is base/release: fields, MD5Sum and BLAKE2b sections, then
// the detached signature over everything before its armor line.
func altGlobalRelease(d ALTDist, comps []string, codename string, sums []altSum) ([]byte, error) {
	var b bytes.Buffer
	field := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	field("Origin", d.Origin)
	field("Label", d.Label)
	field("Suite", d.Suite)
	field("Codename", codename)
	// UTC, so the process's time zone cannot change the bytes.
	field("Date", d.Date.UTC().Format(time.RFC1123Z))
	field("Architectures", strings.Join(d.Archs, " "))
	field("Components", strings.Join(comps, " "))
	b.WriteString("MD5Sum:\n")
	for _, s := range sums {
		fmt.Fprintf(&b, " %s %d %s\n", s.md5, s.size, s.path)
	}
	b.WriteString("BLAKE2b:\n")
	for _, s := range sums {
		fmt.Fprintf(&b, " %s %d %s\n", s.blake2, s.size, s.path)
	}
	if d.Signer == nil {
		return b.Bytes(), nil
	}
	b.WriteString("\n")
	var sig bytes.Buffer
	no := false
	cfg := &packet.Config{
		DefaultHash: crypto.SHA512,
		Time:        func() time.Time { return d.Date },
		// go-crypto salts v4 signatures by default; the salt would make
		// every run differ.
		NonDeterministicSignaturesViaNotation: &no,
	}
	if err := openpgp.ArmoredDetachSign(&sig, d.Signer, bytes.NewReader(b.Bytes()), cfg); err != nil {
		return nil, fmt.Errorf("alt dist %s: signing base/release: %w (the signer needs a decrypted signing key valid at %s)", d.Dir, err, d.Date.UTC().Format(time.RFC3339))
	}
	b.Write(sig.Bytes())
	b.WriteString("\n")
	return b.Bytes(), nil
}

// altWriteFile writes data to a temporary file beside name and renames
// it into place, so readers see the old or the new file, never a part.
func altWriteFile(name string, data []byte) error {
	if err := atomicfile.Write(name, data, 0o644); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// ALTDistPackages lists the .rpm files already in dir/RPMS.*/, by component,
// sorted: the Components of an ALTDist for a directory laid out by hand or
// by a mirror.
func ALTDistPackages(dir string) (map[string][]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, e := range ents {
		comp, ok := strings.CutPrefix(e.Name(), "RPMS.")
		if !ok || !e.IsDir() || comp == "" {
			continue
		}
		files, err := filepath.Glob(filepath.Join(dir, e.Name(), "*.rpm"))
		if err != nil {
			return nil, err
		}
		sort.Strings(files)
		out[comp] = files
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no RPMS.<component> directories", dir)
	}
	return out, nil
}

// RPMFileRequires returns the absolute paths that the given packages
// require, sorted: pass them as RequiredPaths of the other dists of a
// repository so that file dependencies across dists still resolve.
func RPMFileRequires(files []string) ([]string, error) {
	set := map[string]bool{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		pkg, err := rpmfile.Open(fh)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, r := range pkg.Header.Strings(rpmhdr.TagRequireName) {
			if strings.HasPrefix(r, "/") {
				set[r] = true
			}
		}
	}
	out := slices.Sorted(maps.Keys(set))
	return out, nil
}
