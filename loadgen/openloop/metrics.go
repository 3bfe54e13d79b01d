package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics: what Prometheus scrapes of the run as it goes (compose's
// openloop job). Labels come from the plan: its paths, workloads, rounds,
// phases and steps, and statuses as load.json names them.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	late     *prometheus.CounterVec
	drops    *prometheus.CounterVec
	opened   prometheus.CounterFunc
	inFlight prometheus.Gauge
	reg      *prometheus.Registry
	testid   string
	scraped  atomic.Int64 // unix nanoseconds of the last scrape's start
}

// phaseLabels: a phase's labels (as k6 tagged its scenarios).
type phaseLabels []string

var phaseLabelNames = []string{"workload", "round", "phase", "step", "level"}

func newMetrics(testid string) *metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := prometheus.WrapRegistererWith(prometheus.Labels{"testid": testid}, reg)
	perPath := append([]string{"path"}, phaseLabelNames...)
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "openloop_requests_total",
			Help: "Requests sent and come back, by path and status (or, without a response: refused, reset, timeout, connect_timeout, error).",
		}, append(perPath, "status")),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                            "openloop_request_duration_seconds",
			Help:                            "Successful requests' durations (200-399), from the actual send to the last byte.",
			Buckets:                         []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
			NativeHistogramBucketFactor:     1.05,
			NativeHistogramMaxBucketNumber:  200,
			NativeHistogramMinResetDuration: time.Hour,
		}, perPath),
		late: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "openloop_late_requests_total",
			Help: "Requests sent more than 1 ms behind their due time: the generator, not the path, set the pace.",
		}, perPath),
		drops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "openloop_dropped_requests_total",
			Help: "Requests due but not sent, an overflow: every connection of the path's pool (OPENLOOP_CONNECTIONS) was busy.",
		}, perPath),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "openloop_requests_in_flight", Help: "Requests sent and not yet come back.",
		}),
		reg: reg, testid: testid,
	}
	f.MustRegister(m.requests, m.duration, m.late, m.drops, m.inFlight)
	return m
}

// countOpened: openloop_connections_opened_total reads the sender's count.
func (m *metrics) countOpened(n func() int64) {
	m.opened = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "openloop_connections_opened_total", Help: "Connections dialed to the paths, before the run and during it.",
	}, func() float64 { return float64(n()) })
	prometheus.WrapRegistererWith(prometheus.Labels{"testid": m.testid}, m.reg).MustRegister(m.opened)
}

func (m *metrics) phaseLabels(ph *phase) phaseLabels {
	step, level := "", ""
	if ph.Step > 0 {
		step, level = strconv.Itoa(ph.Step), strconv.Itoa(ph.Rate)
	}
	return phaseLabels{ph.Workload, strconv.Itoa(ph.Round), ph.Phase, step, level}
}

func (m *metrics) with(l phaseLabels, path string) []string { return append([]string{path}, l...) }

func (m *metrics) observe(l phaseLabels, path string, o outcome, d time.Duration, late bool) {
	m.forPath(l, path).observe(o, d, late)
}

// pathMetrics: one path's series in one phase, each looked up once, at its
// first use (a label lookup per request costs more than the rest of its
// recording; a series no request has touched is not scraped).
type pathMetrics struct {
	m           *metrics
	lv          []string
	mu          sync.Mutex
	duration    prometheus.Observer
	late, drops prometheus.Counter
	requests    map[string]prometheus.Counter // by status
}

func (m *metrics) forPath(l phaseLabels, path string) *pathMetrics {
	return &pathMetrics{m: m, lv: m.with(l, path), requests: map[string]prometheus.Counter{}}
}

func (pm *pathMetrics) observe(o outcome, d time.Duration, late bool) {
	k := o.key()
	pm.mu.Lock()
	c := pm.requests[k]
	if c == nil {
		c = pm.m.requests.WithLabelValues(append(append([]string{}, pm.lv...), k)...)
		pm.requests[k] = c
	}
	if o.ok() && pm.duration == nil {
		pm.duration = pm.m.duration.WithLabelValues(pm.lv...)
	}
	if late && pm.late == nil {
		pm.late = pm.m.late.WithLabelValues(pm.lv...)
	}
	pm.mu.Unlock()
	c.Inc()
	if o.ok() {
		pm.duration.Observe(d.Seconds())
	}
	if late {
		pm.late.Inc()
	}
}

// overflow: a request due that found every connection of its path busy.
func (pm *pathMetrics) overflow() {
	pm.mu.Lock()
	if pm.drops == nil {
		pm.drops = pm.m.drops.WithLabelValues(pm.lv...)
	}
	pm.mu.Unlock()
	pm.drops.Inc()
}

// serve: /metrics on addr until ctx ends. Each scrape is noted, so that the
// run can wait for one after its last request.
func (m *metrics) serve(ctx context.Context, addr string, stderr io.Writer) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("OPENLOOP_METRICS_ADDR=%q: %w", addr, err)
	}
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		m.scraped.Store(time.Now().UnixNano())
		h.ServeHTTP(w, r)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "openloop: metrics: %v\n", err)
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}

// lastScrape: when Prometheus last began a scrape (zero: never).
func (m *metrics) lastScrape() time.Time {
	if ns := m.scraped.Load(); ns > 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// awaitScrape: once the run is over, until a scrape has begun after end, so
// that Prometheus holds the run's last counts; at most wait. A process no
// Prometheus scraped during the run waits for none.
func (m *metrics) awaitScrape(ctx context.Context, end time.Time, wait time.Duration) bool {
	if m.lastScrape().IsZero() {
		return true
	}
	deadline := time.Now().Add(wait)
	for m.lastScrape().Before(end) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}
