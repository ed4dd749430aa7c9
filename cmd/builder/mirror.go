package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/ProtonMail/go-crypto/openpgp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/pipeline"
	"github.com/nodeforge/builder/pkgbase/cache"
	"github.com/nodeforge/builder/release"
)

func init() { register(newMirrorCmd) }

// parseMirrorEnd reads a source or destination of a mirror: a whole
// store, never one image (--image picks images).
func parseMirrorEnd(s string) (oci.Location, error) {
	l, err := oci.ParseLocation(s)
	if err == nil && l.Repo != "" {
		err = fmt.Errorf("%q names one image: a mirror copies a release's store (pick images with --image REPO)", s)
	}
	return l, err
}

type mirrorFlags struct {
	version     string
	images      []string
	keys        []string
	archiveKeys []string
	signKey     string
	policy      string
	report      string
	includeBase bool
	baseKey     string
	baseOut     string
	cacheDir    string
	since       string
	splitSize   string
	work        string
	asJSON      bool
	quiet       bool
	sf          specFlags
	store       storeFlags
}

func newMirrorCmd() *cobra.Command {
	var f mirrorFlags
	cmd := &cobra.Command{
		Use:   "mirror --version V [--key PUB]... SRC DST",
		Short: "Mirror a release into a closed perimeter: registry to registry, to an archive, from an archive",
		Long: `mirror carries a release (or the images named by --image) from SRC to DST,
whole: every image of the release (each index and each per-architecture
child), their cosign signatures and attestations (the .sig and .att tags), their
OCI referrers (SBOMs, provenance), and the lock. Everything is copied by
digest, so the signatures stay valid whatever the repository prefix at the
destination is. What the destination has already is not sent again: an
interrupted mirror, run again, finishes the job.

SRC and DST are each one of
  docker://HOST[:PORT]/PREFIX  the release's repositories under PREFIX, as
                               builder release --registry published them
  oci-archive:FILE             an archive file (a tar, optionally in parts
                               FILE.000, FILE.001, ...)
  oci:DIR                      an archive directory, or as SRC a local OCI
                               layout written by builder release

An archive is an OCI image layout sealed by a signed manifest (an in-toto
statement listing every file by sha256): an import refuses an archive whose
manifest signature or any file fails, before anything is sent. --sign-key signs
the manifest with a cosign key (otherwise a key made for that archive alone
signs it, which proves integrity but not origin); --archive-key pins the key an
import requires. --since PREVIOUS writes an incremental archive without the
layers PREVIOUS carried; --split-size cuts it into parts.

--include-base adds the package base subset: the RPMs the lock pins, as ALT
repositories whose indexes are regenerated and signed with the perimeter's
OpenPGP key (--base-key), with the spec and the lock, as the artifact
PREFIX/base:VERSION. --base-out DIR writes that subset out at the other side,
where builder build --spec DIR/spec.yaml --lock DIR/lock.json --repo-url
NAME=DIR/repos/NAME rebuilds the release offline with identical digests.

After every copy, the destination is checked: every manifest present with the
source's digest, every referrer listed (by the referrers API or its fallback
tag), and with --key every signature and attestation verified. The parity
report (--report FILE: JSON, and FILE.txt, a table) lists every manifest with
both digests. Any miss exits 1.`,
		Example: `  # registry to registry, prefixes rewritten, verified at the destination
  builder mirror --version 1.11.0 --key cosign.pub \
      docker://registry.internal:5000/nodeforge/p11 docker://mirror.local:5000/p11

  # out through an archive, in 4 GiB parts, with the package base subset
  builder mirror --version 1.11.0 --key cosign.pub --sign-key mirror.key \
      --include-base --branch p11 --base-key perimeter.asc --split-size 4G \
      docker://registry.internal:5000/nodeforge/p11 oci-archive:p11-1.11.0.tar

  # and in, inside the perimeter
  builder mirror --key cosign.pub --archive-key mirror.pub --report parity.json \
      oci-archive:p11-1.11.0.tar docker://registry.perimeter:5000/p11`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMirror(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f, args[0], args[1])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.version, "version", "", "the release version to mirror (read from an archive source when omitted)")
	fl.StringArrayVar(&f.images, "image", nil, "mirror REPOSITORY:TAG (relative to the source prefix) instead of a release (repeatable)")
	fl.StringArrayVar(&f.keys, "key", nil, "public key (cosign.pub) the release's signatures must verify with at the destination (repeatable)")
	fl.StringArrayVar(&f.archiveKeys, "archive-key", nil, "public key (cosign.pub) an archive's manifest must be signed with (repeatable)")
	fl.StringVar(&f.signKey, "sign-key", "", "cosign private key signing an archive's manifest ($COSIGN_PASSWORD)")
	fl.StringVar(&f.policy, "policy", "", "policy file for the verification at the destination (base, urls, fingerprints)")
	fl.StringVar(&f.report, "report", "", "write the parity report as JSON to FILE and as a table to FILE.txt")
	fl.BoolVar(&f.includeBase, "include-base", false, "carry the package base subset (needs --spec or --branch, and --base-key)")
	fl.StringVar(&f.baseKey, "base-key", "", "the perimeter's OpenPGP private key (armored) signing the subset's indexes")
	fl.StringVar(&f.baseOut, "base-out", "", "write the package base subset the mirror carried into DIR")
	fl.StringVar(&f.cacheDir, "cache", defaultCacheDir(), "package cache directory ($NODEFORGE_CACHE), for --include-base")
	fl.StringVar(&f.since, "since", "", "previous archive (oci-archive:FILE or oci:DIR): leave out the layers it carried")
	fl.StringVar(&f.splitSize, "split-size", "", "cut an archive file into parts of this size (e.g. 700M, 4G)")
	fl.StringVar(&f.work, "work", "", "directory for unpacking and staging archives (default: beside the archive, or the temp dir)")
	fl.BoolVar(&f.asJSON, "json", false, "print the parity report as JSON")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print no progress on stderr, only the report and errors")
	f.sf.add(cmd)
	f.store.addRemote(fl)
	fl.IntVar(&f.store.retries, "retries", 5, "retries of a failed registry request, with exponential backoff")
	return cmd
}

// parseMirrorEnds parses the source and the destination.
func parseMirrorEnds(srcArg, dstArg string) (src, dst oci.Location, err error) {
	if src, err = parseMirrorEnd(srcArg); err != nil {
		return src, dst, err
	}
	dst, err = parseMirrorEnd(dstArg)
	return src, dst, err
}

func runMirror(ctx context.Context, stdout, stderr io.Writer, f mirrorFlags, srcArg, dstArg string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	src, dst, err := parseMirrorEnds(srcArg, dstArg)
	if err != nil {
		return err
	}
	view := newProgressView(stderr, f.quiet)
	defer view.end()
	logf := view.logf
	keys, err := loadVerifiers(f.keys)
	if err != nil {
		return err
	}
	archiveKeys, err := loadVerifiers(f.archiveKeys)
	if err != nil {
		return err
	}
	pol, err := release.LoadPolicy(f.policy)
	if err != nil {
		return err
	}
	partSize, err := parseSize(f.splitSize)
	if err != nil {
		return err
	}
	if (partSize > 0 || f.since != "") && dst.Kind != oci.KindArchive {
		return errors.New("--split-size and --since make archive files: the destination must be oci-archive:FILE")
	}
	if f.includeBase && f.baseKey == "" {
		return errors.New("--include-base needs --base-key FILE: the perimeter's OpenPGP private key, which signs the subset's indexes")
	}
	if f.version == "" && len(f.images) == 0 && src.Kind == oci.KindRegistry {
		return errors.New("give --version V (the release) or --image REPOSITORY:TAG")
	}
	remoteOpts := f.store.remote(ctx)

	// The source: a registry, a local layout, or a verified archive; the
	// destination: a registry, or a staging layout sealed afterwards.
	ends := release.MirrorEndOptions{Remote: remoteOpts, ArchiveKeys: archiveKeys, Work: f.work, TempDir: os.TempDir(), Log: logf}
	source, err := release.OpenMirrorSource(ctx, src, ends)
	if err != nil {
		return err
	}
	defer source.Close()
	o := release.MirrorOptions{From: source.Store, Version: f.version, Images: f.images, Keys: keys, Policy: pol, Log: logf, Progress: view.update}
	srcArchive := source.Archive
	if m := srcArchive; m != nil {
		if f.version != "" && m.Predicate.Version != "" && f.version != m.Predicate.Version {
			return fmt.Errorf("%s holds release %s, not %s", src, m.Predicate.Version, f.version)
		}
		if o.Version == "" {
			o.Version = m.Predicate.Version
		}
		o.Items = m.Predicate.Items
	}
	if src.String() == dst.String() {
		return fmt.Errorf("source and destination are the same: %s", src)
	}
	dest, err := release.OpenMirrorDestination(ctx, dst, ends)
	if err != nil {
		return err
	}
	o.To = dest.Store
	staging := dest.Staging
	if o.From.String() == o.To.String() {
		return fmt.Errorf("source and destination are the same: %s", o.From)
	}

	if f.includeBase {
		base, cleanup, err := buildBaseSubset(ctx, f, o.From, o.Version, view)
		if err != nil {
			return err
		}
		defer cleanup()
		o.Base = base
	}

	// What sealing an archive needs is read before the copy, so bad input
	// fails before the work.
	var seal sealInputs
	if staging != "" {
		if seal, err = loadSealInputs(f, archiveKeys); err != nil {
			return err
		}
	}

	rep, mirrorErr := release.Mirror(ctx, o)
	view.end()
	if srcArchive != nil {
		rep.Archive = srcArchive.Info(src.String())
	}
	if mirrorErr == nil && f.baseOut != "" {
		if err := writeBaseOut(ctx, o.To, o.Version, f.baseOut, logf); err != nil {
			return err
		}
	}
	if mirrorErr == nil && staging != "" {
		so := release.SealOptions{Version: o.Version, Source: o.From.String(), Signer: seal.signer, Previous: seal.prev}
		if rep.Archive, err = dest.Seal(rep.ItemList(), so, partSize, logf); err != nil {
			return err
		}
	}
	if rep != nil {
		if err := writeMirrorReport(stdout, f, rep); err != nil {
			return err
		}
	}
	if mirrorErr != nil {
		if srcArchive != nil && srcArchive.Predicate.Previous != "" && errors.Is(mirrorErr, fs.ErrNotExist) {
			mirrorErr = fmt.Errorf("%s is incremental: it leaves out layers the archive %s carried, and the destination lacks them: import that archive first (%w)",
				src.String(), srcArchive.Predicate.Previous, mirrorErr)
		}
		return &exitError{code: 1, err: mirrorErr}
	}
	return nil
}

// sealInputs are what an archive's seal needs besides the staged layout.
type sealInputs struct {
	signer *signing.Signer          // --sign-key, or nil
	prev   *release.ArchiveManifest // --since, or nil
}

func loadSealInputs(f mirrorFlags, archiveKeys []signing.Verifier) (sealInputs, error) {
	var in sealInputs
	var err error
	if f.since != "" {
		pe, perr := parseMirrorEnd(f.since)
		if perr != nil || pe.Kind == oci.KindRegistry {
			return in, fmt.Errorf("--since %q: want oci-archive:FILE or oci:DIR", f.since)
		}
		if in.prev, err = release.ReadArchiveManifest(pe.Path, pe.Kind == oci.KindLayout, archiveKeys); err != nil {
			return in, err
		}
	}
	if f.signKey != "" {
		if in.signer, err = loadSigner(f.signKey); err != nil {
			return in, err
		}
	}
	return in, nil
}

// buildBaseSubset reads what the subset needs from the flags and has the
// release write it.
func buildBaseSubset(ctx context.Context, f mirrorFlags, st oci.Store, version string, view *progressView) (v1.Image, func(), error) {
	s, err := f.sf.load()
	if err != nil {
		return nil, nil, fmt.Errorf("--include-base: %w", err)
	}
	signer, err := readOpenPGPKey(f.baseKey, "NODEFORGE_BASE_KEY_PASSWORD")
	if err != nil {
		return nil, nil, err
	}
	c := &cache.Cache{Timeout: netTimeout(ctx), Dir: f.cacheDir, Progress: view.cacheEvent}
	return pipeline.BaseSubset(ctx, st, version, pipeline.BaseSubsetOptions{Spec: s, Signer: signer, Cache: c, Work: f.work, Log: view.logf})
}

// readOpenPGPKey reads an armored OpenPGP private key, decrypting it with
// the password in the environment variable passwordVar when it is
// encrypted.
func readOpenPGPKey(path, passwordVar string) (*openpgp.Entity, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	list, err := openpgp.ReadArmoredKeyRing(fh)
	if err != nil {
		return nil, fmt.Errorf("%s: not an armored OpenPGP key: %w", path, err)
	}
	for _, e := range list {
		if e.PrivateKey == nil {
			continue
		}
		if e.PrivateKey.Encrypted {
			pw, ok := os.LookupEnv(passwordVar)
			if !ok {
				return nil, fmt.Errorf("%s is encrypted: set %s", path, passwordVar)
			}
			if err := e.DecryptPrivateKeys([]byte(pw)); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		return e, nil
	}
	return nil, fmt.Errorf("%s holds no OpenPGP private key", path)
}

// writeBaseOut writes the base subset artifact of the release in st into dir.
func writeBaseOut(ctx context.Context, st oci.Store, version, dir string, logf func(string, ...any)) error {
	n, err := pipeline.ExtractBaseSubset(ctx, st, version, dir)
	if err != nil {
		return fmt.Errorf("--base-out: %w", err)
	}
	logf("wrote the package base subset (%d files) to %s", n, dir)
	return nil
}

// parseSize reads "700M", "4G", "1048576".
func parseSize(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	mult := int64(1)
	num := strings.TrimSuffix(strings.ToUpper(s), "B")
	switch {
	case strings.HasSuffix(num, "K"):
		mult, num = 1<<10, strings.TrimSuffix(num, "K")
	case strings.HasSuffix(num, "M"):
		mult, num = 1<<20, strings.TrimSuffix(num, "M")
	case strings.HasSuffix(num, "G"):
		mult, num = 1<<30, strings.TrimSuffix(num, "G")
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number, optionally with K, M or G", s)
	}
	if n*mult < 64<<10 {
		return 0, fmt.Errorf("size %q: parts must be at least 64K", s)
	}
	return n * mult, nil
}

// writeMirrorReport prints the summary (or the JSON) and writes --report.
func writeMirrorReport(w io.Writer, f mirrorFlags, rep *release.MirrorReport) error {
	if f.report != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(f.report, append(b, '\n'), 0o644); err != nil {
			return err
		}
		tf, err := os.Create(f.report + ".txt")
		if err != nil {
			return err
		}
		writeParityTable(tf, rep)
		if err := tf.Close(); err != nil {
			return err
		}
	}
	if f.asJSON {
		return printJSON(w, rep)
	}
	writeMirrorSummary(w, rep)
	return nil
}

func writeMirrorSummary(w io.Writer, rep *release.MirrorReport) {
	verdict := "OK"
	if !rep.OK {
		verdict = "FAIL"
	}
	what := "release " + rep.Version
	if rep.Version == "" {
		what = "images"
	}
	fmt.Fprintf(w, "%s  mirror of %s: %s -> %s\n", verdict, what, rep.Source, rep.Destination)
	counts := rep.Counts()
	var parts []string
	for _, k := range []string{release.KindRelease, release.KindChild, release.KindSignature, release.KindAttestation, release.KindReferrer, release.KindBase} {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
	}
	ok := 0
	for _, p := range rep.Items {
		if p.Status == "ok" {
			ok++
		}
	}
	fmt.Fprintf(w, "    manifests: %s; %d of %d with equal digests at the destination\n", strings.Join(parts, ", "), ok, len(rep.Items))
	fmt.Fprintf(w, "    copied %d, already there %d; sent %d blobs, %s\n", rep.Copy.Copied, rep.Copy.Present, rep.Copy.Uploaded.Blobs, humanBytes(rep.Copy.Uploaded.BlobBytes))
	if rep.SignaturesChecked {
		n := 0
		for _, v := range rep.Verified {
			n += len(v.Manifests)
		}
		fmt.Fprintf(w, "    signatures and attestations verified at the destination: %d repositories, %d manifests\n", len(rep.Verified), n)
	} else {
		fmt.Fprintf(w, "    signatures not verified (no --key)\n")
	}
	if a := rep.Archive; a != nil {
		signer := "its own key (integrity only)"
		if a.Pinned {
			signer = "key " + a.KeyID
		}
		fmt.Fprintf(w, "    archive %s: %d files (%d carried, %s), manifest %s signed by %s\n", a.Path, a.Files, a.Carried, humanBytes(a.Bytes), a.Manifest, signer)
		if a.Previous != "" {
			fmt.Fprintf(w, "    incremental: layers of the archive %s left out\n", a.Previous)
		}
		for _, p := range a.Parts {
			fmt.Fprintf(w, "    part %s\n", p)
		}
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "    - %s\n", p)
	}
}

// writeParityTable lists every item with both digests.
func writeParityTable(w io.Writer, rep *release.MirrorReport) {
	writeMirrorSummary(w, rep)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tKIND\tREPOSITORY\tREF\tSUBJECT\tSOURCE\tDESTINATION")
	short := func(d string) string {
		if len(d) > 19 {
			return d[:19]
		}
		return d
	}
	for _, p := range rep.Items {
		ref := p.Tag
		if ref == "" {
			ref = "-"
		}
		subj := "-"
		if p.Subject != "" {
			subj = short(p.Subject)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Status, p.Kind, p.Repo, ref, subj, p.SourceDigest, orDash(p.DestinationDigest))
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
