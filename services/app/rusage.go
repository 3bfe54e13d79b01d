package main

import (
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// rusageCollector reports the app process's own context switches, all threads
// together, from getrusage(RUSAGE_SELF) at scrape time (never on the request
// path). The host's node_context_switches_total mixes in everything else on
// the machine (Prometheus, Docker, the load generator); this is what the app
// itself caused, so the report can divide it by the path's requests.
type rusageCollector struct {
	desc   *prometheus.Desc
	rusage func(*syscall.Rusage) error
}

func newRusageCollector() *rusageCollector {
	return &rusageCollector{
		desc: prometheus.NewDesc("app_process_context_switches_total",
			"Context switches of the app process (all threads), by kind: voluntary (it blocked, e.g. waiting for a socket) or involuntary (preempted), from getrusage.",
			[]string{"kind"}, nil),
		rusage: func(ru *syscall.Rusage) error { return syscall.Getrusage(syscall.RUSAGE_SELF, ru) },
	}
}

func (c *rusageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect emits nothing if getrusage fails: no series beats a made-up zero.
func (c *rusageCollector) Collect(ch chan<- prometheus.Metric) {
	var ru syscall.Rusage
	if err := c.rusage(&ru); err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(ru.Nvcsw), "voluntary")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(ru.Nivcsw), "involuntary")
}
