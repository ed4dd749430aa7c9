package factory

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the factory's Prometheus series, in a registry of its own
// (served on a separate listener).
type metrics struct {
	reg                          *prometheus.Registry
	built, hits, cacheErrors     *prometheus.CounterVec
	buildSeconds                 *prometheus.HistogramVec
	requests                     *prometheus.CounterVec
	schematicsCreated, bytesSent prometheus.Counter
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
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nodeforge_factory_requests_total",
			Help: "HTTP requests by route and status."}, []string{"route", "code"}),
		schematicsCreated: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodeforge_factory_schematics_created_total",
			Help: "Schematics posted."}),
		bytesSent: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodeforge_factory_bytes_sent_total",
			Help: "Bytes of responses."}),
		damaged: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodeforge_factory_cache_damaged_total",
			Help: "Cached blobs that failed their digest while served: the transfer was cut, the entry is built again."}),
		mismatches: prometheus.NewCounter(prometheus.CounterOpts{Name: "nodeforge_factory_cache_mismatches_total",
			Help: "Cache entries signed for another request than the one their tag names (refused, built again)."}),
	}
	m.reg.MustRegister(m.built, m.hits, m.cacheErrors, m.buildSeconds, m.requests, m.schematicsCreated, m.bytesSent, m.damaged, m.mismatches,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}
