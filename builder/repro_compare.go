package builder

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/nodeforge/builder/api/report"
	"github.com/nodeforge/builder/internal/digest"
)

// Difference is one output that differs between two builds.
type Difference struct {
	Artifact string   `json:"artifact"` // path under OUT
	Inside   []string `json:"inside"`   // files inside it that differ, when known
	Detail   string   `json:"detail"`
	// WrittenBy are, for a compressed artifact, the compressor each
	// build's report says wrote it, first build first:
	// "squashfs zstd: github.com/DataDog/zstd@v1.5.7".
	WrittenBy []string `json:"writtenBy,omitempty"`
}

// Compare compares two build outputs file by file. For an artifact that
// differs, the two reports say which files inside it differ.
func Compare(a, b string) ([]Difference, error) {
	la, err := listFiles(a)
	if err != nil {
		return nil, err
	}
	lb, err := listFiles(b)
	if err != nil {
		return nil, err
	}
	var diffs []Difference
	ra, rb := readReport(a), readReport(b)
	for _, name := range union(la, lb) {
		pa, pb := filepath.Join(a, name), filepath.Join(b, name)
		ba, errA := os.ReadFile(pa)
		bb, errB := os.ReadFile(pb)
		switch {
		case errA != nil:
			diffs = append(diffs, Difference{Artifact: name, Detail: "only in the second build"})
		case errB != nil:
			diffs = append(diffs, Difference{Artifact: name, Detail: "only in the first build"})
		case !bytes.Equal(ba, bb):
			d := Difference{Artifact: name, Detail: fmt.Sprintf("sha256 %s vs %s", digest.SHA256Hex(ba), digest.SHA256Hex(bb)) + unlike(ra, rb)}
			d.Inside = inside(name, ra, rb)
			d.WrittenBy = writtenBy(name, ra, rb)
			diffs = append(diffs, d)
		}
	}
	return diffs, nil
}

// unlike says which compressors and tools the two builds did not share,
// when their reports say: the bytes of such builds are not comparable.
func unlike(ra, rb *report.Report) string {
	if ra == nil || rb == nil {
		return ""
	}
	var parts []string
	for _, u := range append(report.Unlike(ra.Compressors, rb.Compressors), report.Unlike(ra.Tools, rb.Tools)...) {
		parts = append(parts, fmt.Sprintf("%s %s vs %s", u[0], u[1], u[2]))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; written by other implementations: " + strings.Join(parts, ", ")
}

// writtenBy names the compressor of an artifact as each report says,
// when the artifact is compressed and both reports name compressors.
func writtenBy(name string, ra, rb *report.Report) []string {
	if ra == nil || rb == nil || ra.Compressors == nil || rb.Compressors == nil {
		return nil
	}
	var out []string
	for _, r := range []*report.Report{ra, rb} {
		k := compressorOf(name, r.Tools["squashfs"])
		if k == "" {
			return nil
		}
		out = append(out, k+": "+cmp.Or(r.Compressors[k], "unrecorded"))
	}
	return out
}

// compressorOf is the report's name of the compressor that writes an
// artifact ("squashfs zstd"), "" for one not compressed; squashfs says
// how the report's squashfs tool names it ("... (zstd level 19)").
func compressorOf(name, squashfs string) string {
	base := path.Base(name)
	switch {
	case strings.HasSuffix(base, ".sqsh"):
		_, c, _ := strings.Cut(squashfs, "(")
		c, _, _ = strings.Cut(c, " ")
		return "squashfs " + cmp.Or(c, "zstd")
	case strings.HasSuffix(base, ".xz") && strings.HasPrefix(base, "initramfs"):
		return "initramfs xz"
	case strings.HasSuffix(base, ".xz"):
		return "disk xz" // the .xz disk images (compose)
	case strings.HasSuffix(base, ".zst"):
		return "initramfs zstd"
	case strings.HasSuffix(base, ".gz"), strings.HasSuffix(base, ".vmdk"):
		return "layers gzip"
	}
	return ""
}

// inside names the files of an artifact whose report entries differ.
func inside(name string, ra, rb *report.Report) []string {
	if ra == nil || rb == nil {
		return nil
	}
	arch, file, ok := strings.Cut(name, "/")
	if !ok {
		return nil
	}
	xa, xb := ra.Architectures[arch], rb.Architectures[arch]
	if xa == nil || xb == nil {
		return nil
	}
	var ea, eb []report.FileEntry
	switch file {
	case "rootfs.sqsh":
		ea, eb = xa.Rootfs, xb.Rootfs
	case "initramfs.xz":
		ea, eb = xa.Initramfs, xb.Initramfs
	default:
		return nil
	}
	ma, mb := map[string]string{}, map[string]string{}
	for _, e := range ea {
		j, _ := json.Marshal(e)
		ma[e.Path] = string(j)
	}
	for _, e := range eb {
		j, _ := json.Marshal(e)
		mb[e.Path] = string(j)
	}
	var out []string
	for _, p := range union(keys(ma), keys(mb)) {
		if ma[p] != mb[p] {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		out = []string{"(no file differs: the image's own metadata does)"}
	}
	return out
}

func readReport(dir string) *report.Report {
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return nil
	}
	var r report.Report
	if json.Unmarshal(b, &r) != nil {
		return nil
	}
	return &r
}

func listFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func union(a, b []string) []string {
	set := map[string]bool{}
	for _, s := range a {
		set[s] = true
	}
	for _, s := range b {
		set[s] = true
	}
	out := slices.Sorted(maps.Keys(set))
	return out
}
