package main

import (
	"github.com/prometheus/client_golang/prometheus"
)

// backlogCollector reports the listen backlog of both the app's listeners,
// read at scrape time: Go's net.Listen asks the kernel for
// net.core.somaxconn (of the app's network namespace) on the TCP port and the
// Unix socket alike, and the kernel caps every backlog there. A Unix socket
// whose backlog is full refuses a non-blocking connect at once (EAGAIN: nginx
// answers 502), where TCP queues the SYN: the same number means the two paths
// fail differently, not earlier or later by setting.
type backlogCollector struct {
	path string
	desc *prometheus.Desc
}

func newBacklogCollector(somaxconn string) *backlogCollector {
	return &backlogCollector{path: somaxconn, desc: prometheus.NewDesc("app_listen_backlog",
		"The listen backlog of both the app's listeners (net.core.somaxconn in its network namespace, which Go's net.Listen asks for).", nil, nil)}
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect emits nothing when the kernel does not show the setting.
func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	if v, err := readNumber(c.path); err == nil {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v)
	}
}
