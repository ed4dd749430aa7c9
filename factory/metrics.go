package factory

import (
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the factory's Prometheus series, in a registry of its own
// (served on a separate listener).
type metrics struct {
	reg                      *prometheus.Registry
	built, hits, cacheErrors *prometheus.CounterVec
	buildSeconds             *prometheus.HistogramVec
	schematicsCreated        prometheus.Counter
	// damaged counts cached blobs that failed their digest as they were
	// served (the transfer cut), mismatches entries signed for another
	// request than the one their tag names.
	damaged, mismatches prometheus.Counter
}

func newMetrics() *metrics {
	byArtifact := []string{"version", "kind", "arch"}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		built: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodeforge_factory_artifacts_built_total",
			Help: "Artifacts composed (cache misses)."}, byArtifact),
		hits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodeforge_factory_cache_hits_total",
			Help: "Artifacts served from the cache."}, byArtifact),
		cacheErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodeforge_factory_cache_errors_total",
			Help: "Cache entries refused (signature or digest) and built again."}, byArtifact),
		buildSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "nodeforge_factory_build_seconds",
			Help: "Time to compose an artifact.", Buckets: prometheus.ExponentialBuckets(0.05, 2, 14)}, []string{"kind"}),
		schematicsCreated: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodeforge_factory_schematics_created_total",
			Help: "Schematics posted."}),
		damaged: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodeforge_factory_cache_damaged_total",
			Help: "Cached blobs that failed their digest while served: the transfer was cut, the entry is built again."}),
		mismatches: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodeforge_factory_cache_mismatches_total",
			Help: "Cache entries signed for another request than the one their tag names (refused, built again)."}),
	}
	m.reg.MustRegister(m.built, m.hits, m.cacheErrors, m.buildSeconds, m.schematicsCreated, m.damaged, m.mismatches,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// fqName is where a metric's description names it.
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// MetricNames are the names of the series the service registers, a
// vector's before its first value too, to hold alerting rules and
// dashboards to (the front adds its own).
func (s *Service) MetricNames() []string {
	m := s.metrics
	var out []string
	for _, c := range []prometheus.Collector{m.built, m.hits, m.cacheErrors, m.buildSeconds, m.schematicsCreated, m.damaged, m.mismatches} {
		out = append(out, describedNames(c)...)
	}
	return out
}

// describedNames are the names of the series c describes.
func describedNames(c prometheus.Collector) []string {
	ch := make(chan *prometheus.Desc, 4)
	go func() { c.Describe(ch); close(ch) }()
	var out []string
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}
