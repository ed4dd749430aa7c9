package factory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/nodeforge/builder/api/schematic"
	"github.com/nodeforge/builder/attest/signing"
	"github.com/nodeforge/builder/builder/compose"
	"github.com/nodeforge/builder/builder/compressors"
	"github.com/nodeforge/builder/builder/media/secureboot"
	"github.com/nodeforge/builder/internal/blobcache"
	"github.com/nodeforge/builder/oci"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Service is the Image Factory without its HTTP front: the releases it
// serves (a catalog of verified releases, listed again by RetryFailed),
// the schematics, the artifact cache, and the builds behind them (one
// per key, at most MaxBuilds at once, a bounded queue); Warm and Collect
// work on it. Server is its HTTP front, which asks it for releases,
// schematics and artifacts.
type Service struct {
	o          Options
	schematics *schematics
	cat        atomic.Pointer[catalog] // what is served
	cache      *artifactCache
	metrics    *metrics
	builds     singleflight.Group
	built      atomic.Int64
	slots      chan struct{} // builds running
	queue      chan struct{} // builds waiting for a slot
	buildFile  func(ctx context.Context, rel *VerifiedRelease, sch *schematic.Schematic, a Artifact, arch, dir string) (*builtFile, error)
	running    running         // builds in flight
	inst       installers      // the checked installer entries
	exts       extensionImages // the releases' extension images read
	layers     *layerCache     // the segments' squashfs images (nil: no scratch space)
	committing committing      // artifacts served while their cache entries are written
	// buildAllowed says whether the request in ctx may start a build (its
	// login, its rate: the front's check), asked on a cache miss so that
	// cached artifacts need no leave; nil: any may. An error it returns
	// that is a perClient refuses that request alone, not the others
	// waiting for the same build.
	buildAllowed func(ctx context.Context) error
}

// perClient is an error said of one client (its login, its rate), not of
// the factory.
type perClient interface {
	error
	PerClient() bool
}

// BusyError is a build refused because MaxBuilds builds run and MaxQueue
// wait already (the front answers 503 with a Retry-After).
type BusyError struct{ Running, Waiting int }

func (e *BusyError) Error() string {
	return fmt.Sprintf("the factory is busy: %d builds run and %d wait; try again later", e.Running, e.Waiting)
}

// ReleaseStore is a store of releases and the keys they must verify with.
type ReleaseStore struct {
	Store oci.Store
	Keys  []signature.Verifier
	// Name is the store as the operator named it (shown to clients
	// without credentials or local directories); "" names it by Store.
	Name string
}

// Options configure the factory's service: the releases it serves, its
// cache, its builds and their bounds. Its HTTP front's options (logins
// and rates, timeouts, connections, origins, proxies) are the front's,
// server.Options in factory/server, which holds these too.
type Options struct {
	Releases []ReleaseStore
	// Cache holds the schematics and the built artifacts.
	Cache oci.Store
	// Signer signs cache entries and checks them when read; nil caches
	// no artifact (every request composes).
	Signer *signing.Signer
	// BuilderVersion is part of every cache key: another builder may
	// compose other bytes.
	BuilderVersion string
	// ExternalURL is where clients reach the factory (PXE scripts point
	// back at it); "" uses the request's host.
	ExternalURL string
	// Work is a scratch directory: the ISO tool's, and the extensions'
	// squashfs images kept between builds (none kept without it).
	Work string
	// MaxBuilds bounds the builds running at once (0: 2).
	MaxBuilds int
	// MaxQueue bounds the builds waiting for a slot (0: 4 × MaxBuilds;
	// negative: none wait); past it a request gets 503 and Retry-After.
	MaxQueue int
	// BuildTimeout bounds one build (0: 10 minutes).
	BuildTimeout time.Duration
	// SecureBoot signs the -secureboot media (systemd-boot and the UKIs
	// made from the release's systemd-stub); nil: the factory serves none.
	SecureBoot *secureboot.Signing
	// MaxSchematics caps the schematics stored (0: no cap); past it a new
	// one gets 507. Replicas on one store count their own additions.
	MaxSchematics int
	// VerifyInterval is how long a cached artifact's file in a layout
	// cache, once hashed, is served without hashing it again while its
	// size and modification time stay (0: 10 minutes; negative: hashed at
	// every request). A registry's entries are verified as they stream.
	VerifyInterval time.Duration
	// BrokenVersions are versions (either spelling) the operator marked
	// broken: as upstream, not listed, not served, never latest; listed by
	// /versions?broken=true.
	BrokenVersions []string
	Log            *slog.Logger
}

// RequestError is a build refused for what the request asks (a
// schematic the release cannot honour): 400 with its message, which names
// no file of the factory's.
type RequestError struct{ msg string }

func (e *RequestError) Error() string { return e.msg }

// Stats says how many artifacts were built and served from the cache, and
// how many cache entries were refused.
func (s *Service) Stats() Stats {
	return Stats{Builds: s.built.Load(), Hits: s.cache.hits.Load(), CacheErrors: s.cache.errors.Load()}
}

// logCompressors says at start what the factory composes media with, and
// warns when that is not what releases are built with: its extension
// images and initramfs then differ from those of a factory that is (and
// its cache entries are its own: the compressors are in every key).
func logCompressors(log *slog.Logger, list []compressors.Implementation) {
	log.Info("composing with", "compressors", compressors.Key(list))
	if err := compressors.Refusal(list); err != nil {
		log.Warn("this factory composes other bytes than a release's builder: the media it serves differ from a reference factory's, its cache entries are its own", "why", err)
	}
}

// Unhonoured says why a release cannot make out of a schematic (a 400,
// with upstream's text where it has one): an embedded configuration the
// release's version does not read, an extension the release lacks (not
// for the kernel and the command line, which neither changes: upstream
// does not look there either), an option these media do not support yet
// (a board overlay among them: no release ships one). version is the
// version as the client named it.
func Unhonoured(rel *VerifiedRelease, sch *schematic.Schematic, out compose.Output, version string) error {
	if err := compose.EmbeddedConfigRefusal(sch, out, version); err != nil {
		return err
	}
	if out.Kind != "kernel" && out.Kind != "cmdline" {
		if name, missing := rel.Missing(sch.Customization.SystemExtensions.OfficialExtensions); missing {
			return fmt.Errorf("official extension %q is not available for Talos version %s", name, version)
		}
	}
	return compose.Refusal(sch, out)
}

// Output is what compose.Refusal judges of an artifact.
func (a Artifact) Output() compose.Output {
	if a.kind == "disk" {
		return compose.Output{Kind: compose.DiskKind(a.format), SecureBoot: a.SecureBoot}
	}
	return compose.Output{Kind: a.kind, SecureBoot: a.SecureBoot}
}

// bootOnly is the part of a schematic the kernel and the command line
// depend on (kernel arguments, META values): what the factory composes
// them of, so the schematic's other options, checked for the media they
// apply to, neither fail nor slow them.
func bootOnly(sch *schematic.Schematic) *schematic.Schematic {
	return &schematic.Schematic{Customization: schematic.Customization{
		ExtraKernelArgs: sch.Customization.ExtraKernelArgs, Meta: sch.Customization.Meta}}
}

// Compose makes one artifact (see flight).
func (s *Service) Compose(ctx context.Context, rel *VerifiedRelease, sch *schematic.Schematic, a Artifact, arch string) (*CachedArtifact, error) {
	id, err := sch.ID()
	if err != nil {
		return nil, err
	}
	if a.platform != "" {
		// The release's platforms: its spec may add some.
		if _, err := rel.PlatformTable().Lookup(a.platform); err != nil {
			return nil, &RequestError{msg: err.Error()}
		}
	}
	name := a.FileName(arch)
	e := entryInfo{Schematic: id, Version: rel.Version, Name: name, Arch: arch, Platform: a.platform, Builder: s.o.BuilderVersion}
	keyName := name
	if a.SecureBoot {
		// Signed with this factory's key: another key, another entry.
		e.SecureBoot = s.o.SecureBoot.CertSHA256()
		keyName += "\x00" + e.SecureBoot
	}
	e.Key = cacheKey(rel, id, keyName, s.o.BuilderVersion)
	v, err := s.flight(ctx, flightJob{
		key:    strings.Join([]string{id, rel.Version, arch, name}, "\x00"),
		labels: []string{rel.Version, a.kind, arch},
		lookup: func(bctx context.Context) (any, bool, bool) {
			if a := s.committing.get(e.Key); a != nil {
				return a, true, false
			}
			return s.cache.get(bctx, e)
		},
		build: func(bctx context.Context) (any, error) {
			dir, err := os.MkdirTemp(s.o.Work, "built-")
			if err != nil {
				return nil, err
			}
			f, err := s.buildFile(bctx, rel, sch, a, arch, dir)
			if err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
			return s.commit(bctx, e, f, dir)
		},
	})
	if err != nil {
		return nil, err
	}
	return v.(*CachedArtifact), nil
}

// flightJob is one thing the factory builds on a cache miss.
type flightJob struct {
	key    string   // one flight per key
	labels []string // the metrics' version, kind and arch
	// lookup returns the cached value; refused says an entry was there
	// and failed its checks (it is built again).
	lookup func(ctx context.Context) (v any, ok, refused bool)
	build  func(ctx context.Context) (any, error)
}

// flight answers a job from the cache or builds it. One build per key
// runs at once (others wait for it), at most MaxBuilds builds run, and a
// build is detached from the request that started it, within the build
// time limit: a client that hangs up does not cancel what others wait for.
func (s *Service) flight(ctx context.Context, j flightJob) (any, error) {
	ran := false // this call's flight ran: a refusal from another is not this client's
	ch := s.builds.DoChan(j.key, func() (any, error) {
		ran = true
		s.running.start()
		defer s.running.done()
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.BuildTimeout)
		defer cancel()
		v, ok, refused := j.lookup(bctx)
		if ok {
			s.metrics.hits.WithLabelValues(j.labels...).Inc()
			return v, nil
		}
		if refused {
			s.metrics.cacheErrors.WithLabelValues(j.labels...).Inc()
		}
		free, err := s.buildSlot(ctx, bctx)
		if err != nil {
			return nil, err
		}
		defer free()
		start := time.Now()
		v, err = j.build(bctx)
		giveBackMemory()
		if err != nil {
			return nil, err
		}
		s.built.Add(1)
		s.metrics.built.WithLabelValues(j.labels...).Inc()
		s.metrics.buildSeconds.WithLabelValues(j.labels[1]).Observe(time.Since(start).Seconds())
		return v, nil
	})
	select {
	case res := <-ch:
		if pc := perClient(nil); !ran && errors.As(res.Err, &pc) && pc.PerClient() {
			return s.flight(ctx, j) // ask for this client
		}
		return res.Val, res.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// build composes the media the artifact belongs to and writes it into a
// new file in dir.
func (s *Service) build(ctx context.Context, rel *VerifiedRelease, sch *schematic.Schematic, a Artifact, arch, dir string) (*builtFile, error) {
	if a.kind == "kernel" || a.kind == "cmdline" {
		sch = bootOnly(sch)
	}
	work, err := os.MkdirTemp(s.o.Work, "compose-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	if a.kind == "installer" {
		inst := InstallerOptions{Schematic: sch, Platform: a.platform, Work: work, Layers: s.layerCache()}
		if a.SecureBoot {
			inst.SecureBoot = s.o.SecureBoot
		}
		return writeBuiltFile(dir, func(w io.Writer) error { return rel.InstallerTarball(ctx, inst, arch, w) })
	}
	boot, exts, o, err := rel.Inputs(ctx, arch, sch.Customization.SystemExtensions.OfficialExtensions)
	if err != nil {
		return nil, err
	}
	if a.kind == "uki" && boot.Stub == nil {
		return nil, &RequestError{msg: "release " + rel.Version + " has no systemd-stub (image.stub): no UKI"}
	}
	o.Schematic, o.Platform, o.Work, o.Layers = sch, a.platform, work, s.layerCache()
	o.DiskFormats, o.Compressions, o.UKI = []string{}, nil, a.kind == "uki"
	if a.SecureBoot {
		o.SecureBoot = &compose.SecureBoot{Signing: s.o.SecureBoot}
	}
	if a.kind == "disk" {
		o.DiskFormats = []string{a.format}
	}
	res, err := compose.Media(ctx, boot, exts, o)
	if err != nil {
		return nil, err
	}
	want := a.FileName(arch)
	// A compressed disk is compressed here, from the disk's file, once
	// the composition (its initramfs, 150 MB and more) is let go: xz
	// needs 330 MiB of its own on two threads.
	uncompressed := strings.TrimSuffix(want, "."+a.compression)
	i := slices.IndexFunc(res.Files, func(f compose.File) bool { return f.Name == uncompressed })
	if i < 0 {
		return nil, fmt.Errorf("%s was not made (the release has no EFI boot manager for disk images?)", want)
	}
	f := res.Files[i]
	if a.compression == "" {
		// The ISO moves from compose's scratch directory, the others
		// are written.
		return saveBuiltFile(dir, f)
	}
	giveBackMemory() // res and exts are no longer used: the composition is collected
	v, err := compose.Variant(work, f, a.compression)
	if err != nil {
		return nil, err
	}
	return saveBuiltFile(dir, v)
}

// layerCache is the service's compose.LayerCache: nil (an interface
// holding no cache) without a scratch directory.
func (s *Service) layerCache() compose.LayerCache {
	if s.layers == nil {
		return nil
	}
	return s.layers
}

// PublicHost is the host (and path) clients reach the factory at:
// --external-url's, else the request's.
func (s *Service) PublicHost(requestHost string) string {
	if u, err := url.Parse(s.o.ExternalURL); err == nil && u.Host != "" {
		return u.Host + strings.TrimSuffix(u.Path, "/")
	}
	return requestHost
}

// NewService verifies every version of every release store: a version
// that does not verify, or a store that cannot be listed, is not served,
// and Readiness names it (RetryFailed tries them again). When nothing
// verifies it fails, its error's first line the first cause. A tool a
// request can need that is not on PATH is logged (and Readiness is not
// ready, naming it).
func NewService(ctx context.Context, o Options) (*Service, error) {
	s, err := newService(o)
	if err != nil {
		return nil, err
	}
	for _, t := range compose.MissingTools() { // and Readiness says so
		s.o.Log.Error("not ready: a tool a request can need is missing", "tool", t.Name, "package", t.Package, "formats", strings.Join(t.Formats, ","))
	}
	c := s.load(ctx, nil)
	if len(c.versions) == 0 {
		return nil, s.startError(c)
	}
	s.cat.Store(c)
	logCompressors(s.o.Log, compressors.This())
	if err := s.schematics.count(ctx); err != nil {
		s.o.Log.Warn("the schematics stored are not counted: --max-schematics counts from 0", "err", err)
	}
	giveBackMemory()
	return s, nil
}

// giveBackMemory returns the heap's free pages to the system now: a
// build (or the verification at start) leaves hundreds of megabytes
// free that the runtime would hand back only over minutes, and a factory
// between builds should hold only what it serves from. It costs one
// garbage collection, nothing beside a build of seconds.
func giveBackMemory() { debug.FreeOSMemory() }

// newService is a factory serving nothing yet, its options completed
// with their defaults.
func newService(o Options) (*Service, error) {
	if o.Cache == nil || len(o.Releases) == 0 {
		return nil, errors.New("factory: a cache store and at least one release store are needed")
	}
	if o.MaxBuilds <= 0 {
		o.MaxBuilds = 2
	}
	if o.BuildTimeout <= 0 {
		o.BuildTimeout = 10 * time.Minute
	}
	if o.MaxQueue == 0 {
		o.MaxQueue = 4 * o.MaxBuilds
	}
	if err := checkBrokenVersions(o.BrokenVersions); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.VerifyInterval == 0 {
		o.VerifyInterval = defaultVerifyInterval
	}
	m := newMetrics()
	s := &Service{o: o, schematics: &schematics{st: o.Cache, mismatches: m.mismatches}, metrics: m,
		slots: make(chan struct{}, o.MaxBuilds), queue: make(chan struct{}, max(o.MaxQueue, 0)),
		cache: &artifactCache{st: o.Cache, signer: o.Signer, log: o.Log, interval: o.VerifyInterval, now: time.Now, metrics: m}}
	s.buildFile = s.build
	if o.Work != "" {
		// Without it every build writes its extensions' squashfs.
		if d, err := blobcache.Open(filepath.Join(o.Work, "layers")); err != nil {
			o.Log.Warn("the extensions' squashfs images are not kept between builds", "err", err)
		} else {
			s.layers = newLayerCache(d)
		}
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nodeforge_factory_builds_in_flight",
		Help: "Builds running or waiting for a slot, with their cache lookups (a stop waits for them)."}, func() float64 { return float64(s.running.count()) }))
	s.cat.Store(&catalog{releases: map[string]*VerifiedRelease{}})
	return s, nil
}

// Options are the options the service runs with, defaults filled in.
func (s *Service) Options() Options { return s.o }

// Metrics is the registry of the factory's Prometheus series, where its
// front adds its own.
func (s *Service) Metrics() *prometheus.Registry { return s.metrics.reg }

// SetBuildAllowed sets the check a cache miss asks before it builds (the
// front's logins and rates; see buildAllowed). Set it before serving.
func (s *Service) SetBuildAllowed(allowed func(ctx context.Context) error) { s.buildAllowed = allowed }

// BuildsInFlight counts the builds running or waiting for a slot, with
// their cache lookups.
func (s *Service) BuildsInFlight() int { return s.running.count() }

// Waiting counts the builds waiting for a slot.
func (s *Service) Waiting() int { return len(s.queue) }

// WaitBuilds waits until no build is in flight, or ctx ends.
func (s *Service) WaitBuilds(ctx context.Context) error { return s.running.wait(ctx) }

// Release is the served release of a version (either spelling), broken
// or not; nil when none.
func (s *Service) Release(version string) *VerifiedRelease { return s.served().find(version) }

// Schematic reads a stored schematic (ErrUnknownSchematic when there is
// none of that ID).
func (s *Service) Schematic(ctx context.Context, id string) (*schematic.Schematic, error) {
	return s.schematics.get(ctx, id)
}

// SchematicsFull says whether MaxSchematics are stored: a new one is to
// be refused.
func (s *Service) SchematicsFull() bool {
	return s.o.MaxSchematics > 0 && s.schematics.stored.Load() >= int64(s.o.MaxSchematics)
}

// AddSchematic stores a schematic (posted as the document doc, or nil
// from the UI) and returns its ID.
func (s *Service) AddSchematic(ctx context.Context, sch *schematic.Schematic, doc []byte) (string, error) {
	id, err := s.schematics.put(ctx, sch, doc)
	if err == nil {
		s.metrics.schematicsCreated.Inc()
	}
	return id, err
}

// Distrust makes the cache refuse the entry whose blob h failed its
// digest as it was served, so that it is built anew.
func (s *Service) Distrust(h v1.Hash) { s.cache.distrust(h) }

// CountDamaged counts a cached blob that failed its digest as it was
// served (the transfer was cut).
func (s *Service) CountDamaged() { s.cache.countDamaged() }
