package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBacklogCollector(t *testing.T) {
	path := filepath.Join(t.TempDir(), "somaxconn")
	if err := os.WriteFile(path, []byte("4096\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(newBacklogCollector(path))
	want := `
# HELP app_listen_backlog The listen backlog of both the app's listeners (net.core.somaxconn in its network namespace, which Go's net.Listen asks for).
# TYPE app_listen_backlog gauge
app_listen_backlog 4096
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	missing := prometheus.NewRegistry()
	missing.MustRegister(newBacklogCollector(path + ".missing"))
	if n, err := testutil.GatherAndCount(missing); err != nil || n != 0 {
		t.Fatalf("got %d series, %v; want none without the file", n, err)
	}
}
