package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/certification"
)

func init() { register(newSizeCmd) }

func newSizeCmd() *cobra.Command {
	var by, format, version string
	var keys []string
	var top, depth int
	var asJSON bool
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "size BUILD_DIR|REF [--by package|dir] [--top N] [--json | --format html]",
		Short: "Where a release's bytes go: each artifact's files by package and by directory, installed and in the squashfs",
		Long: `size says where the bytes of a build or a published release go, to trim an
image: for the root filesystem, the initramfs and each extension's tree, the
bytes installed by each package and under each directory (the first --depth
path components), and for a squashfs image the bytes each takes in the image
(its blocks as stored, and its share of the fragment blocks, so the column
sums to the image's data); the largest files; and what each drop rule of the
spec saved.

BUILD_DIR is builder build's OUT (its report.json and rootfs.sqsh); REF is a
published release, docker://HOST[:PORT]/PREFIX or oci:DIR, verified with --key
(--version picks one when the store holds several).

--top N keeps the N largest rows of each list and sums the rest into one
"(others)" row. --format json follows docs/schemas/size.schema.json; html
writes a self-contained page with bar charts.`,
		Example: `  builder size out/
  builder size --by dir --depth 3 --top 10 out/
  builder size --format html out/ > size.html
  builder size --key cosign.pub --version 1.11.0 docker://registry.internal:5000/nodeforge/p11`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if by != "package" && by != "dir" {
				return fmt.Errorf("--by %q: want package or dir", by)
			}
			if asJSON {
				format = "json"
			}
			if format != "text" && format != "json" && format != "html" {
				return fmt.Errorf("--format %q: want text, json or html", format)
			}
			o := certification.SizeOptions{Top: top, Depth: depth}
			rep, err := sizeReport(cmd, args[0], version, keys, &sf, o)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			switch format {
			case "json":
				return rep.JSON(w)
			case "html":
				return rep.HTML(w)
			}
			rep.Text(w, by)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&by, "by", "package", "the list the text shows: package or dir (json and html hold both)")
	f.IntVar(&top, "top", 15, "rows per list, the rest summed (0: all)")
	f.IntVar(&depth, "depth", 2, "path components that name a directory")
	f.StringVar(&format, "format", "text", "text, json or html")
	f.BoolVar(&asJSON, "json", false, "the same as --format json")
	f.StringArrayVar(&keys, "key", nil, "public key (cosign.pub) a published release is signed with (repeatable)")
	f.StringVar(&version, "version", "", "the release version (optional for a store holding one release)")
	sf.addRemote(f)
	return cmd
}

// sizeReport reads a build directory or a published release.
func sizeReport(cmd *cobra.Command, arg, version string, keys []string, sf *storeFlags, o certification.SizeOptions) (*certification.SizeReport, error) {
	if fi, err := os.Stat(arg); err == nil && fi.IsDir() && fileExists(filepath.Join(arg, "report.json")) {
		rep, err := readReport(filepath.Join(arg, "report.json"))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", arg, err)
		}
		var files []*os.File
		defer func() {
			for _, f := range files {
				f.Close()
			}
		}()
		o.Squashfs = func(name string) (io.ReaderAt, int64, error) {
			f, err := os.Open(filepath.Join(arg, name))
			if os.IsNotExist(err) || filepath.Ext(name) != ".sqsh" {
				return nil, 0, nil
			}
			if err != nil {
				return nil, 0, err
			}
			files = append(files, f)
			fi, err := f.Stat()
			if err != nil {
				return nil, 0, err
			}
			return f, fi.Size(), nil
		}
		return certification.Sizes(cmd.Context(), arg, rep, o)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s is not a build directory (no report.json): a published release needs --key PUB to verify it", arg)
	}
	vs, err := loadVerifiers(keys)
	if err != nil {
		return nil, err
	}
	st, ver, err := openRelease(cmd.Context(), arg, version, sf.remote(cmd.Context()))
	if err != nil {
		return nil, err
	}
	return certification.ReleaseSizes(cmd.Context(), st, ver, vs, o)
}
