package main

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// listenerID identifies which listener a connection came in on. It is stored
// in each connection's context by http.Server.ConnContext, so the per-request
// middleware only does a context lookup instead of inspecting the conn.
type listenerID uint8

const (
	listenerTCP listenerID = iota
	listenerUnix
	numListeners
)

func (l listenerID) String() string {
	if l == listenerUnix {
		return "unix"
	}
	return "tcp"
}

type listenerKey struct{}

// listenerOf classifies a connection. Conns are never wrapped (that would hide
// *net.TCPConn's ReadFrom and with it sendfile), so a type switch suffices.
func listenerOf(c net.Conn) listenerID {
	if _, ok := c.(*net.UnixConn); ok {
		return listenerUnix
	}
	return listenerTCP
}

// listenerFromContext defaults to tcp when the request did not come through
// our http.Server (httptest/ServeHTTP in unit tests).
func listenerFromContext(ctx context.Context) listenerID {
	if l, ok := ctx.Value(listenerKey{}).(listenerID); ok {
		return l
	}
	return listenerTCP
}

// Metrics holds a private registry (no package globals) and the collectors
// whose names dashboards depend on.
type Metrics struct {
	Registry *prometheus.Registry

	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec

	// Per-listener children resolved once, so hot paths skip the label lookup.
	inFlight [numListeners]prometheus.Gauge
	open     [numListeners]prometheus.Gauge
	// Accepted connections by peer: TCP from loopback (nginx-lo, in this
	// network namespace) or from the network (nginx across the bridge), and
	// the Unix socket's (always local).
	acceptedLoopback, acceptedNetwork, acceptedUnix prometheus.Counter

	// codes caches status-code label strings to avoid a per-request
	// strconv allocation.
	codes [600]string
}

func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newSockstatCollector("/proc/net/sockstat"),
		newConntrackCollector("/proc/sys/net/netfilter", "/proc/net/stat/nf_conntrack"),
		newBacklogCollector("/proc/sys/net/core/somaxconn"),
		newRusageCollector(),
	)
	f := promauto.With(reg)
	m := &Metrics{Registry: reg}

	labels := []string{"listener", "route", "code"}
	m.requests = f.NewCounterVec(prometheus.CounterOpts{
		Name: "app_http_requests_total",
		Help: "HTTP requests handled, by listener, route template and status code.",
	}, labels)
	m.duration = f.NewHistogramVec(prometheus.HistogramOpts{
		Name: "app_http_request_duration_seconds",
		Help: "Time from routing to handler return, by listener, route template and status code.",
		// Classic buckets from 50µs: UDS-vs-TCP differences live in the
		// sub-millisecond range.
		Buckets: []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		// Native histogram as well, so Prometheus can use either.
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  100,
		NativeHistogramMinResetDuration: time.Hour,
	}, labels)
	inFlight := f.NewGaugeVec(prometheus.GaugeOpts{
		Name: "app_http_requests_in_flight",
		Help: "Requests currently being handled, by listener.",
	}, []string{"listener"})
	accepted := f.NewCounterVec(prometheus.CounterOpts{
		Name: "app_connections_accepted_total",
		Help: "Connections accepted, by listener and peer (tcp: loopback or network; unix: local); compare with requests to see keepalive reuse.",
	}, []string{"listener", "peer"})
	open := f.NewGaugeVec(prometheus.GaugeOpts{
		Name: "app_connections_open",
		Help: "Connections currently open, by listener.",
	}, []string{"listener"})

	// Creating the children up front also makes the series exist at 0.
	for l := listenerID(0); l < numListeners; l++ {
		m.inFlight[l] = inFlight.WithLabelValues(l.String())
		m.open[l] = open.WithLabelValues(l.String())
	}
	m.acceptedLoopback = accepted.WithLabelValues("tcp", "loopback")
	m.acceptedNetwork = accepted.WithLabelValues("tcp", "network")
	m.acceptedUnix = accepted.WithLabelValues("unix", "local")
	for i := range m.codes {
		m.codes[i] = strconv.Itoa(i)
	}
	return m
}

func (m *Metrics) codeLabel(code int) string {
	if code >= 0 && code < len(m.codes) {
		return m.codes[code]
	}
	return strconv.Itoa(code)
}

// middleware records request metrics. It must stay cheap: it runs on every
// request the lab measures.
func (m *Metrics) middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		l := listenerFromContext(c.Request.Context())
		m.inFlight[l].Inc()
		// Deferred so the gauge cannot leak if a panic escapes the handler chain.
		defer m.inFlight[l].Dec()
		start := time.Now()

		c.Next()

		elapsed := time.Since(start).Seconds()
		route := c.FullPath()
		if route == "" {
			// 404/405: never use the raw URL, it would explode cardinality.
			route = "unmatched"
		}
		code := m.codeLabel(c.Writer.Status())
		ls := l.String()
		m.requests.WithLabelValues(ls, route, code).Inc()
		m.duration.WithLabelValues(ls, route, code).Observe(elapsed)
	}
}

// connState tracks open connections per listener (wired to http.Server.ConnState).
func (m *Metrics) connState(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		m.open[listenerOf(c)].Inc()
	case http.StateClosed, http.StateHijacked:
		m.open[listenerOf(c)].Dec()
	}
}

// countingListener counts accepted connections by peer: loopback when the
// peer's address is 127.0.0.0/8 or ::1, else network (a Unix socket's peer
// has no IP: give both the same counter). The conn itself is returned
// unwrapped so net/http can still use sendfile on *net.TCPConn.
type countingListener struct {
	net.Listener
	loopback, network prometheus.Counter
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		if fromLoopback(c.RemoteAddr()) {
			l.loopback.Inc()
		} else {
			l.network.Inc()
		}
	}
	return c, err
}

func fromLoopback(a net.Addr) bool {
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}
