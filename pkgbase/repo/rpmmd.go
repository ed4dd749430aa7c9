package repo

// rpm-md repositories (what createrepo_c writes and dnf reads):
// repodata/repomd.xml lists the metadata files with their checksums;
// primary.xml carries the package list with dependencies and the "primary"
// subset of file names; filelists.xml carries every file.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/nodeforge/builder/pkgbase/evr"
)

// RepomdPath is where an rpm-md repository's index lives.
const RepomdPath = "repodata/repomd.xml"

// maxRepomdSize caps repomd.xml itself (real ones are a few KB).
const maxRepomdSize = 64 << 20

// Checksum is a digest as repomd.xml and primary.xml give it.
type Checksum struct {
	Type  string // "sha256", "sha512", "sha1" (or "sha"), "md5", ...
	Value string // lower-case hex
}

// RepomdData is one <data> entry of repomd.xml.
type RepomdData struct {
	Type         string   // "primary", "filelists", "other", "primary_db", ...
	Location     string   // location/@href, relative to the repository root
	Checksum     Checksum // of the file as stored (compressed)
	OpenChecksum Checksum // of the decompressed content; zero when absent
	Size         int64    // of the file as stored; 0 when absent
	OpenSize     int64    // decompressed; 0 when absent
	Timestamp    int64    // 0 when absent
}

// Repomd is a parsed repodata/repomd.xml.
type Repomd struct {
	Revision string
	Data     []RepomdData
}

// Get returns the first entry of the given type, or nil.
func (m *Repomd) Get(typ string) *RepomdData {
	for i := range m.Data {
		if m.Data[i].Type == typ {
			return &m.Data[i]
		}
	}
	return nil
}

type xmlChecksum struct {
	Type  string `xml:"type,attr"`
	PkgID string `xml:"pkgid,attr"`
	Value string `xml:",chardata"`
}

type xmlRepomd struct {
	Revision string `xml:"revision"`
	Data     []struct {
		Type         string       `xml:"type,attr"`
		Checksum     *xmlChecksum `xml:"checksum"`
		OpenChecksum *xmlChecksum `xml:"open-checksum"`
		Location     struct {
			Href string `xml:"href,attr"`
		} `xml:"location"`
		Timestamp string `xml:"timestamp"`
		Size      string `xml:"size"`
		OpenSize  string `xml:"open-size"`
	} `xml:"data"`
}

// mdRootElement reads up to the document's root element and checks its name.
func mdRootElement(d *xml.Decoder, want, what string) (xml.StartElement, error) {
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return xml.StartElement{}, fmt.Errorf("not %s: no root element", what)
		}
		if err != nil {
			return xml.StartElement{}, fmt.Errorf("%s: %w", what, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Local != want {
				return se, fmt.Errorf("not %s: root element is <%s>, want <%s>", what, se.Name.Local, want)
			}
			return se, nil
		}
	}
}

func newMDDecoder(r io.Reader) *xml.Decoder {
	d := xml.NewDecoder(r)
	// createrepo_c writes UTF-8; other declared charsets are passed through
	// rather than refused (names and paths are ASCII in practice).
	d.CharsetReader = func(_ string, in io.Reader) (io.Reader, error) { return in, nil }
	return d
}

// ParseRepomd parses repodata/repomd.xml.
func ParseRepomd(r io.Reader) (*Repomd, error) {
	d := newMDDecoder(r)
	root, err := mdRootElement(d, "repomd", "a repomd.xml")
	if err != nil {
		return nil, err
	}
	var x xmlRepomd
	if err := d.DecodeElement(&x, &root); err != nil {
		return nil, fmt.Errorf("repomd.xml: %w", err)
	}
	m := &Repomd{Revision: strings.TrimSpace(x.Revision)}
	for i, xd := range x.Data {
		rd := RepomdData{
			Type:     strings.TrimSpace(xd.Type),
			Location: strings.TrimSpace(xd.Location.Href),
		}
		what := fmt.Sprintf("repomd.xml: data %d (%q)", i+1, rd.Type)
		if xd.Checksum != nil {
			rd.Checksum = mdChecksum(xd.Checksum)
		}
		if xd.OpenChecksum != nil {
			rd.OpenChecksum = mdChecksum(xd.OpenChecksum)
		}
		if rd.Size, err = parseMDNumber(xd.Size); err != nil {
			return nil, fmt.Errorf("%s: size: %w", what, err)
		}
		if rd.OpenSize, err = parseMDNumber(xd.OpenSize); err != nil {
			return nil, fmt.Errorf("%s: open-size: %w", what, err)
		}
		// Timestamps are informational (some tools write fractions).
		if ts := strings.TrimSpace(xd.Timestamp); ts != "" {
			if f, err := strconv.ParseFloat(ts, 64); err == nil && f >= 0 && f < math.MaxInt64 {
				rd.Timestamp = int64(f)
			}
		}
		m.Data = append(m.Data, rd)
	}
	return m, nil
}

func mdChecksum(x *xmlChecksum) Checksum {
	return Checksum{
		Type:  strings.ToLower(strings.TrimSpace(x.Type)),
		Value: strings.ToLower(strings.TrimSpace(x.Value)),
	}
}

// parseMDNumber parses a non-negative decimal; "" gives 0.
func parseMDNumber(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid number %q", s)
	}
	if n < 0 {
		return 0, fmt.Errorf("negative number %q", s)
	}
	return n, nil
}

// rpm-md's names for rpm's sense flags.
var senseFlags = map[string]uint32{
	"EQ": evr.FlagEqual,
	"LT": evr.FlagLess,
	"GT": evr.FlagGreater,
	"LE": evr.FlagLess | evr.FlagEqual,
	"GE": evr.FlagGreater | evr.FlagEqual,
}

// ParsePrimary reads primary.xml (decompressed) one <package> at a time and
// returns the packages in document order, with Repo set to repoURL and
// Semantics to evr.RPM. Files holds only primary's subset of file names
// (LoadRPMMD with Filelists merges the full lists).
func ParsePrimary(r io.Reader, repoURL string) ([]*Package, error) {
	var pkgs []*Package
	err := parsePrimary(r, repoURL, func(_ string, p *Package) error {
		pkgs = append(pkgs, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return pkgs, nil
}

// parseEpoch accepts rpm's epoch range (uint32).
func parseEpoch(s string) (int, error) {
	e, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("invalid epoch %q", s)
	}
	return int(e), nil
}

// LoadOptions tunes LoadRPMMD.
type LoadOptions struct {
	// Filelists also fetches filelists.xml, when repomd.xml lists it, and
	// replaces each package's primary subset of files with its full list.
	Filelists bool
	// MaxIndexSize caps each decompressed metadata file (0: MaxIndexSize).
	MaxIndexSize int64
}

// RPMMD is an rpm-md repository's package index.
type RPMMD struct {
	Packages []*Package
	// FullFiles reports that each package's Files is its full list (from
	// filelists.xml); otherwise it is primary.xml's subset (PrimaryFile).
	FullFiles bool
}

// PrimaryFile reports whether primary.xml lists a file: createrepo's rule
// (paths under /etc/, with "bin/" in them, and /usr/lib/sendmail), the
// files dependencies usually name. Without filelists metadata (dnf 5 no
// longer fetches it by default; some repositories do not carry it), a
// dependency on any other file cannot be answered.
func PrimaryFile(path string) bool {
	return strings.HasPrefix(path, "/etc/") || strings.Contains(path, "bin/") || path == "/usr/lib/sendmail"
}

// LoadRPMMD reads an rpm-md repository's packages (ReadRPMMD).
func LoadRPMMD(ctx context.Context, src Source, opts LoadOptions) ([]*Package, error) {
	md, err := ReadRPMMD(ctx, src, opts)
	if err != nil {
		return nil, err
	}
	return md.Packages, nil
}

// ReadRPMMD reads an rpm-md repository: repodata/repomd.xml, then primary
// (and filelists when asked and listed: like dnf, a repository without it
// is read, with primary's subset of files), verifying each file's size and
// checksum (and the decompressed open-size and open-checksum when listed)
// against repomd.xml. The packages are sorted by name, version string,
// arch and location. repomd.xml itself is not verified (no signature check
// here).
func ReadRPMMD(ctx context.Context, src Source, opts LoadOptions) (*RPMMD, error) {
	raw, err := readSource(ctx, src, RepomdPath, maxRepomdSize)
	if err != nil {
		return nil, err
	}
	return readRPMMD(ctx, src, raw, opts)
}

// readRPMMD reads the repository that repomd.xml's bytes describe: Load
// passes the very bytes whose signature it checked, not a second download.
func readRPMMD(ctx context.Context, src Source, repomd []byte, opts LoadOptions) (*RPMMD, error) {
	base := src.URL()
	md, err := ParseRepomd(bytes.NewReader(repomd))
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", base, RepomdPath, err)
	}
	prim := md.Get("primary")
	if prim == nil {
		return nil, fmt.Errorf("%s/%s: no primary metadata listed", base, RepomdPath)
	}
	// Primary and filelists are read side by side; the file lists are
	// merged once both are in, in filelists.xml's order, as if each had
	// been merged as it came.
	fl := md.Get("filelists")
	withFiles := opts.Filelists && fl != nil
	var (
		recs   []filelistsRecord
		flErr  error
		flDone = make(chan struct{})
	)
	flCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if withFiles {
		go func() {
			defer close(flDone)
			recs, flErr = readFilelistsRecords(flCtx, src, fl, opts.MaxIndexSize)
		}()
	}
	var (
		pkgs []*Package
		byID = map[string][]*Package{}
	)
	err = fetchVerified(ctx, src, prim, opts.MaxIndexSize, func(r io.Reader) error {
		return parsePrimary(r, base, func(pkgid string, p *Package) error {
			if len(pkgs)%1024 == 0 && ctx.Err() != nil {
				return ctx.Err()
			}
			pkgs = append(pkgs, p)
			if pkgid != "" {
				byID[pkgid] = append(byID[pkgid], p)
			}
			return nil
		})
	})
	if err != nil {
		// Primary's error explains a failure best: filelists is not
		// looked at (it used to be read only after primary).
		cancel()
		if withFiles {
			<-flDone
		}
		return nil, err
	}
	out := &RPMMD{}
	if withFiles {
		<-flDone
		if flErr != nil {
			return nil, flErr
		}
		mergeFilelists(recs, byID)
		out.FullFiles = true
	}
	sortRPMMD(pkgs)
	out.Packages = pkgs
	return out, nil
}

// sortRPMMD orders packages by name, version label, arch and location,
// keeping the document order of equal ones.
func sortRPMMD(pkgs []*Package) {
	type keyed struct {
		p  *Package
		vr string
		i  int
	}
	ks := make([]keyed, len(pkgs))
	for i, p := range pkgs {
		ks[i] = keyed{p, p.VR(), i}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		if c := strings.Compare(a.p.Name, b.p.Name); c != 0 {
			return c
		}
		if c := strings.Compare(a.vr, b.vr); c != 0 {
			return c
		}
		if c := strings.Compare(a.p.Arch, b.p.Arch); c != 0 {
			return c
		}
		if c := strings.Compare(a.p.Location, b.p.Location); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	for i := range ks {
		pkgs[i] = ks[i].p
	}
}

// filelistsRecord is one <package> of filelists.xml.
type filelistsRecord struct {
	pkgid, name, arch string
	files             []string
}

// readFilelistsRecords reads filelists.xml's packages.
func readFilelistsRecords(ctx context.Context, src Source, fl *RepomdData, limit int64) ([]filelistsRecord, error) {
	var recs []filelistsRecord
	err := fetchVerified(ctx, src, fl, limit, func(r io.Reader) error {
		return ParseFilelists(r, func(pkgid, name, arch string, files []string) error {
			if len(recs)%1024 == 1023 && ctx.Err() != nil {
				return ctx.Err()
			}
			recs = append(recs, filelistsRecord{pkgid, name, arch, files})
			return nil
		})
	})
	return recs, err
}

// mergeFilelists replaces the file lists of the packages primary.xml gave
// (by pkgid) with filelists.xml's full ones.
func mergeFilelists(recs []filelistsRecord, byID map[string][]*Package) {
	for _, r := range recs {
		files := r.files
		shared := false
		for _, p := range byID[r.pkgid] {
			// pkgid is the package's checksum; name and arch are
			// checked so a stray entry cannot relabel a package.
			if p.Name == r.name && p.Arch == r.arch {
				if shared {
					files = slices.Clone(files)
				}
				p.Files, shared = files, true
			}
		}
	}
}

// newRepomdHash returns a hash for a repomd checksum type.
func newRepomdHash(typ string) (hash.Hash, error) {
	switch typ {
	case "sha256":
		return sha256.New(), nil
	case "sha512":
		return sha512.New(), nil
	case "sha384":
		return sha512.New384(), nil
	case "sha224":
		return sha256.New224(), nil
	case "sha1", "sha":
		return sha1.New(), nil
	case "md5":
		return md5.New(), nil
	case "":
		return nil, errors.New("no checksum listed")
	}
	return nil, fmt.Errorf("unsupported checksum type %q", typ)
}

type byteCounter struct{ n int64 }

func (c *byteCounter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// fetchVerified opens d's file, streams it decompressed to parse, and then
// checks size and checksum of the stored and of the decompressed bytes. The
// parse result is only trusted once the checksums match, so a checksum
// mismatch is reported in preference to the parse error it likely caused.
func fetchVerified(ctx context.Context, src Source, d *RepomdData, limit int64, parse func(io.Reader) error) error {
	name := src.URL() + "/" + d.Location
	if d.Location == "" {
		return fmt.Errorf("%s/%s: %s metadata has no location", src.URL(), RepomdPath, d.Type)
	}
	h, err := newRepomdHash(d.Checksum.Type)
	if err != nil {
		return fmt.Errorf("%s: %s checksum in repomd.xml: %w", name, d.Type, err)
	}
	var oh hash.Hash
	if d.OpenChecksum.Type != "" {
		if oh, err = newRepomdHash(d.OpenChecksum.Type); err != nil {
			return fmt.Errorf("%s: %s open-checksum in repomd.xml: %w", name, d.Type, err)
		}
	}
	if limit <= 0 {
		limit = MaxIndexSize
	}
	rc, err := src.Open(ctx, d.Location)
	if err != nil {
		return err
	}
	defer rc.Close()

	// Stored bytes: at most the listed size (a longer file fails early).
	storedLimit := limit
	if d.Size > 0 {
		storedLimit = d.Size
	}
	var sc byteCounter
	stored := io.TeeReader(LimitReader(rc, storedLimit, name), io.MultiWriter(h, &sc))

	openLimit := limit
	if d.OpenSize > 0 && d.OpenSize < openLimit {
		openLimit = d.OpenSize
	}
	var oc byteCounter
	var perr, derr error
	dr, zerr := DecompressLimit(d.Location, stored, openLimit)
	if zerr == nil {
		ow := io.Writer(&oc)
		if oh != nil {
			ow = io.MultiWriter(oh, &oc)
		}
		// Fetching, hashing and decompressing run ahead of the parse, on
		// another goroutine.
		opened := newReadAhead(io.TeeReader(dr, ow))
		perr = parse(opened)
		// Finish the stream so the checksums cover all of it.
		if perr == nil || !errors.Is(perr, context.Canceled) && !errors.Is(perr, context.DeadlineExceeded) {
			_, derr = io.Copy(io.Discard, opened)
		}
		if perr != nil && (errors.Is(perr, context.Canceled) || errors.Is(perr, context.DeadlineExceeded)) {
			// Not drained: the read-ahead may be waiting on the source.
			rc.Close()
		}
		opened.Close()
		dr.Close()
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", name, ctx.Err())
	}
	if _, err := io.Copy(io.Discard, stored); err != nil {
		if errors.Is(err, ErrTooLarge) {
			return fmt.Errorf("%s: size mismatch: repomd.xml says %d bytes, the file is larger", name, d.Size)
		}
		return err
	}
	if d.Size > 0 && sc.n != d.Size {
		return fmt.Errorf("%s: size mismatch: repomd.xml says %d bytes, got %d", name, d.Size, sc.n)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != d.Checksum.Value {
		return fmt.Errorf("%s: %s checksum mismatch: repomd.xml says %s, got %s", name, d.Checksum.Type, d.Checksum.Value, got)
	}
	if zerr != nil {
		return fmt.Errorf("%s: %w", name, zerr)
	}
	if perr != nil {
		return fmt.Errorf("%s: %w", name, perr)
	}
	if derr != nil {
		return fmt.Errorf("%s: %w", name, derr)
	}
	if d.OpenSize > 0 && oc.n != d.OpenSize {
		return fmt.Errorf("%s: open-size mismatch: repomd.xml says %d decompressed bytes, got %d", name, d.OpenSize, oc.n)
	}
	if oh != nil {
		if got := hex.EncodeToString(oh.Sum(nil)); got != d.OpenChecksum.Value {
			return fmt.Errorf("%s: %s open-checksum mismatch: repomd.xml says %s, got %s", name, d.OpenChecksum.Type, d.OpenChecksum.Value, got)
		}
	}
	return nil
}
