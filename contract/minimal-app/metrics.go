package main

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the two series families the lab's dashboards cannot do without,
// labelled by listener ("tcp" or "unix") and by route pattern (never the raw
// URL, so junk URLs add no series).
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "app_http_requests_total",
			Help: "HTTP requests by listener, route pattern and status code.",
		}, []string{"listener", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "app_http_request_duration_seconds",
			Help:    "Time to serve a request, by listener, route pattern and status code.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"listener", "route", "code"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

// instrument counts and times every request that reaches listener.
func (m *metrics) instrument(listener string, mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		mux.ServeHTTP(sw, r)
		// The mux sets the matched pattern: "GET /bytes/{n}" -> "/bytes/{n}".
		route := r.Pattern[strings.IndexByte(r.Pattern, ' ')+1:]
		if route == "/" || route == "" {
			route = "unmatched"
		}
		code := strconv.Itoa(sw.code)
		m.requests.WithLabelValues(listener, route, code).Inc()
		m.duration.WithLabelValues(listener, route, code).Observe(time.Since(start).Seconds())
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}
