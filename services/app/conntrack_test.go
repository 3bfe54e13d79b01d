package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestConntrackCollector(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("nf_conntrack_count", "28558\n")
	write("nf_conntrack_max", "262144\n")
	// Two CPUs' rows, as Linux 6.x prints them: drops 1 + 2 + 3 (insert_failed, drop, early_drop).
	write("stat", "entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart\n"+
		"00006f8e  00000000 00000000 00000000 00000005 00000000 00000000 00000000 00000010 00000001 00000002 00000000 00000000  00000000 00000000 00000000 00000000\n"+
		"00006f8e  00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000020 00000000 00000000 00000003 00000000  00000000 00000000 00000000 00000000\n")
	reg := prometheus.NewRegistry()
	reg.MustRegister(newConntrackCollector(dir, filepath.Join(dir, "stat")))
	want := `
# HELP app_netns_conntrack_drops_total Connections dropped by connection tracking in the app's network namespace (drop, early_drop and insert_failed).
# TYPE app_netns_conntrack_drops_total counter
app_netns_conntrack_drops_total 6
# HELP app_netns_conntrack_entries Connection-tracking entries in the app's network namespace (nf_conntrack_count).
# TYPE app_netns_conntrack_entries gauge
app_netns_conntrack_entries 28558
# HELP app_netns_conntrack_entries_limit The namespace's connection-tracking table size (nf_conntrack_max): new connections are dropped when it is full.
# TYPE app_netns_conntrack_entries_limit gauge
app_netns_conntrack_entries_limit 262144
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

func TestConntrackCollectorWithoutNetfilter(t *testing.T) {
	reg := prometheus.NewRegistry()
	dir := t.TempDir()
	reg.MustRegister(newConntrackCollector(dir, filepath.Join(dir, "missing")))
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("got %d series, %v; want none", n, err)
	}
}
