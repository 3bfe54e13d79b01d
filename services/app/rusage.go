package main

import (
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
)

// rusageCollector reports the app process's own context switches and CPU
// time, all threads together, from getrusage(RUSAGE_SELF) at scrape time
// (never on the request path). The host's node_context_switches_total mixes
// in everything else on the machine (Prometheus, Docker, the load generator);
// this is what the app itself caused, so the report can divide it by the
// path's requests. Its CPU time comes from the scheduler's nanosecond
// accounting, in microseconds, where process_cpu_seconds_total
// (/proc/self/stat) counts 10 ms clock ticks: too coarse for a few thousand
// requests.
type rusageCollector struct {
	desc, cpu *prometheus.Desc
	rusage    func(*syscall.Rusage) error
}

func newRusageCollector() *rusageCollector {
	return &rusageCollector{
		desc: prometheus.NewDesc("app_process_context_switches_total",
			"Context switches of the app process (all threads), by kind: voluntary (it blocked, e.g. waiting for a socket) or involuntary (preempted), from getrusage.",
			[]string{"kind"}, nil),
		cpu: prometheus.NewDesc("app_process_cpu_seconds_total",
			"CPU time of the app process (user and system, all threads), from getrusage: microsecond resolution, where process_cpu_seconds_total counts 10 ms clock ticks.",
			nil, nil),
		rusage: func(ru *syscall.Rusage) error { return syscall.Getrusage(syscall.RUSAGE_SELF, ru) },
	}
}

func (c *rusageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.cpu }

// Collect emits nothing if getrusage fails: no series beats a made-up zero.
func (c *rusageCollector) Collect(ch chan<- prometheus.Metric) {
	var ru syscall.Rusage
	if err := c.rusage(&ru); err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(ru.Nvcsw), "voluntary")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(ru.Nivcsw), "involuntary")
	seconds := func(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }
	ch <- prometheus.MustNewConstMetric(c.cpu, prometheus.CounterValue, seconds(ru.Utime)+seconds(ru.Stime))
}
