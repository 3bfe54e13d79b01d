package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestSockstatCollector(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sockstat")
	content := "sockets: used 120\nTCP: inuse 5 orphan 1 tw 42 alloc 7 mem 3\nUDP: inuse 2 mem 1\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newSockstatCollector(path))
	want := `
# HELP app_netns_tcp_sockets TCP sockets in the app's network namespace by state (inuse, orphan, tw = TIME_WAIT, alloc), from /proc/net/sockstat.
# TYPE app_netns_tcp_sockets gauge
app_netns_tcp_sockets{state="alloc"} 7
app_netns_tcp_sockets{state="inuse"} 5
app_netns_tcp_sockets{state="orphan"} 1
app_netns_tcp_sockets{state="tw"} 42
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "app_netns_tcp_sockets"); err != nil {
		t.Fatal(err)
	}
}

func TestSockstatCollectorWithoutFile(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newSockstatCollector(filepath.Join(t.TempDir(), "missing")))
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("got %d series, %v; want none", n, err)
	}
}
