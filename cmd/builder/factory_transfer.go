package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/oci"
	"github.com/nodeforge/builder/release"
)

type transferFlags struct {
	version, schematics, signKey, fromCache, toCache, report, work string
	cached, asJSON                                                 bool
	keys, archiveKeys                                              []string
	sf                                                             storeFlags
}

func newFactoryTransferCmd() *cobra.Command {
	var f transferFlags
	cmd := &cobra.Command{
		Use:   "transfer --version V (--schematics FILE | --cached) --key PUB... [--sign-key KEY] FROM TO",
		Short: "Carry a verified release and its cached schematics from one factory instance to another",
		Long: `transfer moves what a factory instance serves for release V to another
instance in one command, so the destination serves it at once, with no build:

  - the release, verified with --key at FROM before anything is copied and at
    TO after (every image, signature, attestation and referrer, by digest:
    builder mirror's copy);
  - the schematics of --schematics FILE (one ID a line, # comments) and, with
    --cached, every schematic with a cached artifact or installer of V;
  - their cache entries of V (artifacts and installer images) with the
    factory's signatures.

FROM and TO name instances by their release store: docker://HOST[:PORT]/PREFIX
(the cache is PREFIX/factory-cache), oci:DIR (the cache is the factory-cache
directory beside it) or oci-archive:FILE for the air gap, which carries the
cache inside (factory-cache/...) and is sealed like a mirror archive;
--from-cache and --to-cache name other caches. The cache entries keep the
source factory's signatures: a destination factory that signs with another
key would rebuild them, so --sign-key KEY signs every entry (and every image
of the release) at TO with the destination's key (COSIGN_PASSWORD), beside the
signatures it has. A transfer killed midway resumes when run again (what is
there is not copied twice). The parity report (--report FILE, --json) lists
every manifest with both digests; any miss exits 1. Cache keys name the
builder: the destination serves the entries when it runs the same builder.`,
		Example: `  builder factory transfer --version 1.11.0 --cached --key dev.pub \
    docker://internal:5000/nodeforge/p11 docker://external:5000/nodeforge/p11
  builder factory transfer --version 1.11.0 --schematics top.txt --key dev.pub \
    docker://internal:5000/nodeforge/p11 oci-archive:/media/usb/p11-1.11.0.tar
  builder factory transfer --version 1.11.0 --cached --key dev.pub \
    oci-archive:/media/usb/p11-1.11.0.tar docker://perimeter:5000/nodeforge/p11`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTransfer(cmd.Context(), f, args[0], args[1], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.version, "version", "", "the release version (required)")
	fl.StringVar(&f.schematics, "schematics", "", "a file of schematic IDs to carry, one a line")
	fl.BoolVar(&f.cached, "cached", false, "carry every schematic with a cached entry of the version")
	fl.StringArrayVar(&f.keys, "key", nil, "a public key the release must verify with, at FROM and at TO (repeatable; required)")
	fl.StringArrayVar(&f.archiveKeys, "archive-key", nil, "a public key an archive's seal must be made with (FROM an archive)")
	fl.StringVar(&f.signKey, "sign-key", "", "sign the release and the cache entries at TO with this cosign key (the destination's), and seal an archive with it")
	fl.StringVar(&f.fromCache, "from-cache", "", "FROM's cache store (default: beside FROM)")
	fl.StringVar(&f.toCache, "to-cache", "", "TO's cache store (default: beside TO)")
	fl.StringVar(&f.report, "report", "", "write the parity report here (JSON)")
	fl.StringVar(&f.work, "work", "", "scratch directory for archives (default: the system's)")
	fl.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	f.sf.addRemote(fl)
	return cmd
}

// transferEnds are the two instances, opened.
type transferEnds struct {
	o      factory.TransferOptions
	source *release.MirrorSource
	dest   *release.MirrorDestination // TO; an archive's staging layout is sealed at the end
	inside bool                       // TO's cache is inside the staging layout
}

func runTransfer(ctx context.Context, f transferFlags, from, to string, stdout, stderr io.Writer) error {
	if f.version == "" || len(f.keys) == 0 || (f.schematics == "" && !f.cached) {
		return errors.New("--version, --key and --schematics FILE or --cached are required")
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	keys, err := loadVerifiers(f.keys)
	if err != nil {
		return err
	}
	var signer *signing.Signer
	if f.signKey != "" {
		if signer, err = loadSigner(f.signKey); err != nil {
			return err
		}
	}
	ends, err := openTransferEnds(ctx, f, from, to, logf)
	if err != nil {
		return err
	}
	defer ends.source.Close()
	o := ends.o
	o.Version, o.Cached, o.Keys, o.Log = f.version, f.cached, keys, logf
	if f.schematics != "" {
		if o.Schematics, err = readSchematicList(f.schematics); err != nil {
			return err
		}
	}
	rep, terr := factory.Transfer(ctx, o)
	if terr == nil && signer != nil {
		terr = signTransferred(ctx, o, rep, signer, logf)
	}
	if terr == nil && ends.dest.Layout != nil {
		terr = sealTransfer(o, rep, ends, signer, logf)
	}
	if err := writeTransferReport(stdout, f, rep); err != nil {
		return err
	}
	if terr != nil {
		return &exitError{code: 1, err: terr}
	}
	return nil
}

// openTransferEnds opens FROM (a registry, a layout or a verified
// archive) and TO (a registry, or an archive's staging layout) with their
// caches.
func openTransferEnds(ctx context.Context, f transferFlags, from, to string, logf func(string, ...any)) (*transferEnds, error) {
	src, err := parseMirrorEnd(from)
	if err != nil {
		return nil, err
	}
	dst, err := parseMirrorEnd(to)
	if err != nil {
		return nil, err
	}
	if src.String() == dst.String() {
		return nil, fmt.Errorf("FROM and TO are the same: %s", src)
	}
	archiveKeys, err := loadVerifiers(f.archiveKeys)
	if err != nil {
		return nil, err
	}
	opts := release.MirrorEndOptions{Remote: f.sf.remote(ctx), ArchiveKeys: archiveKeys, Work: f.work, TempDir: os.TempDir(), Log: logf}
	e := &transferEnds{}
	if e.source, err = release.OpenMirrorSource(ctx, src, opts); err != nil {
		return nil, err
	}
	e.o.FromRelease = e.source.Store
	if m := e.source.Archive; m != nil && hasCacheItems(m.Predicate.Items) {
		e.o.SourceItems, e.o.FromCache = m.Predicate.Items, oci.Prefixed{Store: e.source.Store, Prefix: factory.CachePrefix}
	} else if e.o.FromCache, err = openFactoryCache(ctx, f.fromCache, from, f.sf); err != nil {
		e.source.Close()
		return nil, err
	}
	dest, err := release.OpenMirrorDestination(ctx, dst, opts)
	if err != nil {
		e.source.Close()
		return nil, err
	}
	e.o.ToRelease, e.dest = dest.Store, dest
	switch {
	case f.toCache != "":
		e.o.ToCache, err = openFactoryCache(ctx, f.toCache, to, f.sf)
	case dst.Kind == oci.KindArchive:
		e.o.ToCache, e.inside = oci.Prefixed{Store: dest.Store, Prefix: factory.CachePrefix}, true
	default:
		e.o.ToCache, err = openFactoryCache(ctx, "", to, f.sf)
	}
	if err != nil {
		e.source.Close()
		return nil, err
	}
	return e, nil
}

// hasCacheItems says whether an archive carries a factory's cache.
func hasCacheItems(items []release.Item) bool {
	for _, it := range items {
		if strings.HasPrefix(it.Repo, factory.CachePrefix) {
			return true
		}
	}
	return false
}

// readSchematicList reads schematic IDs, one a line, # comments.
func readSchematicList(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ids []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if len(line) != 64 || strings.Trim(line, "0123456789abcdef") != "" {
			return nil, fmt.Errorf("%s:%d: %q is not a schematic ID (64 lower-case hex digits)", path, n, line)
		}
		ids = append(ids, line)
	}
	return ids, sc.Err()
}

// signTransferred signs at TO every image of the release and every cache
// entry with the destination's key, then verifies the release with it.
func signTransferred(ctx context.Context, o factory.TransferOptions, rep *factory.TransferReport, signer *signing.Signer, logf func(string, ...any)) error {
	sign := func(st oci.Store, mr *release.MirrorReport) error {
		if mr == nil {
			return nil
		}
		for _, p := range mr.Items {
			if (p.Kind != release.KindRelease && p.Kind != release.KindChild) || p.Repo == factory.RepoSchematics {
				continue
			}
			if err := factory.SignEntry(ctx, signer, st, p.Item); err != nil {
				return fmt.Errorf("signing %s: %w", st.Ref(p.Repo, p.Digest), err)
			}
		}
		return nil
	}
	logf("signing at %s with the destination's key", o.ToRelease)
	if err := sign(o.ToRelease, rep.Release); err != nil {
		return err
	}
	if err := sign(o.ToCache, rep.Cache); err != nil {
		return err
	}
	_, probs := release.VerifyRelease(ctx, o.ToRelease, rep.Release.ItemList(), []signing.Verifier{signer.Verifier()}, nil, false)
	if len(probs) > 0 {
		rep.OK, rep.Problems = false, append(rep.Problems, probs...)
		return fmt.Errorf("%w: the release does not verify with --sign-key at %s", release.ErrMirrorIncomplete, o.ToRelease)
	}
	return nil
}

// sealTransfer seals an archive destination: the release's items and, when
// the cache went inside, the cache's below factory-cache/.
func sealTransfer(o factory.TransferOptions, rep *factory.TransferReport, e *transferEnds, signer *signing.Signer, logf func(string, ...any)) error {
	items := rep.Release.ItemList()
	if e.inside && rep.Cache != nil {
		items = append(items, factory.CacheItems(rep.Cache.ItemList())...)
	}
	info, err := e.dest.Seal(items, release.SealOptions{Version: rep.Version, Source: o.FromRelease.String(), Signer: signer}, 0, logf)
	if err != nil {
		return err
	}
	rep.Release.Archive = info
	return nil
}

func writeTransferReport(w io.Writer, f transferFlags, rep *factory.TransferReport) error {
	if f.report != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(f.report, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if f.asJSON {
		return printJSON(w, rep)
	}
	status := "complete"
	if !rep.OK {
		status = "INCOMPLETE"
	}
	fmt.Fprintf(w, "transfer of %s: %s; %d schematics, %d cached entries\n", rep.Version, status, len(rep.Schematics), rep.Entries)
	for _, p := range rep.Problems {
		fmt.Fprintln(w, "  problem:", p)
	}
	return nil
}
