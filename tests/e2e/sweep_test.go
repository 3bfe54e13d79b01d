package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
)

// sweepRun runs a short make sweep on the lab: two paths, two steps from 50
// req/s up to the top its flat-out probe finds, two rounds of 2 s a step; then
// checks its report: every step of every path that ran it at its rate, a knee
// line for each path, the probe kept, the chart drawn, and the paths
// dashboard's sweep panels filled.
func sweepRun(t *testing.T, prom, id string) {
	start := time.Now()
	mk(t, "sweep", "TESTID="+id, "SCENARIO=ping", "PATHS=tcp-lo,uds-lo", "SWEEP_FROM=50", "SWEEP_STEPS=2",
		"SWEEP_ROUNDS=2", "DURATION=2", "WARMUP=1", "IDLE=0")
	mk(t, "report", "RUN="+id)
	var r struct {
		Settings struct{ Rates []int }
		Steps    map[string]map[string]struct {
			Rate     int
			Achieved *struct{ Mean float64 }
			P50      *struct{ Mean float64 }
			Failed   *string
			// openloop's own: the share of its requests sent over 1 ms
			// late, and why a step was its limit rather than the path's.
			LateShare *float64 `json:"late_share"`
			Generator *string
		}
		Knees map[string]struct {
			LowLoad *float64 `json:"low_load_p99_ms"`
		}
		Charts  []struct{ File string }
		Savings map[string][]struct {
			Pair   []string
			DiffUs *struct{ Blocks int } `json:"diff_us"`
		}
	}
	if err := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", id, "report.json"))), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Settings.Rates) != 2 || r.Settings.Rates[0] != 50 || r.Settings.Rates[1] <= 50 {
		t.Fatalf("rates %v: want 50 and the probe's top above it", r.Settings.Rates)
	}
	if len(r.Steps["1"]) != 2 {
		t.Errorf("step 1 has %d paths, want tcp-lo and uds-lo: %+v", len(r.Steps["1"]), r.Steps["1"])
	}
	for step, paths := range r.Steps {
		for path, o := range paths {
			want := r.Settings.Rates[map[string]int{"1": 0, "2": 1}[step]]
			if o.Rate != want || o.Achieved == nil || o.Achieved.Mean <= 0 {
				t.Errorf("step %s %s: rate %d (want %d), achieved %+v", step, path, o.Rate, want, o.Achieved)
			}
			// Whether the generator kept its schedule depends on what else
			// the machine runs (e2e runs three labs at once): logged, and
			// docs/results.md gives a quiet run's.
			if o.LateShare == nil {
				t.Errorf("step %s %s: no late share: openloop says how late it sent every step", step, path)
			} else {
				t.Logf("step %s %s at %d req/s: %.2f%% sent over 1 ms late; the generator's limit: %v", step, path,
					o.Rate, 100**o.LateShare, o.Generator != nil)
			}
			if step == "1" && (o.Failed != nil || o.P50 == nil) {
				t.Errorf("step 1 %s at 50 req/s: failed %v, p50 %+v: want held with a median", path, o.Failed, o.P50)
			}
		}
	}
	for _, p := range []string{"tcp-lo", "uds-lo"} {
		if k, ok := r.Knees[p]; !ok || k.LowLoad == nil || *k.LowLoad <= 0 {
			t.Errorf("knee of %s: %+v, want its p99 at the lowest rate", p, k)
		}
	}
	// The savings at a step from its interleaved stream (INTERLEAVE=10, tests/e2e/run.sh), second by second.
	if s := r.Savings["1"]; len(s) != 1 || s[0].DiffUs == nil || s[0].DiffUs.Blocks < 10 {
		t.Errorf("step 1's saving: %+v, want tcp-lo against uds-lo over the stream's 10 blocks", s)
	}
	md := mustRead(t, lab.Path(t, "results", id, "report.md"))
	for _, want := range []string{"## Where each path bends and breaks", "- `tcp-lo`: ", "| 50 | uds-lo | ",
		"paired second by second in each step's interleaved stream"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md has no %q:\n%s", want, md)
		}
	}
	if len(r.Charts) != 1 {
		t.Errorf("charts %+v, want the latency-against-load chart", r.Charts)
	}
	for _, f := range append([]string{"probe.json"}, func() (out []string) {
		for _, c := range r.Charts {
			out = append(out, c.File)
		}
		return
	}()...) {
		if _, err := os.Stat(lab.Path(t, "results", id, f)); err != nil {
			t.Errorf("results/%s/%s: %v", id, f, err)
		}
	}
	// The paths dashboard's sweep row and step annotation, on this run.
	checkPanels(t, prom, id, start, sweepPanel)
	t.Logf("%s", md)
}

// envelopeRun runs make sweep SWEEP=envelope, short: the app, nginx and
// nginx-lo started again with the app's net.core.somaxconn at 16, then
// tcp-lo and uds-lo flat out with wrk at 64 and 256 connections. A full
// socket backlog refuses at connect, which nginx answers with its 502; a full
// TCP backlog drops the SYN and the client retries, so it waits instead.
// Checked as nginx logged it (Prometheus, from nginx-log-exporter) and as wrk
// counted it (the report's steps). The lab stays at somaxconn 16: it runs last.
func envelopeRun(t *testing.T, prom, id string) {
	status := func() map[string]float64 {
		return vectorBy(t, prom, `sum by (path, status) (nginx_location_requests_total{job="nginx-log", path=~"tcp-lo|uds-lo"})`, "path", "status")
	}
	before := status()
	mk(t, "sweep", "SWEEP=envelope", "TESTID="+id, "SCENARIO=ping", "SWEEP_CONNECTIONS=64,256",
		"SWEEP_ROUNDS=2", "DURATION=2", "WARMUP=1", "IDLE=0")
	if got := strings.TrimSpace(run(t, "docker", "compose", "exec", "-T", "nginx-lo", "cat", "/proc/sys/net/core/somaxconn")); got != "16" {
		t.Errorf("the app's namespace has net.core.somaxconn %s after make sweep SWEEP=envelope, want 16 (APP_SOMAXCONN's default)", got)
	}
	// The log is flushed within 1 s and scraped every 5.
	var after map[string]float64
	waitFor(t, "nginx's 502s on uds-lo in Prometheus", 30*time.Second, func() error {
		after = status()
		if after["uds-lo/502"]-before["uds-lo/502"] <= 0 {
			return fmt.Errorf("no 502 logged on uds-lo: %v", after)
		}
		return nil
	})
	if err := refusedOnTheSocket(after["uds-lo/502"]-before["uds-lo/502"], after["tcp-lo/502"]-before["tcp-lo/502"]); err != nil {
		t.Errorf("nginx's log at somaxconn 16: %v", err)
	}
	mk(t, "report", "RUN="+id)
	var r struct {
		Steps map[string]map[string]struct {
			Connections int
			Statuses    map[string]float64
		}
	}
	if err := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", id, "report.json"))), &r); err != nil {
		t.Fatal(err)
	}
	refused := map[string]float64{}
	for _, paths := range r.Steps {
		for path, o := range paths {
			refused[path] += o.Statuses["non_2xx_3xx"]
		}
	}
	if err := refusedOnTheSocket(refused["uds-lo"], refused["tcp-lo"]); err != nil {
		t.Errorf("wrk's answers other than 2xx and 3xx: %v: %v (steps %+v)", refused, err, r.Steps)
	}
	t.Logf("at somaxconn 16, 64 and 256 connections: nginx logged %v 502s on uds-lo, %v on tcp-lo; wrk's non-2xx %v",
		after["uds-lo/502"]-before["uds-lo/502"], after["tcp-lo/502"]-before["tcp-lo/502"], refused)
}

// refusedOnTheSocket says whether a full listen backlog showed as it does:
// the socket refuses at once (connect(2): EAGAIN), which nginx answers 502,
// while TCP's full queue drops the SYN and the client retries, so it waits
// (504s, timeouts). A TCP connection can still end in nginx's 502, rarely:
// one whose last handshake ACK the full queue dropped is open on the client's
// side only and can meet a reset later (2 of TCP's 277 failures
// on the test bed's node at somaxconn 1, 2026-11-27, against the socket's
// 1,578 502s). So the socket must have 502s and TCP under a tenth as many.
func refusedOnTheSocket(socket, tcp float64) error {
	switch {
	case socket <= 0:
		return fmt.Errorf("no 502 on the socket (TCP %v): want the socket to refuse", tcp)
	case tcp*10 >= socket:
		return fmt.Errorf("TCP had %v 502s against the socket's %v: want under a tenth as many, TCP's full backlog making the client wait", tcp, socket)
	}
	return nil
}
