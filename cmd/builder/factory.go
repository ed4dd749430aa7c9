package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/oci"
)

func init() { register(newFactoryCmd) }

func newFactoryCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "factory",
		Short: "The Image Factory: node images on demand for any schematic, from signed releases",
	}
	cmd.AddCommand(newFactoryServeCmd())
	return cmd
}

func newFactoryServeCmd() *cobra.Command {
	var stores, keys []string
	var cacheLoc, listen, metricsListen, external, signingKey string
	var maxBuilds int
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "serve --release STORE... --key PUB... [--signing-key KEY] [--cache STORE] [--listen ADDR] [--metrics-listen ADDR] [--external-url URL]",
		Short: "Serve schematics and node images composed on demand from verified releases",
		Long: `serve answers the Image Factory's HTTP API (the upstream factory's routes, so
curl recipes and talosctl work) from releases published by builder release:

  POST /schematics                          a schematic (YAML or JSON, at most
                                            64 KiB) -> 201 {"id", "schematic"}
  GET  /schematics/ID                       its canonical YAML
  GET  /versions[?branch=B]                 the versions served
  GET  /version/V/extensions/official       the release's extensions
  GET  /image/ID/V/ARTIFACT[.sha256|.sha512|.sig]
                                            kernel-ARCH, initramfs-ARCH.xz,
                                            cmdline-PLATFORM-ARCH,
                                            PLATFORM-ARCH.{iso,raw,qcow2,vhd,
                                            raw.tar.gz}[.xz|.zst]; Range, ETag
                                            (.sig: cosign sign-blob's, by the
                                            factory's key)
  GET  /oci/cosign/signing-key.pub          that key
  GET  /pxe/ID/V/PLATFORM-ARCH              an iPXE script pointing back here
  GET  /healthz, /readyz                    liveness; readiness names every
                                            release that did not verify

STORE is docker://HOST[:PORT]/PREFIX or oci:DIR; every version in it (the tags
of its lock repository) is verified with the keys at start, and one that fails
is not served. Artifacts are the bytes builder image --release writes for the
same schematic and release; they are composed when first asked for (one build
per artifact at a time, --max-builds at once), needing no package base, and
kept in the cache store (default: factory-cache beside the first release
store) signed by --signing-key: an entry whose signature or digest does not
hold is built again and overwritten, never served. Schematics live in the
cache store too, so every factory on it sees them. --metrics-listen serves
Prometheus metrics (builds, cache hits and errors by version, kind and
architecture, build time, requests by route and status). Not yet: the /v2/
registry front, the web UI, TLS and logins.`,
		Example: `  COSIGN_PASSWORD=demo builder factory serve --release oci:out/demo/release/dev \
    --key out/demo/keys/dev/cosign.pub --signing-key out/demo/keys/dev/cosign.key
  curl -X POST --data-binary @zfs.yaml http://127.0.0.1:8080/schematics
  curl -O http://127.0.0.1:8080/image/ID/1.11.0-demo/metal-amd64.iso`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(stores) == 0 || len(keys) == 0 {
				return errors.New("--release STORE and --key PUB are required")
			}
			vs, err := loadVerifiers(keys)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var rs []factory.ReleaseStore
			for _, s := range stores {
				st, err := sf.openStore(s, false)
				if err != nil {
					return err
				}
				if err := reachable(ctx, st); err != nil {
					return err
				}
				rs = append(rs, factory.ReleaseStore{Store: st, Keys: vs})
			}
			cache, err := openFactoryCache(cacheLoc, stores[0], sf)
			if err != nil {
				return err
			}
			work, err := os.MkdirTemp("", "nodeforge-factory-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(work)
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			o := factory.ServerOptions{Releases: rs, Cache: cache, ExternalURL: external, Work: work, MaxBuilds: maxBuilds, Log: log, BuilderVersion: selfDigest()}
			if signingKey != "" {
				if o.Signer, err = loadSigner(signingKey); err != nil {
					return err
				}
			} else {
				log.Warn("no --signing-key: built artifacts are not cached (every request composes)")
			}
			srv, err := factory.NewServer(ctx, o)
			if err != nil {
				return err
			}
			if metricsListen != "" {
				ln, err := net.Listen("tcp", metricsListen)
				if err != nil {
					return fmt.Errorf("--metrics-listen: %w", err)
				}
				log.Info("metrics", "address", "http://"+ln.Addr().String()+"/metrics")
				mux := http.NewServeMux()
				mux.Handle("GET /metrics", srv.MetricsHandler())
				ms := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
				go ms.Serve(ln)
				defer ms.Close()
			}
			return serveHTTP(ctx, listen, srv.Handler(), log)
		},
	}
	cmd.Flags().StringArrayVar(&stores, "release", nil, "a release store: docker://HOST[:PORT]/PREFIX or oci:DIR (repeatable)")
	cmd.Flags().StringArrayVar(&keys, "key", nil, "a public key releases must verify with (repeatable)")
	cmd.Flags().StringVar(&cacheLoc, "cache", "", "the cache store (default: factory-cache beside the first release store)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "address to serve on")
	cmd.Flags().StringVar(&metricsListen, "metrics-listen", "", "address to serve Prometheus metrics on (/metrics), apart from the API")
	cmd.Flags().StringVar(&external, "external-url", "", "the URL clients reach the factory at (PXE scripts point there; default: the request's host)")
	cmd.Flags().IntVar(&maxBuilds, "max-builds", 2, "artifacts composed at once")
	cmd.Flags().StringVar(&signingKey, "signing-key", "", "cosign.key signing the cache's entries (COSIGN_PASSWORD); without it nothing built is cached")
	sf.addRemote(cmd.Flags())
	return cmd
}

// openFactoryCache opens (creating a layout if needed) the cache store:
// loc, or factory-cache beside the release store first.
func openFactoryCache(loc, first string, sf storeFlags) (oci.Store, error) {
	if loc == "" {
		l, err := oci.ParseLocation(first)
		if err != nil {
			return nil, err
		}
		if l.Kind == oci.KindLayout {
			l.Path = filepath.Join(filepath.Dir(filepath.Clean(l.Path)), "factory-cache")
		} else {
			l.Path += "/factory-cache"
		}
		loc = l.String()
	}
	return sf.openStore(loc, true)
}

// serveHTTP serves h on addr until ctx ends, then lets the requests in
// flight finish (for up to 30 s).
func serveHTTP(ctx context.Context, addr string, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving", "address", "http://"+ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			return fmt.Errorf("shutting down: %w", err)
		}
		return nil
	}
}
