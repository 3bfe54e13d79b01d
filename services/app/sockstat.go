package main

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// sockstatCollector reports the TCP sockets of the app's network namespace
// from /proc/net/sockstat, read at scrape time (never on the request path).
// With "Connection: close" the app closes first, so the TIME_WAIT sockets of
// nginx's new-connection TCP path pile up here; the Unix socket leaves none.
type sockstatCollector struct {
	path string
	desc *prometheus.Desc
}

func newSockstatCollector(path string) *sockstatCollector {
	return &sockstatCollector{
		path: path,
		desc: prometheus.NewDesc("app_netns_tcp_sockets",
			"TCP sockets in the app's network namespace by state (inuse, orphan, tw = TIME_WAIT, alloc), from /proc/net/sockstat.",
			[]string{"state"}, nil),
	}
}

func (c *sockstatCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect emits nothing where the file is missing (not Linux): no series
// beats a made-up zero.
func (c *sockstatCollector) Collect(ch chan<- prometheus.Metric) {
	counts, err := readSockstatTCP(c.path)
	if err != nil {
		return
	}
	for _, state := range []string{"inuse", "orphan", "tw", "alloc"} {
		if v, ok := counts[state]; ok {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, state)
		}
	}
}

// readSockstatTCP parses the "TCP: inuse 5 orphan 0 tw 2 alloc 7 mem 1" line.
func readSockstatTCP(path string) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts := map[string]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "TCP:" {
			continue
		}
		for i := 1; i+1 < len(fields); i += 2 {
			if v, err := strconv.ParseFloat(fields[i+1], 64); err == nil {
				counts[fields[i]] = v
			}
		}
	}
	return counts, sc.Err()
}
