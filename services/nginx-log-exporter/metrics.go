package main

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// durationBuckets suit nginx's millisecond-resolution times: 0.0005 sits
// between 0 and 1 ms, so "0.000" lines land in the first bucket.
var durationBuckets = []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Metrics holds a private registry (no package globals) and the collectors
// whose names dashboards depend on.
type Metrics struct {
	Registry *prometheus.Registry

	linesOK        prometheus.Counter
	linesMalformed prometheus.Counter
	requests       *prometheus.CounterVec
	paths          *pathSet
	perPath        []pathMetrics // by pathID
}

// pathMetrics are one path's children, resolved once so the per-line work is
// a few atomic adds.
type pathMetrics struct {
	duration prometheus.Observer
	upstream [numUpstream]prometheus.Observer
	bytes    prometheus.Counter
	// statuses is filled on first use; index 0 is status="invalid". Only the
	// single UDP reader goroutine touches it, so it needs no lock.
	statuses [600]prometheus.Counter
}

// NewMetrics makes the metrics for these paths (catalogue.json's, plus "other").
func NewMetrics(paths []string) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	f := promauto.With(reg)
	m := &Metrics{Registry: reg, paths: newPathSet(paths)}
	m.perPath = make([]pathMetrics, len(m.paths.names))

	lines := f.NewCounterVec(prometheus.CounterOpts{
		Name: "nginx_log_lines_total",
		Help: "Access-log lines read (from the pipe, or a syslog datagram each), by result: ok, or malformed (no JSON, bad JSON or a bad number; not counted anywhere else).",
	}, []string{"result"})
	m.linesOK = lines.WithLabelValues("ok")
	m.linesMalformed = lines.WithLabelValues("malformed")

	m.requests = f.NewCounterVec(prometheus.CounterOpts{
		Name: "nginx_location_requests_total",
		Help: "Requests logged by nginx, by location (first URI segment: one of the lab's paths, or other) and status code (or invalid).",
	}, []string{"path", "status"})
	hist := func(name, help string) *prometheus.HistogramVec {
		return f.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: durationBuckets}, []string{"path"})
	}
	duration := hist("nginx_location_request_duration_seconds",
		"nginx $request_time: first byte read from the client to last byte sent, by location (1 ms resolution).")
	upstream := [numUpstream]*prometheus.HistogramVec{
		hist("nginx_location_upstream_connect_seconds",
			"nginx $upstream_connect_time summed over attempts, by location; requests without an upstream connection are not observed."),
		hist("nginx_location_upstream_header_seconds",
			"nginx $upstream_header_time summed over attempts, by location; requests that got no upstream header are not observed."),
		hist("nginx_location_upstream_response_seconds",
			"nginx $upstream_response_time summed over attempts, by location; requests without an upstream are not observed."),
	}
	bytes := f.NewCounterVec(prometheus.CounterOpts{
		Name: "nginx_location_response_bytes_total",
		Help: "nginx $bytes_sent (headers and body sent to the client), by location.",
	}, []string{"path"})

	// Creating the children up front also makes the series exist at 0.
	for p, name := range m.paths.names {
		pm := &m.perPath[p]
		pm.duration = duration.WithLabelValues(name)
		for u := range upstream {
			pm.upstream[u] = upstream[u].WithLabelValues(name)
		}
		pm.bytes = bytes.WithLabelValues(name)
		// 200, and the answers of an app that is down or stuck (502, 503,
		// 504): a series born with its first failures would hide them from
		// rate() (no earlier sample), so an outage's first 5xx would not show.
		for _, code := range []int{200, 502, 503, 504} {
			pm.statuses[code] = m.requests.WithLabelValues(name, strconv.Itoa(code))
		}
	}
	return m
}

// observe applies one parsed line. Not safe for concurrent use (see statuses).
func (m *Metrics) observe(r record) {
	path := m.paths.classify(r.uri)
	pm := &m.perPath[path]
	c := pm.statuses[r.status]
	if c == nil {
		status := "invalid"
		if r.status != 0 {
			status = strconv.Itoa(r.status)
		}
		c = m.requests.WithLabelValues(m.paths.names[path], status)
		pm.statuses[r.status] = c
	}
	c.Inc()
	pm.duration.Observe(r.requestTime)
	for u, ok := range r.hasUpstream {
		if ok {
			pm.upstream[u].Observe(r.upstream[u])
		}
	}
	pm.bytes.Add(float64(r.bytesSent))
	m.linesOK.Inc()
}
