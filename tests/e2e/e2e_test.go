// Package e2e runs the lab as users do (make up, make load, make down) under a
// real Docker engine and checks it through Prometheus's HTTP API. It runs from
// tests/e2e/run.sh (make e2e), which builds the stand-in images and sets the
// environment; on its own it skips, saying so.
package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
)

// labPath is a path of catalogue.json as the test uses it.
type labPath struct {
	path, nginx, listener string
	// peer is how the app sees nginx's connections (its
	// app_connections_accepted_total label): across the bridge "network",
	// from nginx-lo in its own network namespace "loopback", on the socket "local".
	peer   string
	pooled bool
}

// paths are the catalogue's paths, in its order (set by TestLab).
var paths []labPath

func readPaths(t *testing.T) []labPath {
	c := lab.ReadCatalogue(t)
	var out []labPath
	for _, name := range c.Order {
		p := c.Paths[name]
		peer := map[string]string{"bridge": "network", "loopback": "loopback", "socket": "local"}[p.Hop]
		out = append(out, labPath{name, p.Nginx, p.Listener, peer, p.Pooled})
	}
	return out
}

func allPaths() string {
	var names []string
	for _, p := range paths {
		names = append(names, p.path)
	}
	return strings.Join(names, ",")
}

// pathURL is where the test reaches a path: nginx at its published port,
// nginx-lo (not published: it shares the app's network namespace) at the
// app container's address on the lab's network, as the load generator does.
func pathURL(t *testing.T, nginx string, p labPath) string {
	t.Helper()
	if p.nginx == "nginx" {
		return nginx + "/" + p.path
	}
	id := strings.TrimSpace(run(t, "docker", "compose", "ps", "-q", "app"))
	ip := strings.TrimSpace(run(t, "docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", id))
	u, err := url.Parse(lab.ReadCatalogue(t).Nginx[p.nginx].URL)
	if err != nil || ip == "" {
		t.Fatalf("no address for %s: %v (app at %q)", p.nginx, err, ip)
	}
	return "http://" + ip + ":" + u.Port() + "/" + p.path
}

// TestLab brings the lab up once (make up) and runs each scenario as its own
// subtest, so that one failing leaves the others to run and
// `E2E_RUN='TestLab/kill' make e2e` runs one. Each scenario starts from the
// lab up on its own app and leaves it so (its cleanup restores what it changed).
// The scenarios that only change the lab (restart, notrack, stale-socket) run
// in TestApps's lab, beside these.
func TestLab(t *testing.T) {
	if os.Getenv("UDS_LAB_E2E") == "" {
		t.Skip("needs the stand-in images and environment from tests/e2e/run.sh: run `make e2e`")
	}
	// Beside TestKubernetes (its node's minutes overlap the scenarios here
	// that only wait on their loads); heavy keeps the loaded moments apart.
	t.Parallel()
	prom, nginx, testid := startLab(t, "e2e")

	t.Run("second door", func(t *testing.T) { secondDoor(t, prom) })

	// make load on every path, its figures, the dashboards and the report.
	t.Run("load", func(t *testing.T) { loadAndReport(t, prom, testid) })
	// make load TRAFFIC=: a log nginx wrote, replayed emulated and as logged.
	t.Run("replay", func(t *testing.T) { replayRun(t, prom, testid+"-replay") })

	// make floor: the transports alone, in the lab's namespaces; the max
	// runs' reports, later, set it beside their paths.
	floorRun := testid + "-floor"
	t.Run("floor", func(t *testing.T) { floor(t, floorRun) })

	// The scenarios that load the machine flat out or time a recovery, each
	// alone (heavy: never while TestKubernetes's node runs beside TestLab).
	// make sweep: latency against load, two short steps up to its probe's top.
	t.Run("sweep", func(t *testing.T) { alone(t); sweepRun(t, prom, testid+"-sweep") })

	// make max, with each generator the tests run (wrk, oha): short runs,
	// checked for shape, not figures. Their phases of a few seconds are enough
	// for what maxRun checks: the generator's rate and the app's requests
	// (Prometheus scrapes the app every 1 s); cAdvisor's figures, a sample
	// every 5-5.5 s, would need phases of 10 s at least.
	// wrk's run asks for a precision it cannot reach (PRECISION=0.01%): one
	// later batch, up to MAX_ROUNDS=3, merged into the run and reported.
	t.Run("max", func(t *testing.T) {
		alone(t)
		for _, gen := range []struct {
			name, paths, rounds, duration string
			more                          []string
		}{
			{"wrk", "tcp,uds,tcp-lo,uds-lo", "2", "3", []string{"PRECISION=0.01", "MAX_ROUNDS=3"}},
			// The client straight to the app, beside the same pair through nginx-lo.
			{"oha", "direct-tcp,direct-uds,tcp-lo,uds-lo,tcp-lo-ka,uds-lo-ka", "2", "3", nil},
			// No k6 row: it was there only to prove k6's own max mode, and
			// the tests no longer run k6 (its official image is the user's to
			// pull). wrk's row covers make max's default.
		} {
			t.Run(gen.name, func(t *testing.T) {
				maxRun(t, testid+"-max-"+gen.name, gen.name, gen.paths, gen.rounds, gen.duration, gen.more...)
				if gen.name == "oha" {
					straightToTheApp(t, testid+"-max-oha")
				}
			})
		}
	})

	// The app's process killed under load: JSON 502s, then back by the restart policy.
	t.Run("kill", func(t *testing.T) { alone(t); killUnderLoad(t, prom, nginx, testid+"-kill") })
	// Overload at 10x RATE: no crash, no hang, memory under the limits.
	t.Run("overload", func(t *testing.T) { alone(t); overload(t, prom, nginx, testid+"-overload") })
	// make sweep SWEEP=envelope: at somaxconn 16 the socket's full backlog
	// answers nginx's 502 where TCP's makes the client wait. Last: it leaves
	// the app at somaxconn 16.
	t.Run("envelope", func(t *testing.T) { alone(t); envelopeRun(t, prom, testid+"-envelope") })
}

// loadAndReport runs a short make load on every path of the catalogue and
// checks what each source counted, the dashboards and the report.
func loadAndReport(t *testing.T, prom, testid string) {
	before := appCounters(t, prom)
	loadStart := time.Now()
	step(t, "make load", func() {
		mk(t, "load", "TESTID="+testid, "SCENARIO=ping", "PATHS="+allPaths(),
			"RATE=100", "DURATION=5", "ROUNDS=2", "WARMUP=1", "INTERLEAVE=20")
	})

	// Prometheus scraped the generator's last counts before it exited (last_over_time:
	// see scrapedTotal); the app's counters arrive with the next scrape of the app.
	sent := map[string]float64{}
	var after counters
	waitFor(t, "the generator's final counts and the app's counters in Prometheus", 60*time.Second, func() error {
		sent = vector(t, prom, fmt.Sprintf(`sum by (path) (last_over_time(openloop_requests_total{job="openloop", testid=%q}[1h]))`, testid), "path")
		after = appCounters(t, prom)
		for _, l := range []string{"tcp", "unix"} {
			var n float64
			for _, p := range paths {
				if p.listener == l {
					n += sent[p.path]
				}
			}
			if got := after.requests[l] - before.requests[l]; n == 0 || got != n {
				return fmt.Errorf("listener %s: app counted %v /ping requests, openloop sent %v", l, got, n)
			}
		}
		// nginx's access log, through nginx-log-exporter, counted each request once.
		logged := vector(t, prom, `sum by (path) (nginx_location_requests_total{job="nginx-log", status="200"})`, "path")
		for _, p := range paths {
			if logged[p.path] != sent[p.path] {
				return fmt.Errorf("/%s/: nginx-log-exporter counted %v requests, openloop sent %v", p.path, logged[p.path], sent[p.path])
			}
		}
		return nil
	})

	t.Run("requests", func(t *testing.T) {
		failed := vector(t, prom, fmt.Sprintf(`sum by (path) (last_over_time(openloop_requests_total{job="openloop", testid=%q, status!~"[23].."}[1h]))`, testid), "path")
		for _, p := range paths {
			if sent[p.path] < 100 {
				t.Errorf("/%s/: %v requests from openloop, want >= 100", p.path, sent[p.path])
			}
			if failed[p.path] != 0 {
				t.Errorf("/%s/: %v failed requests", p.path, failed[p.path])
			}
		}
		t.Logf("openloop requests per path: %v", sent)
	})

	// The app counts accepted connections by listener and peer: nginx's from
	// across the bridge (network), nginx-lo's from loopback, both on the socket
	// (local). Each group must have accepted one connection per request of its
	// new-connection paths and a handful for its pooled paths (plus the
	// healthchecks' own: the app's asks both listeners on loopback every 10 s).
	t.Run("connections", func(t *testing.T) {
		type group struct{ listener, peer string }
		perRequest, pooled := map[group]float64{}, map[group]float64{}
		for _, p := range paths {
			g := group{p.listener, p.peer}
			if p.pooled {
				pooled[g] += sent[p.path]
			} else {
				perRequest[g] += sent[p.path]
			}
		}
		for g, n := range perRequest {
			accepted := after.accepted[g.listener+"/"+g.peer] - before.accepted[g.listener+"/"+g.peer]
			// Healthchecks, the pool growing on a busy machine and Prometheus's
			// scrape connection come on top; pooling that failed would add one
			// per pooled request, far more than this.
			slack := max(30, 0.1*pooled[g])
			if accepted < n || accepted > n+slack {
				t.Errorf("listener %s, peer %s: accepted %v connections for %v new-connection and %v pooled requests: want %v..%v",
					g.listener, g.peer, accepted, n, pooled[g], n, n+slack)
			}
			t.Logf("listener %s, peer %s: %v connections accepted for %v new-connection + %v pooled requests", g.listener, g.peer, accepted, n, pooled[g])
		}
	})

	t.Run("histograms", func(t *testing.T) {
		q := fmt.Sprintf(`histogram_quantile(0.99, sum by (path) (rate(openloop_request_duration_seconds{job="openloop", testid=%q}[2m])))`, testid)
		p99 := vector(t, prom, q, "path")
		for _, p := range paths {
			if p99[p.path] <= 0 {
				t.Errorf("p99 for /%s/ = %v: no native histogram data", p.path, p99[p.path])
			}
		}
		t.Logf("openloop p99 per path (s): %v", p99)
	})

	t.Run("panels", func(t *testing.T) { checkPanels(t, prom, testid, loadStart, notSweep) })
	// The watchers panel is "A or 0" per watcher: each A, cAdvisor's up and
	// the series it labels by compose service included, must rise above 0.
	t.Run("watchers", func(t *testing.T) {
		for expr, peak := range fallbackPeaks(t, prom, "host.json", "Watchers: node-exporter, cAdvisor", testid, loadStart, time.Now()) {
			if peak <= 0 {
				t.Errorf("watchers panel: %s never above 0", expr)
			}
			t.Logf("watchers panel: %s peaked at %v", expr, peak)
		}
	})
	t.Run("report", func(t *testing.T) { checkReport(t, testid) })
}

// floor runs make floor for two short rounds and checks its report: every
// transport measured without errors, each comparison with an interval.
func floor(t *testing.T, id string) {
	mk(t, "floor", "TESTID="+id, "ROUNDS=2", "WARMUP=0", "FLOOR_DURATION=1")
	mk(t, "report", "RUN="+id)
	var r struct {
		Summary map[string]map[string]struct {
			P50    *float64
			Errors int
		}
		Comparisons []struct {
			Key, Measure string
			Ratio        *struct{ Mean, Lo, Hi *float64 }
		}
	}
	if err := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", id, "report.json"))), &r); err != nil {
		t.Fatal(err)
	}
	for _, tr := range []string{"uds", "loopback", "bridge"} {
		for _, m := range []string{"rtt-100", "rtt-102400", "connect"} {
			if e, ok := r.Summary[tr][m]; !ok || e.P50 == nil || *e.P50 <= 0 || e.Errors != 0 {
				t.Errorf("floor %s %s: %+v (present %v), want a p50 and no errors", tr, m, e, ok)
			}
		}
	}
	if len(r.Comparisons) != 6 {
		t.Errorf("%d comparisons, want 6 (socket and bridge x 3 measures)", len(r.Comparisons))
	}
	for _, c := range r.Comparisons {
		if c.Ratio == nil || c.Ratio.Lo == nil || c.Ratio.Hi == nil || *c.Ratio.Lo > *c.Ratio.Mean || *c.Ratio.Mean > *c.Ratio.Hi {
			t.Errorf("%s %s: ratio %+v, want a mean inside its interval", c.Key, c.Measure, c.Ratio)
		}
	}
	if out := run(t, "docker", "ps", "-a", "--filter", "label=com.docker.compose.service=floor-near", "-q"); strings.TrimSpace(out) != "" {
		t.Errorf("floor-near is still there after make floor: %s", out)
	}
	t.Logf("%s", mustRead(t, lab.Path(t, "results", id, "report.md")))
}

// maxRun runs make max with one generator and checks its report's shape;
// with MAX_ROUNDS among more, that the run ended with that many rounds.
func maxRun(t *testing.T, run, gen, paths, rounds, duration string, more ...string) {
	mk(t, append([]string{"max", "TESTID=" + run, "GENERATOR=" + gen, "PATHS=" + paths, "ROUNDS=" + rounds,
		"DURATION=" + duration, "WARMUP=1", "CONNECTIONS=16"}, more...)...)
	mk(t, "report", "RUN="+run)
	r := readReport(t, run)
	if r.Mode != "max" || r.Generator != gen {
		t.Errorf("report.json: mode %q generator %q, want max and %s", r.Mode, r.Generator, gen)
	}
	for _, kv := range more {
		if limit, ok := strings.CutPrefix(kv, "MAX_ROUNDS="); ok {
			want, _ := strconv.Atoi(limit)
			if r.Precision == nil || r.Precision.Met || r.Precision.Rounds != want {
				t.Errorf("report.json precision = %+v, want not met after MAX_ROUNDS=%d rounds", r.Precision, want)
			}
			perPath := map[string]int{}
			for _, ph := range r.Phases {
				perPath[ph.Path]++
			}
			for _, p := range strings.Split(paths, ",") {
				if perPath[p] != want {
					t.Errorf("%s: %d measured rounds in report.json, want %d (the later batch merged)", p, perPath[p], want)
				}
			}
			if md := mustRead(t, lab.Path(t, "results", run, "report.md")); !strings.Contains(md, "Precision: **not met**") {
				t.Errorf("report.md does not say the precision was not met")
			}
		}
	}
	// The newest floor run (the floor scenario's, just before) beside the paths.
	if md := mustRead(t, lab.Path(t, "results", run, "report.md")); !strings.Contains(md, "## Down to the transport") ||
		!regexp.MustCompile("`ping` \\(100 B\\), the socket against TCP over loopback: alone, round trip [0-9.]+x \\(95% CI").MatchString(md) {
		t.Errorf("report.md does not set the floor beside the paths:\n%s", md)
	}
	for _, ph := range r.Phases {
		if v := ph.Figures["rps"]; v == nil || *v <= 0 {
			t.Errorf("%s: rps = %v", ph.Name, v)
		}
		if v := ph.Figures["app_requests"]; v == nil || *v <= 0 {
			t.Errorf("%s: app_requests = %v", ph.Name, v)
		}
	}
	t.Logf("%s", mustRead(t, lab.Path(t, "results", run, "report.md")))
}

// stackRun checks one stack's run of make compare (the lab on it with the
// settings of its stacks/<name>/stack.env, the stand-in image in place of the one
// users build): nginx decided the app was ready without an image HEALTHCHECK,
// and no request failed on any path. Then make contract with those settings.
func stackRun(t *testing.T, prom, name, testid string, npaths int) {
	requests, failed, _ := phases(t, testid)
	if requests < float64(npaths)*80 || failed != 0 {
		t.Errorf("%s: openloop sent %v requests over %d paths, %v failed; want >= 80 a path and none failed", name, requests, npaths, failed)
	}
	t.Logf("%s: %v requests through its %d paths, none failed", name, requests, npaths)
	loggedPerPath(t, prom, testid)
	// make up STACK=<name> recorded the stack (.lab/<project>/up.env): make load's
	// compose.json has it, and the report names it.
	if got := readReport(t, testid).Stack; got == nil || *got != name {
		t.Errorf("%s: the report names the stack %v, want %q (make up's .lab/<project>/up.env, through make load's compose.json)", name, orNone(got), name)
	}
	if name == "go" {
		return // the contract scenario checks the lab's app
	}
	// A stack exports no metrics: the report's app CPU per request is its
	// container's CPU from cAdvisor, in every measured phase.
	for _, ph := range readReport(t, testid).Phases {
		if v := ph.Figures["app_cpu_us_per_req"]; v == nil || *v <= 0 {
			t.Errorf("%s, %s: app CPU per request = %v (missing: %q), want its container's CPU from cAdvisor", name, ph.Name, deref(v), ph.Missing["app_cpu_us_per_req"])
		} else {
			t.Logf("%s, %s: app CPU per request from its container (cAdvisor): %.1f µs", name, ph.Name, *v)
		}
	}
	image := os.Getenv("STACK_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_IMAGE")
	if image == "" {
		t.Fatalf("no stand-in image for %s (tests/e2e/standins.sh prints STACK_*_IMAGE)", name)
	}
	// make contract STACK=<name>, its stack.env's settings: asked in its
	// protocol (FastCGI for PHP-FPM), the stack keeps every required clause
	// without metrics.
	var passed []string
	step(t, "make contract on "+name, func() {
		for _, c := range contract(t, "STACK="+name, "APP_IMAGE="+image).Clauses {
			if c.Pass {
				passed = append(passed, c.Clause)
			}
		}
	})
	t.Logf("%s: make contract: %d clauses kept: %s", name, len(passed), strings.Join(passed, "; "))
}

// loggedPerPath checks a run in Prometheus, queried at the run's end (the
// checks come after every stack has run, when an earlier run's series are
// stale): Prometheus scraped all the generator's requests, and from nginx's
// side, as a stack that exports no metrics is seen, nginx-log-exporter's count
// of each path (at the end of the run, less at its start) is the generator's.
func loggedPerPath(t *testing.T, prom, testid string) {
	t.Helper()
	var l struct {
		StartMs float64 `json:"start_ms"`
		Phases  []struct {
			Path        string  `json:"path"`
			StartOffset float64 `json:"start_offset_s"`
			Duration    float64 `json:"duration_s"`
			Requests    float64 `json:"requests"`
			// make load's interleaved stream: its requests by the path each went to.
			ByPath map[string]struct {
				Requests float64 `json:"requests"`
			} `json:"by_path"`
		} `json:"phases"`
	}
	if err := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", testid, "load.json"))), &l); err != nil {
		t.Fatal(err)
	}
	sent, end := map[string]float64{}, 0.0
	for _, p := range l.Phases {
		if p.ByPath != nil {
			for path, v := range p.ByPath {
				sent[path] += v.Requests
			}
		} else {
			sent[p.Path] += p.Requests
		}
		end = max(end, p.StartOffset+p.Duration)
	}
	// The log is flushed within 1 s and scraped every 5: 8 s after the end
	// holds every line, and the next stack is still starting.
	at := func(query string, s float64) map[string]float64 {
		q := url.Values{"query": {query}, "time": {fmt.Sprintf("%.3f", s)}}
		out := map[string]float64{}
		for _, r := range promAPI(t, prom, "query", q) {
			var v float64
			fmt.Sscan(r.Value[1].(string), &v)
			out[r.Metric["path"]] = v
		}
		return out
	}
	endS := l.StartMs/1000 + end + 8
	// The generator's series are stale by then (its container has exited): their last values.
	scraped := at(fmt.Sprintf(`sum by (path) (last_over_time(openloop_requests_total{job="openloop", testid=%q}[1h]))`, testid), endS)
	logged := `sum by (path) (nginx_location_requests_total{job="nginx-log"})`
	before, after := at(logged, l.StartMs/1000-1), at(logged, endS)
	for path, n := range sent {
		if scraped[path] != n {
			t.Errorf("%s: /%s/: Prometheus has %v of openloop's %v requests", testid, path, scraped[path], n)
		}
		if got := after[path] - before[path]; got != n {
			t.Errorf("%s: /%s/: nginx's access log counted %v requests, openloop sent %v", testid, path, got, n)
		}
	}
}

// staleSocket kills the app (docker kill: its socket stays in the volume, as
// after a crash), then make down and make up: the app starts over the stale
// socket and Prometheus still has what it stored before the down.
func staleSocket(t *testing.T, prom, nginx string) {
	step(t, "docker kill app, leaving its socket behind", func() {
		id := strings.TrimSpace(run(t, "docker", "compose", "ps", "-q", "app"))
		run(t, "docker", "kill", id)
		run(t, "docker", "compose", "exec", "-T", "nginx", "test", "-S", "/sock/app.sock")
	})
	stored := time.Now()
	step(t, "make down; make up with the stale socket", func() {
		mk(t, "down")
		mk(t, "up")
	})
	// Prometheus's data is in a named volume: make down keeps it (make clean,
	// at the end, deletes it: see assertNothingLeft).
	if n := len(promAPI(t, prom, "query", url.Values{"query": {`up{job="app"}`}, "time": {fmt.Sprint(stored.Unix())}})); n != 1 {
		t.Errorf("after make down and make up, up{job=\"app\"} before the down: %d series, want 1", n)
	}
	for _, p := range paths {
		body := get(t, pathURL(t, nginx, p)+"/ping")
		if strings.TrimSpace(body) != `{"message":"pong"}` {
			t.Errorf("after restart /%s/ping = %q", p.path, body)
		}
	}
	if logs := run(t, "docker", "compose", "logs", "--no-color", "app"); !strings.Contains(logs, "stale") {
		t.Errorf("the app's log does not mention removing the stale socket:\n%s", logs)
	}
}

// sweepPanel: the paths dashboard's sweep row and its annotation, which only
// a make sweep run fills (checked by the sweep scenario).
func sweepPanel(q lab.PanelQuery) bool {
	return strings.HasPrefix(q.Panel, "Sweep: ") || strings.HasPrefix(q.Panel, "annotation Sweep")
}

func notSweep(q lab.PanelQuery) bool { return !sweepPanel(q) }

// checkPanels runs every panel and annotation query of the dashboards that
// keep selects, with the variables set to this run, over its time range, and
// fails for each that returns no data. cAdvisor's queries too: the test bed
// runs cAdvisor's own manager and collectors (tests/e2e/standins/cadvisor).
func checkPanels(t *testing.T, prom, testid string, from time.Time, keep func(lab.PanelQuery) bool) {
	to := time.Now()
	vars := map[string]string{
		"testid": testid, "path": ".*", "cores": ".*", "__rate_interval": "30s", "__interval": "15s",
		"__range": fmt.Sprintf("%ds", int(to.Sub(from).Seconds())+1),
	}
	live, cadvisor, byEvent := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, q := range lab.PanelQueries(t) {
		if !keep(q) {
			continue
		}
		expr := lab.Substitute(q.Expr, vars)
		names, err := lab.MetricNames(expr)
		if err != nil {
			t.Errorf("%s: %s: %v", q, expr, err)
			continue
		}
		if lab.UsesCAdvisor(names) {
			cadvisor[q.String()] = true
		}
		// "A or 0" has data whatever A has: proven where an event makes A
		// non-zero (errors in kill, dropped requests in overload), not here.
		if zero, _ := lab.ZeroFallback(expr); zero {
			byEvent[q.String()] = true
			continue
		}
		if n := samples(t, prom, expr, from, to); n == 0 {
			t.Errorf("%s: no data for %s", q, expr)
			continue
		}
		live[q.String()] = true
	}
	for p := range byEvent {
		delete(live, p)
	}
	provenCAdvisor := map[string]bool{}
	for p := range cadvisor {
		if live[p] {
			provenCAdvisor[p] = true
		}
	}
	t.Logf("panels with an \"or 0\" fallback, proven by the kill and overload scenarios (%d):\n  %s",
		len(byEvent), strings.Join(sorted(byEvent), "\n  "))
	t.Logf("panels proven with live data (%d):\n  %s", len(live), strings.Join(sorted(live), "\n  "))
	t.Logf("of which panels with cAdvisor queries, proven with live data from cAdvisor's library (%d of %d):\n  %s",
		len(provenCAdvisor), len(cadvisor), strings.Join(sorted(provenCAdvisor), "\n  "))
}

// samples runs a range query (5 s steps) and counts the samples returned.
func samples(t *testing.T, prom, query string, from, to time.Time) int {
	t.Helper()
	n := 0
	for _, s := range promAPI(t, prom, "query_range", url.Values{
		"query": {query}, "step": {"5"},
		"start": {fmt.Sprint(from.Unix())}, "end": {fmt.Sprint(to.Unix())},
	}) {
		n += len(s.Values)
	}
	return n
}

// fallbackPeaks runs the "A or 0" queries of one panel (by dashboard and
// title) over a time range, with the variables set to this run, and returns
// each one's largest value: above 0 only where A itself had data.
func fallbackPeaks(t *testing.T, prom, dashboard, title, testid string, from, to time.Time) map[string]float64 {
	t.Helper()
	vars := map[string]string{"testid": testid, "path": ".*", "cores": ".*", "__rate_interval": "30s", "__interval": "15s"}
	peaks := map[string]float64{}
	for _, q := range lab.PanelQueries(t) {
		expr := lab.Substitute(q.Expr, vars)
		if zero, _ := lab.ZeroFallback(expr); q.Dashboard != dashboard || q.Panel != title || !zero {
			continue
		}
		peaks[expr] = 0
		for _, s := range promAPI(t, prom, "query_range", url.Values{
			"query": {expr}, "step": {"5"}, "start": {fmt.Sprint(from.Unix())}, "end": {fmt.Sprint(to.Unix())},
		}) {
			for _, v := range s.Values {
				if pair, _ := v.([]any); len(pair) == 2 {
					f, _ := strconv.ParseFloat(fmt.Sprint(pair[1]), 64)
					peaks[expr] = max(peaks[expr], f)
				}
			}
		}
	}
	if len(peaks) == 0 {
		t.Fatalf("no \"or 0\" query in panel %q of %s", title, dashboard)
	}
	return peaks
}

// series is one result of Prometheus's query API: a sample or a range.
type series struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
	Values []any             `json:"values"`
}

// promAPI calls /api/v1/<endpoint> and returns its result, failing the test
// on an error.
func promAPI(t *testing.T, prom, endpoint string, v url.Values) []series {
	t.Helper()
	resp, err := lab.PrometheusGet(t, prom+"/api/v1/"+endpoint+"?"+v.Encode())
	if err != nil {
		t.Fatalf("%s %s: %v", endpoint, v.Get("query"), err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []series `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("%s %s: %v %s", endpoint, v.Get("query"), err, r.Error)
	}
	return r.Data.Result
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkReport runs `make report` for the run and checks what it wrote: every
// measured phase of every path, its figures from Prometheus, ratios to tcp.
func checkReport(t *testing.T, testid string) {
	mk(t, "report", "RUN="+testid)
	dir := lab.Path(t, "results", testid)
	for _, f := range []string{"load.json", "compose.json", "report.md", "report.json"} {
		if _, err := os.Stat(dir + "/" + f); err != nil {
			t.Errorf("results/%s/%s: %v", testid, f, err)
		}
	}
	// The answer's chart, the stream's and its percentiles', the costs' and the breakdown's.
	for _, f := range []string{"ping-answer.png", "ping-stream.png", "ping-percentiles.png", "ping-cost.png", "ping-breakdown.png"} {
		if _, err := os.Stat(dir + "/" + f); err != nil {
			t.Errorf("results/%s: no chart %s: %v", testid, f, err)
		}
	}
	md, _ := os.ReadFile(dir + "/report.md")
	t.Logf("report.md:\n%s", md)
	// It opens with the answer as a table, a row per comparison.
	if answer, _, ok := strings.Cut(string(md), "## Machine"); !ok || !strings.Contains(answer, "| connections | the socket against | through | socket saved | 95% CI | verdict |") ||
		strings.Count(answer, "| new per request |")+strings.Count(answer, "| pooled (keepalive) |") != 4 {
		t.Errorf("report.md does not open with the answer's table of 4 comparisons")
	}

	r := readReport(t, testid)
	if len(r.Phases) != 2*len(paths) {
		t.Errorf("report.json has %d measured phases, want %d (2 rounds x every path, warm-up left out)", len(r.Phases), 2*len(paths))
	}
	// Figures from both sources: the generator's own (load.json), and Prometheus over each phase's window.
	for _, ph := range r.Phases {
		for _, f := range []string{"requests", "client_p50_ms", "client_p99_ms", "app_requests", "app_p50_ms", "app_cpu_us_per_req", "app_ctx_switches_per_req", "nginx_requests"} {
			if v := ph.Figures[f]; v == nil || *v <= 0 {
				t.Errorf("%s: %s = %v, want a positive figure", ph.Name, f, v)
			}
		}
	}
	// The container figures, from cAdvisor (the test bed runs its library).
	containerCosts(t, r, "cAdvisor")
	for _, p := range paths[1:] {
		if ratio := r.Workloads["ping"].Paths[p.path].RatioToTCP; ratio["client_p50_ms"] == nil {
			t.Errorf("no client p50 ratio to tcp for /%s/", p.path)
		}
	}
	// The answer and the breakdown: every term of the catalogue has its two
	// paths in this run, so every term is there.
	ping := r.Workloads["ping"]
	// The answer's latency comes from the interleaved stream: every path in it, paired block by block.
	if ping.Interleaved == nil || len(ping.Interleaved.Paths) != len(paths) {
		t.Errorf("report.json: the interleaved stream's paths: %v, want all %d", ping.Interleaved, len(paths))
	} else {
		for p, e := range ping.Interleaved.Paths {
			if e.Requests < 150 || e.Blocks < 15 {
				t.Errorf("interleaved stream, /%s/: %d requests in %d blocks with a median, want >= 150 in >= 15", p, e.Requests, e.Blocks)
			}
		}
	}
	if !strings.Contains(ping.Answer, "their interleaved stream (20 blocks of 1 s)") {
		t.Errorf("the answer does not say it pairs the interleaved stream's blocks: %q", ping.Answer)
	}
	if !strings.Contains(ping.Answer, "(`uds-lo` against `tcp-lo`") || !strings.Contains(ping.Answer, "(`uds` against `tcp`") {
		t.Errorf("the answer does not compare the socket with both TCPs: %q", ping.Answer)
	}
	// Every term but Kubernetes' stand-ins (instead_of), which a run with uds leaves out.
	for _, term := range lab.ReadCatalogue(t).Breakdown.Terms {
		if _, ok := ping.Breakdown[term.Key]; ok != (term.InsteadOf == "") {
			t.Errorf("report.json's breakdown term %s: present %v, want %v (stands in for %q)", term.Key, ok, term.InsteadOf == "", term.InsteadOf)
		}
	}
	// The control: the socket through nginx-lo against the socket through nginx.
	// The same work, so the same median within a wide margin (a short run on a
	// busy machine); a misplaced nginx-lo (another hop, other limits) would not be.
	for _, pair := range [][2]string{{"uds-lo", "uds"}, {"uds-lo-ka", "uds-ka"}} {
		a, b := ping.Paths[pair[0]].Mean["client_p50_ms"], ping.Paths[pair[1]].Mean["client_p50_ms"]
		if a == nil || b == nil || *a / *b < 0.5 || *a / *b > 2 {
			t.Errorf("control %s against %s: client p50 %v ms against %v ms, want within a factor of 2", pair[0], pair[1], deref(a), deref(b))
		} else {
			t.Logf("control %s against %s: client p50 %.3f ms against %.3f ms", pair[0], pair[1], *a, *b)
		}
	}
	// Errors fail the test; saturation is this machine's business (a busy
	// 2-core CI machine can make openloop send late or drop requests) and is only shown.
	for _, w := range r.Warnings {
		switch w.Kind {
		case "errors":
			t.Errorf("report warns %s: %s", w.Kind, w.Message)
		case "saturated":
			t.Logf("report warns %s: %s", w.Kind, w.Message)
		}
	}
}

// killUnderLoad kills the app's process (SIGKILL, as a crash) while openloop runs a
// fixed-rate load, and measures how long until every path serves again and
// how many requests failed. It kills the process from the host: Docker counts
// `docker kill` as a stop by hand and does not restart after it (seen with
// Engine 20.10), while a process that dies on its own is restarted by the
// compose restart policy, which is what a crash is.
func killUnderLoad(t *testing.T, prom, nginx, testid string) {
	// The streams alone (ROUNDS=0; tcp-lo-ka's, then tcp's), long enough to
	// span the kill and the recovery (15 s at most, below).
	load := exec.Command("make", "load", "TESTID="+testid, "SCENARIO=ping", "PATHS=tcp,tcp-lo-ka",
		"RATE=50", "INTERLEAVE=15", "ROUNDS=0", "IDLE=0")
	load.Dir = lab.Root(t)
	var out strings.Builder
	load.Stdout, load.Stderr = &out, &out
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	waitForLoad(t, prom, testid)
	id := strings.TrimSpace(run(t, "docker", "compose", "ps", "-q", "app"))
	pid := strings.TrimSpace(run(t, "docker", "inspect", "-f", "{{.State.Pid}}", id))
	killed := time.Now()
	run(t, "kill", "-9", pid)

	var recovered time.Duration
	saw502 := false
	for recovered == 0 {
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("paths not all serving 30 s after the kill")
		}
		ok := 0
		for _, p := range paths {
			resp, err := http.Get(pathURL(t, nginx, p) + "/ping")
			if err != nil {
				continue
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				ok++
			case http.StatusBadGateway:
				saw502 = true
				// The README's troubleshooting entry names this answer.
				if !strings.Contains(string(body), `{"error":"the app is not answering on this path (down or restarting)"}`) {
					t.Errorf("502 body during the outage is not nginx's JSON error: %q", body)
				}
			}
		}
		if ok == len(paths) {
			recovered = time.Since(killed)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The load fails its threshold if more than 1% failed: expected here.
	_ = load.Wait()
	// The loopback paths wait for nginx-lo to notice the app's new network
	// namespace at its next healthcheck (every 5 s) and restart: up to about
	// 8 s here (1.3 to 7.7 s measured); 15 s leaves a loaded machine room.
	if recovered > 15*time.Second {
		t.Errorf("every path served again %.1f s after the kill, want < 15 s", recovered.Seconds())
	}
	restarts := strings.TrimSpace(run(t, "docker", "inspect", "-f", "{{.RestartCount}}", id))
	total := scrapedTotal(t, prom, testid)
	failed := vector(t, prom, fmt.Sprintf(`sum(last_over_time(openloop_requests_total{job="openloop", testid=%q, status!~"[23].."}[1h]))`, testid), "")[""]
	if !saw502 {
		t.Errorf("no 502 during the outage: nginx should answer its JSON 502 while the app is down")
	}
	// The errors panel shows the outage through nginx's 5xx (its "or 0"
	// fallback would show a line either way). The generator's own series of a
	// failing status is born with its first failure, so rate() cannot see a
	// single burst (no earlier sample): logged, not asserted; the panel says so.
	waitFor(t, "the errors panel showing the outage", 30*time.Second, func() error {
		peaks := fallbackPeaks(t, prom, "paths.json", "Errors per path", testid, started, time.Now())
		for expr, peak := range peaks {
			if strings.Contains(expr, "nginx_location_requests_total") && peak <= 0 {
				return fmt.Errorf("%s: peak %v, want > 0 after the kill", expr, peak)
			}
		}
		t.Logf("errors panel peaks after the kill: %v", peaks)
		return nil
	})
	t.Logf("app killed under 50 req/s: every path served again after %.2f s (restarts: %s, saw a 502: %v); "+
		"openloop: %v of %v requests failed", recovered.Seconds(), restarts, saw502, failed, total)
	if restarts == "0" {
		t.Errorf("the app was not restarted by the restart policy")
	}
	if total == 0 {
		t.Errorf("no openloop results for %s:\n%s", testid, out.String())
	}
}

// waitForLoad waits until Prometheus has scraped requests of run testid from
// the generator (every second, from its start): the load is under way.
func waitForLoad(t *testing.T, prom, testid string) {
	t.Helper()
	waitFor(t, "Prometheus scraping openloop's "+testid, 60*time.Second, func() error {
		if v, _ := scalar(t, prom, fmt.Sprintf(`sum(openloop_requests_total{job="openloop", testid=%q})`, testid)); v <= 0 {
			return fmt.Errorf("no openloop requests of %s in Prometheus yet", testid)
		}
		return nil
	})
}

// scrapedAfter waits until Prometheus has scraped job after the moment when.
func scrapedAfter(t *testing.T, prom, job string, when time.Time) {
	t.Helper()
	waitFor(t, "a scrape of "+job+" after "+when.Format("15:04:05"), 30*time.Second, func() error {
		if ts, ok := scalar(t, prom, fmt.Sprintf(`max(timestamp(up{job=%q}))`, job)); !ok || ts <= float64(when.UnixMilli())/1000 {
			return fmt.Errorf("last scrape of %s at %v", job, ts)
		}
		return nil
	})
}

// scrapedTotal waits until Prometheus holds all the requests of run testid that
// the generator's load.json counts, and returns them. openloop waits for one
// more scrape after its last request before it exits, so the wait is short.
// Once it has exited, Prometheus's next scrape of it fails and marks its
// series stale: an instant query of them finds nothing, so the tests read
// their last values scraped, last_over_time over the last hour (a stale
// marker is not a sample; each run's testid is its own).
func scrapedTotal(t *testing.T, prom, testid string) float64 {
	t.Helper()
	requests, _, _ := phases(t, testid)
	var total float64
	waitFor(t, "Prometheus's last scrape of openloop's "+testid, 30*time.Second, func() error {
		total, _ = scalar(t, prom, fmt.Sprintf(`sum(last_over_time(openloop_requests_total{job="openloop", testid=%q}[1h]))`, testid))
		if requests == 0 || total != requests {
			return fmt.Errorf("Prometheus has %v of openloop's %v requests", total, requests)
		}
		return nil
	})
	return total
}

// report is what the e2e test reads of report.json.
type report struct {
	Mode      string  `json:"mode"`
	Generator string  `json:"generator"`
	Stack     *string `json:"stack"`
	Phases    []struct {
		Name    string              `json:"name"`
		Path    string              `json:"path"`
		Figures map[string]*float64 `json:"figures"`
		Missing map[string]string   `json:"missing"`
		Window  struct {
			End float64 `json:"end_s"`
		} `json:"window"`
	} `json:"phases"`
	Workloads map[string]struct {
		Paths map[string]struct {
			RatioToTCP map[string]any      `json:"ratio_to_tcp"`
			Mean       map[string]*float64 `json:"mean"`
		} `json:"paths"`
		Answer      string                    `json:"answer"`
		Breakdown   map[string]map[string]any `json:"breakdown"`
		Interleaved *struct {
			Paths map[string]struct {
				Requests int `json:"requests"`
				Blocks   int `json:"blocks"`
			} `json:"paths"`
		} `json:"interleaved"`
	} `json:"workloads"`
	Warnings []struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"warnings"`
	Precision *struct {
		Met    bool `json:"met"`
		Rounds int  `json:"rounds"`
	} `json:"precision"`
}

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

func readReport(t *testing.T, run string) report {
	t.Helper()
	var r report
	if err := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", run, "report.json"))), &r); err != nil {
		t.Fatalf("results/%s/report.json: %v", run, err)
	}
	return r
}

// containerCosts checks nginx's CPU per request and the load generator's
// cores in every phase of a report, from cAdvisor (source names it). Except
// the generator's in the run's last phase: its container or pods exit as it
// ends (once Prometheus has scraped its last counts), so cAdvisor (a sample
// every 5-5.5 s) has none of it after the window, and one taken inside it is
// gone if Prometheus scrapes after the exit; the report then has too few
// samples, and must say so.
func containerCosts(t *testing.T, r report, source string) {
	t.Helper()
	last := 0.0
	for _, ph := range r.Phases {
		last = max(last, ph.Window.End)
	}
	for _, ph := range r.Phases {
		for _, f := range []string{"nginx_cpu_us_per_req", "generator_cpu_cores"} {
			v := ph.Figures[f]
			if f == "generator_cpu_cores" && v == nil && ph.Window.End == last && strings.Contains(ph.Missing[f], "cAdvisor samples") {
				t.Logf("%s (the last phase): %s missing: %s", ph.Name, f, ph.Missing[f])
				continue
			}
			if v == nil || *v <= 0 {
				t.Errorf("%s: %s = %v (missing: %q), want a positive figure from %s", ph.Name, f, deref(v), ph.Missing[f], source)
			}
		}
		t.Logf("%s: from %s, nginx CPU %v µs per request, the generator %v cores", ph.Name, source,
			deref(ph.Figures["nginx_cpu_us_per_req"]), deref(ph.Figures["generator_cpu_cores"]))
	}
}

// orNone is a string pointer's value, or "none".
func orNone(s *string) string {
	if s == nil {
		return "none"
	}
	return *s
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type counters struct{ requests, accepted map[string]float64 }

func appCounters(t *testing.T, prom string) counters {
	t.Helper()
	return counters{
		requests: vector(t, prom, `sum by (listener) (app_http_requests_total{job="app", route="/ping", code="200"})`, "listener"),
		accepted: vectorBy(t, prom, `sum by (listener, peer) (app_connections_accepted_total{job="app"})`, "listener", "peer"),
	}
}

// vectorBy runs an instant query and maps the labels' values, joined by "/",
// to the sample value.
func vectorBy(t *testing.T, prom, query string, labels ...string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range promAPI(t, prom, "query", url.Values{"query": {query}}) {
		var v float64
		fmt.Sscan(s.Value[1].(string), &v)
		var key []string
		for _, l := range labels {
			key = append(key, s.Metric[l])
		}
		out[strings.Join(key, "/")] = v
	}
	return out
}

// vector runs an instant query and maps one label's value to the sample value.
func vector(t *testing.T, prom, query, label string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range promAPI(t, prom, "query", url.Values{"query": {query}}) {
		var v float64
		fmt.Sscan(s.Value[1].(string), &v)
		out[s.Metric[label]] = v
	}
	return out
}

func scalar(t *testing.T, prom, query string) (float64, bool) {
	t.Helper()
	v, ok := vector(t, prom, query, "")[""]
	return v, ok
}

func step(t *testing.T, name string, fn func()) {
	t.Helper()
	start := time.Now()
	t.Logf("== %s", name)
	fn()
	t.Logf("== %s: %.1fs", name, time.Since(start).Seconds())
}

// mk runs a Makefile target from the repository's top, as a user would.
func mk(t *testing.T, args ...string) {
	t.Helper()
	err := againAfterRestart(t, func() error {
		cmd := exec.Command("make", args...)
		cmd.Dir = lab.Root(t)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	})
	if err != nil {
		t.Fatalf("make %s: %v", strings.Join(args, " "), err)
	}
}

// againAfterRestart runs fn, and once more, when the engine is back, where it
// failed while run.sh's watchdog restarted a deadlocked engine (its lines in
// engine-restarts: "restarting", then "restarted" or "failed").
func againAfterRestart(t *testing.T, fn func() error) error {
	t.Helper()
	restarts := func() []string {
		b, _ := os.ReadFile(filepath.Join(os.Getenv("UDS_LAB_E2E_LOCKS"), "engine-restarts"))
		return strings.Fields(string(b))
	}
	before := len(restarts())
	err := fn()
	if err == nil || len(restarts()) == before {
		return err
	}
	t.Logf("the engine was restarted while this ran (%v): once more when it is back", err)
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if r := restarts(); r[len(r)-1] != "restarting" {
			break
		}
	}
	return fn()
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = lab.Root(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func get(t *testing.T, u string) string {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func waitFor(t *testing.T, what string, limit time.Duration, try func() error) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		err := try()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %v", what, limit, err)
		}
		time.Sleep(2 * time.Second)
	}
}

// assertNothingLeft checks that the project left no containers, networks or volumes.
func assertNothingLeft(t *testing.T, project string) {
	t.Helper()
	filter := "label=com.docker.compose.project=" + project
	for _, kind := range []string{"container", "network", "volume"} {
		args := []string{kind, "ls", "-q", "--filter", filter}
		if kind == "container" {
			args = []string{"ps", "-aq", "--filter", filter}
		}
		if out := strings.TrimSpace(run(t, "docker", args...)); out != "" {
			t.Errorf("%ss of %s left behind: %s", kind, project, out)
		}
	}
}

// heavy keeps apart what loads the machine's two cores flat out or times a
// recovery against them: TestLab's sweep, max, kill, overload and envelope,
// TestKubernetes's node, which otherwise run side by side (t.Parallel), so
// that the node's minutes overlap the Compose scenarios that only wait on
// their loads, and TestOverloadAndStop's bursts in the apps lab's process
// (the file lock "heavy" under UDS_LAB_E2E_LOCKS keeps the processes apart).
var heavy sync.Mutex

// alone holds heavy, in this process and across the labs' processes, until
// the test ends.
func alone(t *testing.T) {
	t.Helper()
	heavy.Lock()
	release := lockFile(t, "heavy")
	t.Cleanup(func() { release(); heavy.Unlock() })
}

// down stops the lab's leftovers from an interrupted run and deletes their
// volumes, as make clean does, but keeps the images: make clean, asserted
// once at TestLab's end, would delete them (and the build cache with them)
// while another test uses them.
func down(t *testing.T) {
	t.Helper()
	var out []byte
	err := againAfterRestart(t, func() (err error) {
		cmd := exec.Command("docker", "compose", "--profile", "load", "--profile", "report", "--profile", "floor",
			"--profile", "notrack", "down", "--remove-orphans", "--volumes")
		cmd.Dir = lab.Root(t)
		out, err = cmd.CombinedOutput()
		return err
	})
	if err != nil {
		t.Fatalf("docker compose down: %v\n%s", err, out)
	}
}
