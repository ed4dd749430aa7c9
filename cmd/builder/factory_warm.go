package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodeforge/builder/factory"
)

// addStoreFlags adds the flags that say where a factory's releases and
// cache are, how registries are reached and which versions are broken.
// serve, warm and gc take the same, so one --config file (or environment)
// gives the three one factory: warm does not build a version serve
// refuses.
func (f *serveFlags) addStoreFlags(fl *pflag.FlagSet) {
	fl.StringVar(&f.config, "config", "", "a YAML file saying flags under their names, one file for serve, warm and gc (flags given override it; relative paths are the file's; a setting of serve that this command does not take is passed over)")
	fl.StringArrayVar(&f.stores, "release", nil, "a release store: docker://HOST[:PORT]/PREFIX or oci:DIR (repeatable)")
	fl.StringArrayVar(&f.keys, "key", nil, "a public key releases must verify with (repeatable)")
	fl.StringVar(&f.cache, "cache", "", "the cache store (default: factory-cache beside the first release store)")
	fl.StringSliceVar(&f.brokenVersions, "broken-version", nil, "a version (v1.11.0 or 1.11.0) marked broken: serve neither lists nor serves it, never as latest (/versions?broken=true lists them), warm refuses it, gc keeps its entries")
	f.sf.addRemote(fl)
}

// offlineFactory is the factory serve would run on the same (settled)
// flags, without listening: warm and gc work on its releases and cache.
// Its log (releases not served) goes to stderr; done removes its scratch
// directory.
func (f *serveFlags) offlineFactory(cmd *cobra.Command) (svc *factory.Service, done func(), err error) {
	work, err := os.MkdirTemp("", "nodeforge-factory-")
	if err != nil {
		return nil, nil, err
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	o, err := f.options(cmd.Context(), work, log)
	if err == nil {
		svc, err = factory.NewService(cmd.Context(), o)
	}
	if err != nil {
		os.RemoveAll(work)
		return nil, nil, err
	}
	return svc, func() { os.RemoveAll(work) }, nil
}

func newFactoryWarmCmd() *cobra.Command {
	f := &serveFlags{maxBuilds: 1} // one build at a time: warm asks for one artifact after another
	var o factory.WarmOptions
	var list string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "warm --release STORE... --key PUB... [--cache STORE] --signing-key KEY --version V --schematics FILE [--platform P]... [--artifacts NAME,...]",
		Short: "Build schematics' artifacts into a factory's cache ahead of the requests",
		Long:  factoryWarmHelp,
		Example: `  # the 20 most requested schematics, from factory serve's request log
  grep -oE 'path=/(image|pxe|v2/[a-z]*-?installer)/[0-9a-f]{64}' factory.log | grep -oE '[0-9a-f]{64}' |
    sort | uniq -c | sort -rn | head -20 | awk '{print $2}' > top.txt
  COSIGN_PASSWORD=demo builder factory warm --release oci:out/demo/release/dev \
    --key out/demo/keys/dev/cosign.pub --signing-key out/demo/keys/dev/cosign.key \
    --version 1.11.0-demo --schematics top.txt

  # only the ISO and the installer, for metal and aws
  builder factory warm --config /etc/nodeforge/factory.yaml --version 1.11.0-demo \
    --schematics top.txt --platform metal --platform aws --artifacts iso,installer`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runFactoryWarm(cmd, f, o, list, asJSON)
		},
	}
	fl := cmd.Flags()
	f.addStoreFlags(fl)
	fl.StringVar(&f.signingKey, "signing-key", "", "cosign.key signing the entries (COSIGN_PASSWORD): the key factory serve checks them with")
	fl.StringVar(&o.Version, "version", "", "the release version to build for (one the release stores serve)")
	fl.StringVar(&list, "schematics", "", "a file of schematic IDs, one a line (# comments), each in the cache store")
	fl.StringArrayVar(&o.Platforms, "platform", nil, "a platform whose media are built (repeatable; default metal)")
	fl.StringSliceVar(&o.Artifacts, "artifacts", nil, "what is built: kernel, initramfs, cmdline, installer, or disk formats (iso, raw, qcow2, vhd, ova, raw.tar.gz; also with .xz, .zst or .gz) (default: kernel, initramfs, cmdline, the platform's formats, installer)")
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

const factoryWarmHelp = `warm builds the artifacts of listed schematics for one version into the
factory's cache store before anyone asks for them, so that the first download
(or the first pull of an installer, the upgrade that would time out) is served
from the cache. The typical list is the most requested schematics, from the
factory's request log (the metrics count by version and kind, not by schematic).

The factory is the one factory serve runs on the same flags (or --config file):
the same releases, verified with the same keys, and the same cache. Each
artifact is made through the code path of a request for it, with the same cache
key and signed by --signing-key, so a factory serve on the cache answers it
without a build. Run warm with the builder that serves: the builder's digest is
part of every key.

For each schematic, each --platform (default metal) and each architecture of
the version, warm builds:
  kernel       kernel-ARCH
  initramfs    initramfs-ARCH.xz, with the schematic's extensions
  cmdline      cmdline-PLATFORM-ARCH
  FORMAT       PLATFORM-ARCH.FORMAT: iso, raw, qcow2, vhd, ova, raw.tar.gz (all
               but raw.tar.gz also .xz, .zst or .gz)
  installer    the installer image: installer/ID:V for metal,
               PLATFORM-installer/ID:V for another platform (every
               architecture in one index)
--artifacts chooses among them; the default is kernel, initramfs, cmdline, the
platform's own formats and installer.

FILE lists schematic IDs, one a line; # starts a comment. Each must be in the
cache store already (created with POST /schematics, or carried by factory
transfer): an unknown ID stops warm before anything is built, naming it.
Artifacts the cache holds are counted and not built again; the others are built
one at a time, each reported once its signed cache entry is written (an entry
that cannot be written stops warm, naming the artifact and the cause). Progress
goes to stderr, the report to stdout (--json for JSON). An interrupted warm
caches the artifact it has just built and leaves only whole, signed entries:
run it again to finish.`

func runFactoryWarm(cmd *cobra.Command, f *serveFlags, o factory.WarmOptions, list string, asJSON bool) error {
	if o.Version == "" || list == "" {
		return errors.New("--version V and --schematics FILE are required")
	}
	ids, err := readSchematicList(list)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("%s lists no schematic ID", list)
	}
	o.Schematics = ids
	if err := f.settle(cmd.Flags()); err != nil {
		return err
	}
	if f.signingKey == "" {
		return errors.New("--signing-key KEY is required (or signing-key: in --config): without it nothing is cached")
	}
	srv, done, err := f.offlineFactory(cmd)
	if err != nil {
		return err
	}
	defer done()
	stderr := cmd.ErrOrStderr()
	o.Progress = func(it factory.WarmItem) {
		how := "cached"
		if it.Built {
			how = "built "
		}
		fmt.Fprintf(stderr, "%s %s  %s  %.1fs\n", how, it.Schematic[:12], it.Artifact, it.Seconds)
	}
	rep, err := srv.Warm(cmd.Context(), o)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(cmd.OutOrStdout(), rep)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "warmed %d artifacts of %d schematics for %s: %d built, %d already cached\n",
		len(rep.Items), len(ids), rep.Version, rep.Built, rep.Cached)
	return nil
}
