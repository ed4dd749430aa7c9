package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/nodeforge/builder/factory"
	"github.com/nodeforge/builder/factory/server"
	"github.com/nodeforge/builder/oci"
)

func init() { register(newFactoryCmd) }

func newFactoryCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "factory",
		Short: "The Image Factory: node images on demand for any schematic, from signed releases",
	}
	cmd.AddCommand(newFactoryServeCmd())
	cmd.AddCommand(newFactoryTransferCmd())
	cmd.AddCommand(newFactoryWarmCmd())
	cmd.AddCommand(newFactoryGCCmd())
	cmd.AddCommand(newFactoryHealthCmd())
	return cmd
}

// serveFlags are factory serve's flags; a --config file says the same
// under the same names.
type serveFlags struct {
	config                                                             string
	stores, keys, login, brokenVersions, allowedOrigins, proxies       []string
	cache, listen, metricsListen, external, signingKey, secureBootKeys string
	tlsCert, tlsKey, htpasswd, tokens                                  string
	maxBuilds, maxQueue, buildBurst                                    int
	buildRate                                                          float64
	buildTimeout                                                       time.Duration
	schematicRate                                                      float64
	schematicBurst, maxSchematics, maxConnections                      int
	bodyTimeout, idleTimeout, verifyInterval, shutdownGrace            time.Duration
	insecureListen                                                     bool
	sf                                                                 storeFlags
	releases                                                           []factory.ConfigRelease // settled: stores with their keys
}

func newFactoryServeCmd() *cobra.Command {
	cmd, _ := factoryServeCommand()
	return cmd
}

// factoryServeCommand is factory serve with the flags it fills.
func factoryServeCommand() (*cobra.Command, *serveFlags) {
	f := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve --release STORE... --key PUB... [--cache STORE] [--signing-key KEY] [--listen ADDR] [--metrics-listen ADDR] [--external-url URL] [--config FILE]",
		Short: "Serve schematics and node images composed on demand from verified releases",
		Long:  factoryServeHelp,
		Example: `  COSIGN_PASSWORD=demo builder factory serve --release oci:out/demo/release/dev \
    --key out/demo/keys/dev/cosign.pub --signing-key out/demo/keys/dev/cosign.key
  curl -X POST --data-binary @zfs.yaml http://127.0.0.1:8080/schematics
  curl -O http://127.0.0.1:8080/image/ID/1.11.0-demo/metal-amd64.iso

  # an internal factory: HTTPS, a login to build and to read metrics
  htpasswd -cB /etc/nodeforge/htpasswd alice
  builder factory serve --config /etc/nodeforge/factory.yaml
  curl --cacert ca.pem -u alice -X POST --data-binary @zfs.yaml https://factory.example:8443/schematics

  # /etc/nodeforge/factory.yaml
  release:
    - store: docker://registry.example/nodeforge/p11
      key: keys/p11.pub
  signing-key: keys/factory.key
  listen: 0.0.0.0:8443
  tls-cert: tls/factory.crt
  tls-key: tls/factory.key
  htpasswd: htpasswd
  tokens: tokens            # ci:sha256:<sha256sum of the token>
  login: [build, metrics]
  max-builds: 4
  build-rate: 20`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd) },
	}
	fl := cmd.Flags()
	f.addStoreFlags(fl)
	fl.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to serve on (plain HTTP only on loopback: see --tls-cert)")
	fl.StringVar(&f.metricsListen, "metrics-listen", "", "address to serve Prometheus metrics on (/metrics), apart from the API")
	fl.StringVar(&f.external, "external-url", "", "the URL clients reach the factory at (PXE scripts point there; default: the request's host)")
	fl.IntVar(&f.maxBuilds, "max-builds", runtime.NumCPU(), "artifacts composed at once (the default is the core count)")
	fl.IntVar(&f.maxQueue, "max-queue", 0, "builds waiting for one of --max-builds; past it 503 with Retry-After (default: 4 × --max-builds)")
	fl.DurationVar(&f.buildTimeout, "build-timeout", 10*time.Minute, "time limit of one build")
	fl.DurationVar(&f.shutdownGrace, "shutdown-grace", 0, "on SIGTERM or SIGINT, the time the requests and builds in flight have to finish (default: --build-timeout); a second signal exits at once")
	fl.StringVar(&f.signingKey, "signing-key", "", "cosign.key signing the cache's entries and .sig files (COSIGN_PASSWORD); without it nothing built is cached")
	fl.StringVar(&f.secureBootKeys, "secureboot", "", "serve -secureboot media signed with the Secure Boot key set in this directory (builder keys generate --secureboot)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM, with its chain)")
	fl.StringVar(&f.tlsKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	fl.BoolVar(&f.insecureListen, "insecure-listen", false, "permit plain HTTP on an address that is not loopback (logins and downloads travel in clear)")
	fl.StringVar(&f.htpasswd, "htpasswd", "", "users and their bcrypt password hashes, USER:HASH a line (htpasswd -B)")
	fl.StringVar(&f.tokens, "tokens", "", "bearer tokens, NAME:TOKEN or NAME:sha256:HEX a line (HEX: sha256sum of the token)")
	fl.StringSliceVar(&f.login, "login", nil, "the surfaces that need a login: build, download, pull, metrics, or none (default with --htpasswd or --tokens: build)")
	fl.Float64Var(&f.buildRate, "build-rate", 20, "builds one client (user, or address) may trigger a minute; past it 429 with Retry-After (0: no bound)")
	fl.IntVar(&f.buildBurst, "build-burst", 10, "builds one client may trigger at once within --build-rate")
	fl.Float64Var(&f.schematicRate, "schematic-rate", 30, "new schematics one client may store a minute; past it 429 with Retry-After (0: no bound)")
	fl.IntVar(&f.schematicBurst, "schematic-burst", 20, "new schematics one client may store at once within --schematic-rate")
	fl.IntVar(&f.maxSchematics, "max-schematics", 100000, "schematics the cache store may hold; past it a new one gets 507 (0: no cap)")
	fl.DurationVar(&f.bodyTimeout, "body-timeout", 30*time.Second, "time a request's body may take to arrive; past it 408 and the connection is closed")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 2*time.Minute, "a keep-alive connection idle this long is closed")
	fl.IntVar(&f.maxConnections, "max-connections", 1024, "connections served at once; more wait to be accepted")
	fl.DurationVar(&f.verifyInterval, "verify-interval", 10*time.Minute, "a cached artifact in a layout cache is hashed again when it changed or was last hashed longer ago than this (a registry's are verified as they stream)")
	fl.StringSliceVar(&f.allowedOrigins, "allowed-origin", []string{"*"}, "origins whose pages may download across sites (CORS): * or SCHEME://HOST[:PORT], one * standing for any part")
	fl.StringSliceVar(&f.proxies, "trusted-proxies", nil, "address ranges (CIDR, or addresses) of the proxies whose X-Forwarded-For or Forwarded header names the client, for rate limits and logs (default: none, the peer is the client)")
	return cmd, f
}

const factoryServeHelp = `serve answers the Image Factory's HTTP API (the upstream factory's routes, so
curl recipes and talosctl work) from releases published by builder release:

  POST /schematics                          a schematic (YAML or JSON, at most
                                            64 KiB) -> 201 {"id", "schematic"}
  GET  /schematics/ID                       its canonical YAML
  GET  /versions[?branch=B]                 the versions served, Talos's way
                                            (["v1.11.0-demo"]), broken ones
                                            left out; ?broken=true: those
  GET  /version/V/extensions/official       the release's extensions
  GET  /version/V/overlays/official         [] (releases ship no overlays)
  GET  /talosctl/V                          404: releases ship no talosctl
  GET  /image/ID/V/ARTIFACT[.sha256|.sha512|.sig][?filename=NAME]
                                            kernel-ARCH, initramfs-ARCH.xz,
                                            cmdline-PLATFORM-ARCH,
                                            PLATFORM-ARCH.{iso,raw,qcow2,vhd,
                                            ova,raw.tar.gz}[.xz|.zst|.gz],
                                            PLATFORM-ARCH-uki.efi,
                                            [PLATFORM-]installer-ARCH.tar;
                                            Range, ETag
                                            (.sig: cosign sign-blob's, by the
                                            factory's key); with --secureboot
                                            also PLATFORM-ARCH-secureboot.FORMAT,
                                            PLATFORM-ARCH-secureboot-uki.efi
                                            (builder image --secureboot's) and
                                            [PLATFORM-]installer-ARCH-secureboot.tar
  GET  /oci/cosign/signing-key.pub          that key
  GET  /secureboot/signing-cert.pem         the certificate of --secureboot's
                                            db key, which signs those media
  GET  /pxe/ID/V/PLATFORM-ARCH[-secureboot] upstream's iPXE script, pointing
                                            back here
  GET  /healthz, /readyz                    liveness; readiness: the versions
                                            served, then a line for each store
                                            or version not served, and why;
                                            503 naming it while a tool a
                                            request needs is not on PATH
                                            (xorriso, for ISOs)
  GET  /                                    the web UI: a wizard from branch and
                                            version to every link (English and
                                            Russian: ?lang=, cookie, or
                                            Accept-Language); no JavaScript
  GET  /v2/...                              a read-only OCI registry of the
                                            schematic's installer images,
                                            installer/ID:V and
                                            PLATFORM-installer/ID:V (V also
                                            latest: the newest stable), built on
                                            demand as multi-arch indexes and
                                            signed by the factory's key (cosign
                                            verify --key signing-key.pub), and
                                            extensions/NAME:V, each release's
                                            extension images as it signed them

V is a version either way, v1.11.0-demo (Talos's, what the factory lists and
links) or 1.11.0-demo (the release's); --broken-version marks one broken, as
upstream: not listed, not served, never latest. Answers carry a Server header
naming the factory, each artifact's media type and a Content-Disposition
(?filename= renames the download), and CORS headers for the --allowed-origin
pages (default any, as upstream; GET and HEAD, preflights answered without a
login). Errors are upstream's status codes and, where clients match on them,
its words (404 schematic ID "X" not found).

STORE is docker://HOST[:PORT]/PREFIX or oci:DIR; every version in it (the tags
of its lock repository) is verified with the keys at start, and one that fails
is not served; neither is a store that cannot be reached, and both are tried
again in the background. The factory starts when one release verifies, and
stops at once, saying why, when none does. Artifacts are the bytes builder image --release writes for the
same schematic and release; they are composed when first asked for and kept in
the cache store (default: factory-cache beside the first release store) signed
by --signing-key: an entry whose signature or digest does not hold, or that
was made for another request (its signed key is not the request's), is built
again and overwritten, never served. An entry in a registry is verified as it
streams (a damaged one's transfer is cut before its end); one in a layout is
hashed again when its file changed or every --verify-interval. Schematics live in the cache store too, so
every factory on it sees them. --metrics-listen serves Prometheus metrics
(builds, cache hits and errors by version, kind and architecture, build time,
builds in flight, requests by route and status).

Builds. Concurrent requests for one artifact run one build; --max-builds run at
once and --max-queue more wait, past which a request that needs a build gets
503 with Retry-After. A build is detached from the request that started it (a
client that hangs up cancels nothing others wait for) and ends after
--build-timeout. Each client (its user, or its address when anonymous) may
trigger --build-rate builds a minute, --build-burst at once: past that, 429
with Retry-After. What the cache holds is served without a build.

Stopping. On SIGTERM (or SIGINT) the factory accepts no new connection
and closes idle ones; the requests and builds in flight, those whose client
hung up included, have --shutdown-grace (default: --build-timeout, so a
build started just before the signal can finish) to end, their entries
cached, and the factory exits 0. A second signal, or the grace running out,
ends it at once (exit 130); a build cut so leaves no cache entry.

Bounds. A client may store --schematic-rate new schematics a minute,
--schematic-burst at once (429 past it; posting a known one is free), and the
store holds at most --max-schematics (507). A request's body must arrive within
--body-timeout (408, and the connection is closed); idle connections close
after --idle-timeout; --max-connections are served at once. A Range request
asking for more than 16 ranges gets the whole artifact.

Who may do what. The API has four surfaces, each anonymous or behind a login
(--login):
  build      creating schematics (any POST) and building what the cache lacks
             (a cached artifact is a download)
  download   artifacts, PXE scripts, schematics, versions, extensions, the
             signing key, the web UI
  pull       the registry front, /v2/
  metrics    --metrics-listen's /metrics
An internal factory typically says --login build (the default once logins are
given), an external one --login download,pull. /healthz and /readyz are always
open. Logins come from --htpasswd (bcrypt only: htpasswd -B; another scheme is
refused naming its line) and --tokens (NAME:TOKEN, or NAME:sha256:HEX so the
file holds no token; a token is at least 16 characters). Clients send HTTP
Basic (-u USER:PASSWORD; a token also works as its name's password, for docker
config.json) or Authorization: Bearer TOKEN; without one, or with a wrong one,
they get 401 with WWW-Authenticate: Basic realm="nodeforge-factory" (under
/v2/ as a registry says it, so crane, skopeo and containerd log in). The
request log names each request's user (or address); no password, token or key
is ever logged or shown by /readyz, and the signing key never leaves the
process.

Behind proxies. The client is the peer of the connection, unless the peer is
one of --trusted-proxies (CIDR ranges or addresses, none by default): then its
X-Forwarded-For (or, when a request has none, Forwarded's for=) is read from
the right, the first hop that is not a trusted proxy being the client. Its
address keys the anonymous rate limits and is logged (with the proxy, via=).
A header from any other peer is ignored, and a hop that is not an address
ends the walk at the last trusted one.

TLS. --tls-cert and --tls-key serve HTTPS (both listeners). Plain HTTP is
served on a loopback address only, unless --insecure-listen says otherwise.

--config FILE says any flag under its name in YAML (release: a list of STORE,
or of {store: STORE, key: [PUB...]} with keys of its own); a flag given on the
command line overrides the file; an unknown key is an error naming it. An
environment variable says any flag too, NODEFORGE_FACTORY_ and the flag's name
in capitals with underscores (NODEFORGE_FACTORY_MAX_BUILDS=4, lists
comma-separated, NODEFORGE_FACTORY_CONFIG for the file): over the file, under
the command line. COSIGN_PASSWORD unlocks --signing-key.`

// run serves until the command's context ends.
func (f *serveFlags) run(cmd *cobra.Command) error {
	if err := f.settle(cmd.Flags()); err != nil {
		return err
	}
	tlsConf, err := f.tlsConfig()
	if err != nil {
		return err
	}
	// The API's listener is bounded before TLS wraps it (a wrapped
	// tls.Conn would hide HTTP/2's negotiation from the server).
	ln, err := f.open("--listen", f.listen, nil)
	if err != nil {
		return err
	}
	defer ln.Close()
	var mln net.Listener
	if f.metricsListen != "" {
		if mln, err = f.open("--metrics-listen", f.metricsListen, tlsConf); err != nil {
			return err
		}
		defer mln.Close()
	}
	ctx := cmd.Context()
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	work, err := os.MkdirTemp("", "nodeforge-factory-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	o, err := f.serverOptions(ctx, work, log)
	if err != nil {
		return err
	}
	srv, err := server.New(ctx, o)
	if err != nil {
		return err
	}
	if f.signingKey == "" {
		log.Warn("no --signing-key: built artifacts are not cached (every request composes)")
	}
	if mln != nil {
		log.Info("metrics", "address", listenURL(mln, tlsConf)+"/metrics")
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", srv.MetricsHandler())
		ms := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		go ms.Serve(mln)
		defer ms.Close()
	}
	log.Info("serving", "address", listenURL(ln, tlsConf), "login", strings.Join(f.login, ","), "max-builds", f.maxBuilds)
	go srv.RetryFailed(ctx, time.Minute)
	api := srv.Listener(ln)
	if tlsConf != nil {
		api = tls.NewListener(api, tlsConf)
	}
	return srv.Serve(ctx, api, slog.NewLogLogger(log.Handler(), slog.LevelWarn), f.shutdownGrace)
}

// settle reads the config file under the flags given and checks what
// the flags say together.
func (f *serveFlags) settle(fl *pflag.FlagSet) error {
	var fileReleases []factory.ConfigRelease
	if err := applyFactoryEnv(fl); err != nil {
		return err
	}
	if f.config != "" {
		c, err := factory.LoadConfig(f.config)
		if err != nil {
			return err
		}
		if err := applyFactoryConfig(c, fl); err != nil {
			return err
		}
		fileReleases = c.Release
	}
	f.releases = nil
	for _, s := range f.stores {
		f.releases = append(f.releases, factory.ConfigRelease{Store: s})
	}
	if len(f.stores) == 0 {
		f.releases = fileReleases
	}
	if len(f.releases) == 0 {
		return errors.New("--release STORE (or release: in --config) is required")
	}
	for i, r := range f.releases {
		if len(r.Key) == 0 && len(f.keys) == 0 {
			return fmt.Errorf("release %s: no key to verify it with: give --key PUB (or key: in --config)", r.Store)
		}
		if len(r.Key) == 0 {
			f.releases[i].Key = f.keys
		}
	}
	f.login = slices.DeleteFunc(f.login, func(s string) bool { return s == "none" })
	if len(f.login) == 0 && !fl.Changed("login") && (f.htpasswd != "" || f.tokens != "") {
		f.login = []string{"build"}
	}
	if !fl.Changed("shutdown-grace") {
		f.shutdownGrace = f.buildTimeout // a build started just before the signal can finish
	}
	if f.maxBuilds < 1 {
		return fmt.Errorf("--max-builds %d: at least one build must run", f.maxBuilds)
	}
	for _, a := range []struct{ flag, addr string }{{"--listen", f.listen}, {"--metrics-listen", f.metricsListen}} {
		if a.addr != "" && f.tlsCert == "" && !f.insecureListen && !loopbackAddr(a.addr) {
			return fmt.Errorf("%s %s is not a loopback address: serve HTTPS there (--tls-cert, --tls-key), or pass --insecure-listen to serve plain HTTP, where logins and downloads travel in clear", a.flag, a.addr)
		}
	}
	return nil
}

// loopbackAddr says whether HOST:PORT is on loopback only.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tlsConfig is the listeners' TLS, nil for plain HTTP.
func (f *serveFlags) tlsConfig() (*tls.Config, error) {
	switch {
	case f.tlsCert == "" && f.tlsKey == "":
		return nil, nil
	case f.tlsCert == "" || f.tlsKey == "":
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s with --tls-key %s: %w", f.tlsCert, f.tlsKey, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}, nil
}

// open listens on addr, with TLS when conf is set.
func (f *serveFlags) open(flag, addr string, conf *tls.Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if conf != nil {
		return tls.NewListener(ln, conf), nil
	}
	return ln, nil
}

func listenURL(ln net.Listener, conf *tls.Config) string {
	if conf != nil {
		return "https://" + ln.Addr().String()
	}
	return "http://" + ln.Addr().String()
}

// serverOptions are factory serve's options: the service's (options)
// and its HTTP front's, with the logins.
func (f *serveFlags) serverOptions(ctx context.Context, work string, log *slog.Logger) (server.Options, error) {
	svc, err := f.options(ctx, work, log)
	if err != nil {
		return server.Options{}, err
	}
	o := server.Options{Service: svc, BodyTimeout: f.bodyTimeout, IdleTimeout: f.idleTimeout, MaxConnections: f.maxConnections,
		AllowedOrigins: f.allowedOrigins, TrustedProxies: f.proxies,
		Access: server.Access{Login: f.login, BuildRate: f.buildRate, BuildBurst: f.buildBurst,
			SchematicRate: f.schematicRate, SchematicBurst: f.schematicBurst}}
	if f.htpasswd != "" || f.tokens != "" {
		if o.Access.Credentials, err = server.LoadCredentials(f.htpasswd, f.tokens); err != nil {
			return server.Options{}, err
		}
	}
	return o, nil
}

// options opens the stores and the keys: the service's options (warm
// and gc run the service alone).
func (f *serveFlags) options(ctx context.Context, work string, log *slog.Logger) (factory.Options, error) {
	fail := func(err error) (factory.Options, error) { return factory.Options{}, err }
	var rs []factory.ReleaseStore
	for _, r := range f.releases {
		vs, err := loadVerifiers(r.Key)
		if err != nil {
			return fail(err)
		}
		st, err := f.sf.openStore(ctx, r.Store, false)
		if err != nil {
			return fail(err)
		}
		// An unreachable store is not served (the others are, and
		// /readyz names it) rather than stopping the factory.
		rs = append(rs, factory.ReleaseStore{Store: st, Keys: vs, Name: r.Store})
	}
	cache, err := openFactoryCache(ctx, f.cache, f.releases[0].Store, f.sf)
	if err != nil {
		return fail(err)
	}
	o := factory.Options{Releases: rs, Cache: cache, ExternalURL: f.external, Work: work, Log: log, BuilderVersion: selfDigest(),
		MaxBuilds: f.maxBuilds, MaxQueue: f.maxQueue, BuildTimeout: f.buildTimeout, MaxSchematics: f.maxSchematics,
		VerifyInterval: f.verifyInterval, BrokenVersions: f.brokenVersions}
	if f.signingKey != "" {
		if o.Signer, err = loadSigner(f.signingKey); err != nil {
			return fail(err)
		}
	}
	if f.secureBootKeys != "" {
		if o.SecureBoot, err = loadSecureBoot(f.secureBootKeys); err != nil {
			return fail(fmt.Errorf("--secureboot: %w", err))
		}
	}
	return o, nil
}

// openFactoryCache opens (creating a layout if needed) the cache store:
// loc, or factory-cache beside the release store first.
func openFactoryCache(ctx context.Context, loc, first string, sf storeFlags) (oci.Store, error) {
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
	return sf.openStore(ctx, loc, true)
}
