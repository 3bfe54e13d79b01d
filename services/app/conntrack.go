package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// conntrackCollector reports netfilter's connection tracking in the app's
// network namespace, read at scrape time (never on the request path). Docker's
// embedded DNS puts NAT rules into every container's namespace, and with them
// tracking: each new TCP connection over loopback (nginx-lo) is an entry that
// outlives the connection (TIME_WAIT: 120 s), a cost the socket does not have
// and a pod without such rules would not either. The table's fill, its limit,
// and the connections it dropped (summed over CPUs from
// /proc/net/stat/nf_conntrack; Linux no longer counts inserts there).
type conntrackCollector struct {
	sys, stat         string
	count, max, drops *prometheus.Desc
}

func newConntrackCollector(sysDir, statFile string) *conntrackCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &conntrackCollector{
		sys: sysDir, stat: statFile,
		count: d("app_netns_conntrack_entries", "Connection-tracking entries in the app's network namespace (nf_conntrack_count)."),
		max:   d("app_netns_conntrack_entries_limit", "The namespace's connection-tracking table size (nf_conntrack_max): new connections are dropped when it is full."),
		drops: d("app_netns_conntrack_drops_total", "Connections dropped by connection tracking in the app's network namespace (drop, early_drop and insert_failed)."),
	}
}

func (c *conntrackCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.count, c.max, c.drops} {
		ch <- d
	}
}

// Collect emits only what the kernel shows: without netfilter's conntrack in
// the namespace there is nothing to track, and no series says so.
func (c *conntrackCollector) Collect(ch chan<- prometheus.Metric) {
	for desc, name := range map[*prometheus.Desc]string{c.count: "nf_conntrack_count", c.max: "nf_conntrack_max"} {
		if v, err := readNumber(filepath.Join(c.sys, name)); err == nil {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v)
		}
	}
	cols, err := readConntrackStat(c.stat)
	if err != nil {
		return
	}
	if _, ok := cols["drop"]; ok {
		ch <- prometheus.MustNewConstMetric(c.drops, prometheus.CounterValue, cols["drop"]+cols["early_drop"]+cols["insert_failed"])
	}
}

func readNumber(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
}

// readConntrackStat sums each column of /proc/net/stat/nf_conntrack over its
// per-CPU rows (hexadecimal, a header line naming the columns).
func readConntrackStat(path string) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return nil, os.ErrNotExist
	}
	header := strings.Fields(sc.Text())
	sums := map[string]float64{}
	for sc.Scan() {
		for i, field := range strings.Fields(sc.Text()) {
			if i >= len(header) {
				break
			}
			v, err := strconv.ParseUint(field, 16, 64)
			if err != nil {
				continue
			}
			// "entries" is the same global count on every row: not a sum.
			if header[i] == "entries" {
				sums[header[i]] = float64(v)
			} else {
				sums[header[i]] += float64(v)
			}
		}
	}
	return sums, sc.Err()
}
