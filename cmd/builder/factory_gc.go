package main

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/factory"
)

func newFactoryGCCmd() *cobra.Command {
	f := &serveFlags{maxBuilds: 1} // gc builds nothing
	var o factory.CollectOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "gc --release STORE... --key PUB... [--cache STORE] --keep-versions N [--dry-run] [--json]",
		Short: "Remove a factory's cache entries of the versions it no longer serves",
		Long:  factoryGCHelp,
		Example: `  # what would go, keeping the two newest versions
  builder factory gc --release docker://registry.example/nodeforge/p11 --key p11.pub \
    --keep-versions 2 --dry-run
  # then remove them (the registry must accept deletes)
  builder factory gc --config /etc/nodeforge/factory.yaml --keep-versions 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runFactoryGC(cmd, f, o, asJSON) },
	}
	fl := cmd.Flags()
	f.addStoreFlags(fl)
	fl.IntVar(&o.KeepVersions, "keep-versions", 0, "how many served versions keep their entries: the newest by source date, ties by version (required, at least 1)")
	fl.BoolVar(&o.DryRun, "dry-run", false, "list the entries that would be removed; remove nothing")
	fl.DurationVar(&o.PruneGrace, "prune-grace", time.Hour, "a layout cache: remove the blobs no entry names any more once they are this old (younger ones may be a writer's)")
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

const factoryGCHelp = `gc removes from a factory's cache store the entries of the versions the factory
no longer serves, through the store's delete API.

What is kept. The factory is the one factory serve runs on the same flags (or
--config file): every version of the release stores is verified with the keys,
as serve does at start. The --keep-versions N newest of the versions that verify
keep their entries: newest by the release's source date (SOURCE_DATE_EPOCH, the
date of its newest sources), two releases of one date by version (rpm's
comparison). A version that is listed but does not verify keeps its entries too
(a key or a store may be fixed: what it holds is not known to be dead), and gc
names it; so does a --broken-version (not counted in N: unmarking it serves its
entries again). A release store that cannot be listed stops gc before anything is
deleted. Schematics are always kept: they are small and belong to no version.
Entries that name no version (written before entries were annotated) are kept
and counted.

What is deleted. Every other entry: the artifacts (repository artifacts, one
manifest per artifact, tagged with its cache key) and the installer images
(repository installers, one index per schematic, platform and version), each
with its signature (cosign's sha256-DIGEST.sig tag). Entries are read by their
annotations: a key is a hash and says nothing.

The order. For each entry: its tag, then its manifest by digest, then its
signature's tag and manifest. A request never finds a tag naming an unsigned
entry, and a gc cut short is finished by the next one (a signature left without
its entry is found and removed). A registry that deletes manifests only by digest
(CNCF distribution 2.x) loses the tags with them; one that refuses deletes stops
gc with a message saying so (distribution: storage: delete: enabled: true). The
registry frees the blobs in its own garbage collection (registry
garbage-collect). In a layout (oci:DIR) the entries leave index.json, each in
one atomic update under the layout's lock, and then the blobs that nothing names
any more and that are older than --prune-grace are removed.

--dry-run lists exactly the entries that would go (version, schematic,
artifact, key) and deletes nothing. Factories still serving a dropped version
rebuild what is asked of it: run gc after the releases left the stores, or with
an N that covers what is served.`

func runFactoryGC(cmd *cobra.Command, f *serveFlags, o factory.CollectOptions, asJSON bool) error {
	if !cmd.Flags().Changed("keep-versions") {
		return fmt.Errorf("--keep-versions N is required: how many of the newest served versions keep their entries")
	}
	if err := f.settle(cmd.Flags()); err != nil {
		return err
	}
	srv, done, err := f.offlineFactory(cmd)
	if err != nil {
		return err
	}
	defer done()
	rep, err := srv.Collect(cmd.Context(), o)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(cmd.OutOrStdout(), rep)
	}
	return writeCollectReport(cmd.OutOrStdout(), rep)
}

// writeCollectReport prints the entries gone (or going) and a summary.
func writeCollectReport(w io.Writer, rep *factory.CollectReport) error {
	verb := "removed"
	if rep.DryRun {
		verb = "would remove"
	}
	if len(rep.Entries) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "VERSION\tSCHEMATIC\tARTIFACT\tKEY")
		for _, e := range rep.Entries {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cmp.Or(e.Version, "-"), cmp.Or(e.Schematic, "-"), e.Artifact, cmp.Or(e.Key, e.Digest))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "%s: kept versions %s (%d entries); %s %d entries of versions %s\n", rep.Store,
		cmp.Or(strings.Join(rep.Kept, ", "), "none"), rep.KeptEntries, verb, len(rep.Entries), cmp.Or(strings.Join(rep.Dropped, ", "), "none"))
	if len(rep.Broken) > 0 {
		fmt.Fprintf(w, "kept as well, marked broken: %s\n", strings.Join(rep.Broken, ", "))
	}
	if len(rep.Unverified) > 0 {
		fmt.Fprintf(w, "kept as well, listed but not verified: %s\n", strings.Join(rep.Unverified, ", "))
	}
	if len(rep.Unlabelled) > 0 {
		fmt.Fprintf(w, "kept: %d entries that name no version\n", len(rep.Unlabelled))
	}
	if rep.Pruned != nil {
		fmt.Fprintf(w, "freed %d blobs, %.1f MiB\n", rep.Pruned.Blobs, float64(rep.Pruned.Bytes)/(1<<20))
	}
	return nil
}
