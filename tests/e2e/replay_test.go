package e2e

// make load TRAFFIC=: an access log written by nginx (the lab's nginx image,
// logging in JSON and in the default combined format while it proxies a
// mixed run to the lab's app), replayed through the paths: emulated on the
// lab's app, then as logged. Every path gets each logged GET once, the POSTs
// none; the app answers every one; the secrets planted in the log's client
// fields and query strings reach neither the run's files nor Prometheus.

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
)

// replayNginx: nginx's default combined log and a JSON one (nginx's msec,
// request, request and upstream times), both full of client fields.
const replayNginx = `worker_processes 1;
pid /tmp/nginx.pid;
events {}
http {
  log_format replay escape=json '{"msec":"$msec","remote_addr":"$remote_addr","remote_user":"$remote_user",'
    '"request":"$request","status":"$status","body_bytes_sent":"$body_bytes_sent","request_time":"$request_time",'
    '"upstream_response_time":"$upstream_response_time","http_referer":"$http_referer",'
    '"http_user_agent":"$http_user_agent","http_cookie":"$http_cookie"}';
  client_body_temp_path /tmp/cb; proxy_temp_path /tmp/pt; fastcgi_temp_path /tmp/ft; uwsgi_temp_path /tmp/ut; scgi_temp_path /tmp/st;
  server {
    listen 8099;
    access_log /out/access.jsonl replay;
    access_log /out/access.log combined;
    location / { proxy_pass http://app:8080; }
  }
}
`

// The mixed run logged: 40 rounds of 5 GETs and a POST, with the secrets
// planted; its rounds PAUSE s apart (replayLog's pause).
const (
	replayRounds = 40
	replayGets   = 5
	replayMixed  = `nginx -c /out/nginx.conf && for i in $(seq 1 40); do
  for r in ping bytes/100 bytes/16384 sleep/3 "bytes/102400?token=SECRETQUERY$i"; do
    curl -s -m 10 -o /dev/null -u SECRETUSER:pw -A SECRETAGENT -e https://SECRETREF.example/ -b session=SECRETCOOKIE "http://127.0.0.1:8099/$r"
  done
  curl -s -m 10 -o /dev/null -X POST -A SECRETAGENT http://127.0.0.1:8099/ping; sleep PAUSE
done; nginx -c /out/nginx.conf -s quit`
)

// replayRate: the minimal app's replay's rate (TRAFFIC_SPEED=rate), 200
// requests x 6 paths in 10.9 s a stream: 11 blocks of 1 s.
const replayRate = "110"

var replaySecrets = []string{"SECRETQUERY", "SECRETUSER", "SECRETAGENT", "SECRETREF", "SECRETCOOKIE"}

// replayLog runs the mixed run, its rounds pause apart, through an nginx of
// the lab's image in front of the lab's app (app:8080), and returns the
// folder of its two logs.
func replayLog(t *testing.T, pause string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(replayNginx), 0o644); err != nil {
		t.Fatal(err)
	}
	step(t, "a mixed run through nginx, logged", func() {
		run(t, "timeout", "120", "docker", "run", "--rm", "--network", os.Getenv("COMPOSE_PROJECT_NAME")+"_default",
			"-v", dir+":/out", os.Getenv("NGINX_IMAGE"), "sh", "-c", strings.Replace(replayMixed, "PAUSE", pause, 1))
	})
	return dir
}

func replayRun(t *testing.T, prom, testid string) {
	before := appRoutes(t, prom)
	// Replayed at the log's own times: 0.25 s apart, about 11 s, the 10
	// blocks of 1 s an answer needs.
	dir := replayLog(t, "0.25")
	// The logged routes' 200s, as the app counts them: the mixed run's, then each replay's.
	logged := map[string]float64{"/ping": replayRounds, "/sleep/:ms": replayRounds, "/bytes/:n": 3 * replayRounds}
	before = appCounted(t, prom, before, logged, 1)

	emulated, asLogged := testid+"-emulated", testid+"-logged"
	step(t, "make load TRAFFIC= (JSON, emulated)", func() {
		mk(t, "load", "TESTID="+emulated, "TRAFFIC="+filepath.Join(dir, "access.jsonl"), "WARMUP=0", "IDLE=0",
			"PATHS=tcp-lo,uds-lo,tcp-lo-ka,uds-lo-ka")
	})
	checkReplayed(t, emulated, "emulate", 4)
	before = appCounted(t, prom, before, map[string]float64{"/replay/:bytes/:us": replayRounds * replayGets}, 4)
	step(t, "make report", func() { mk(t, "report", "RUN="+emulated) })
	if md := mustRead(t, lab.Path(t, "results", emulated, "report.md")); !strings.Contains(md, "## The answer") ||
		!strings.Contains(md, "**`traffic`**") {
		t.Errorf("the replay's report has no answer for its traffic:\n%s", lastLines(md, 40))
	}
	step(t, "make load TRAFFIC= (combined, as logged)", func() {
		mk(t, "load", "TESTID="+asLogged, "TRAFFIC="+filepath.Join(dir, "access.log"), "TRAFFIC_SEND=logged",
			"WARMUP=0", "IDLE=0", "PATHS=tcp,uds")
	})
	checkReplayed(t, asLogged, "logged", 2)
	appCounted(t, prom, before, logged, 2)
	noSecrets(t, prom, emulated, asLogged)
}

// replayMinimal: the log replayed as logged on the minimal app
// (contract/minimal-app, the net/http example users copy), through every
// path. TestApps's swap runs the lab on its forged build (forgedImage: the
// minimal app's code with other sources' series on /metrics, which
// Prometheus drops), so the log is written and replayed with the minimal
// app's routes behind nginx: its GETs answered, its POSTs 404 (no POST
// route), skipped. The app counts each path's requests on the path's
// listener by route, nginx's log each path's; the report gives the
// traffic's answer and its route table, with the log's counts.
//
// The log is written without pauses (a few seconds) and replayed at RATE in
// its order (TRAFFIC_SPEED=rate): each stream lasts its 200 requests times
// the 6 paths of the longer stream over replayRate, whatever the log's own
// times, above the 10 blocks of 1 s an answer needs.
func replayMinimal(t *testing.T, prom, testid string) {
	if got := strings.TrimSpace(run(t, "docker", "inspect", "-f", "{{.Config.Image}}", inspectService(t, "app").ID)); got != forgedImage {
		t.Fatalf("app runs %s, want the minimal app (%s)", got, forgedImage)
	}
	before := minimalRoutes(t, prom)
	dir := replayLog(t, "0")
	// The minimal app's routes (its mux's patterns) and the log's 200s of each.
	logged := map[string]float64{"/ping": replayRounds, "/sleep/{ms}": replayRounds, "/bytes/{n}": 3 * replayRounds}
	// The mixed run's, on the app's TCP listener (nginx's proxy_pass http://app:8080).
	byListener := map[string]float64{"tcp": 1}
	before = minimalCounted(t, prom, before, logged, byListener)
	nginxBefore := nginxLogged(t, prom)
	step(t, "make load TRAFFIC= (JSON, as logged) on the minimal app, every path", func() {
		mk(t, "load", "TESTID="+testid, "TRAFFIC="+filepath.Join(dir, "access.jsonl"), "TRAFFIC_SEND=logged",
			"TRAFFIC_SPEED=rate", "RATE="+replayRate, "WARMUP=0", "IDLE=0", "PATHS="+allPaths())
	})
	checkReplayed(t, testid, "logged", len(paths))
	byListener = map[string]float64{}
	for _, p := range paths {
		byListener[p.listener]++
	}
	minimalCounted(t, prom, before, logged, byListener)
	waitFor(t, "nginx's log's count of each path", time.Minute, func() error {
		now := nginxLogged(t, prom)
		for _, p := range paths {
			if got := now[p.path] - nginxBefore[p.path]; got != replayRounds*replayGets {
				return fmt.Errorf("/%s/: nginx logged %v answers with 200, want the log's %d GETs", p.path, got, replayRounds*replayGets)
			}
		}
		return nil
	})
	step(t, "make report", func() { mk(t, "report", "RUN="+testid) })
	// The log's sleep/3: the minimal app answers after 3 ms, so that route's median is 3 ms or more on every path.
	checkTrafficReport(t, testid, map[string]int{"/bytes/{id}": 3 * replayRounds, "/ping": replayRounds, "/sleep/{id}": replayRounds},
		map[string]float64{"/sleep/{id}": 3})
	noSecrets(t, prom, testid)
}

// minimalRoutes: the minimal app's 200s by "listener/route".
func minimalRoutes(t *testing.T, prom string) map[string]float64 {
	t.Helper()
	return vectorBy(t, prom, `sum by (listener, route) (app_http_requests_total{job="app", code="200"})`, "listener", "route")
}

// minimalCounted: once the minimal app's 200s by listener and route have
// grown from before by each route's count of the log times the listener's
// paths (byListener), the counts.
func minimalCounted(t *testing.T, prom string, before, logged, byListener map[string]float64) map[string]float64 {
	t.Helper()
	var now map[string]float64
	waitFor(t, "the minimal app's counts by listener and route", time.Minute, func() error {
		now = minimalRoutes(t, prom)
		for l, n := range byListener {
			for route, w := range logged {
				if got := now[l+"/"+route] - before[l+"/"+route]; got != w*n {
					return fmt.Errorf("listener %s, route %s: the minimal app answered %v requests with 200, want %v", l, route, got, w*n)
				}
			}
		}
		return nil
	})
	return now
}

// nginxLogged: nginx's 200s by path (its access log, through nginx-log-exporter).
func nginxLogged(t *testing.T, prom string) map[string]float64 {
	return vector(t, prom, `sum by (path) (nginx_location_requests_total{job="nginx-log", status="200"})`, "path")
}

// checkTrafficReport: the report of a replay sent as logged names the POSTs
// it skipped, gives the traffic's answer (a verdict for each of its
// comparisons) and its route table: each route's logged count and its median
// on every path, at least minMs where given.
func checkTrafficReport(t *testing.T, testid string, routes map[string]int, minMs map[string]float64) {
	t.Helper()
	var rep struct {
		Workloads map[string]struct {
			AnswerParts struct {
				Rows []struct{ Verdict string } `json:"rows"`
			} `json:"answer_parts"`
			Traffic *struct {
				Replay struct {
					Send    string         `json:"send"`
					Cycles  int            `json:"cycles"`
					Skipped map[string]int `json:"skipped"`
				} `json:"replay"`
				Comparisons []struct {
					Key string
					P50 struct{ Verdict, Cell string } `json:"p50"`
				} `json:"comparisons"`
				Routes []struct {
					Route    string
					Requests int
					MedianMs map[string]*float64 `json:"median_ms"`
				} `json:"routes"`
			} `json:"traffic"`
		} `json:"workloads"`
	}
	if err := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", testid, "report.json"))), &rep); err != nil {
		t.Fatal(err)
	}
	md := mustRead(t, lab.Path(t, "results", testid, "report.md"))
	wl, ok := rep.Workloads["traffic"]
	if !ok || wl.Traffic == nil {
		t.Fatalf("%s: report.json has no traffic section:\n%s", testid, lastLines(md, 40))
	}
	tr := wl.Traffic
	if tr.Replay.Send != "logged" || tr.Replay.Cycles != replayRounds*replayGets || len(tr.Replay.Skipped) != 1 ||
		tr.Replay.Skipped["POST"] != replayRounds {
		t.Errorf("%s: the report's replay %+v, want logged, %d GETs, POST %d skipped", testid, tr.Replay,
			replayRounds*replayGets, replayRounds)
	}
	for _, want := range []string{"## The answer", "**`traffic`**", "## Your traffic", "sent to your app as logged",
		fmt.Sprintf("not replayed: POST %d", replayRounds)} {
		if !strings.Contains(md, want) {
			t.Errorf("%s: report.md has no %q:\n%s", testid, want, lastLines(md, 40))
		}
	}
	judged := 0
	for _, r := range wl.AnswerParts.Rows {
		if r.Verdict != "none" {
			judged++
		}
	}
	if judged == 0 {
		t.Errorf("%s: the answer judged none of its %d comparisons", testid, len(wl.AnswerParts.Rows))
	}
	if len(tr.Comparisons) == 0 {
		t.Errorf("%s: the traffic's section compares no pair", testid)
	}
	for _, c := range tr.Comparisons {
		if v := c.P50.Verdict; v != "differs" && v != "same" && v != "unsure" {
			t.Errorf("%s: the traffic's median, %s: %s (%s), want a verdict", testid, c.Key, v, c.P50.Cell)
		}
	}
	got := map[string]int{}
	for _, r := range tr.Routes {
		got[r.Route] = r.Requests
		for _, p := range paths {
			if m := r.MedianMs[p.path]; m == nil || *m <= 0 || *m < minMs[r.Route] {
				t.Errorf("%s: route %s: median %s on %s, want %g ms or more", testid, r.Route, ms(m), p.path, minMs[r.Route])
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(routes) {
		t.Errorf("%s: the route table's logged requests %v, want %v", testid, got, routes)
	}
	if _, section, ok := strings.Cut(md, "## Your traffic"); ok {
		section, _, _ = strings.Cut(section, "\n## ")
		t.Logf("%s: report.md's Your traffic:%s", testid, section)
	}
}

// ms: a median in words ("none" where there is none).
func ms(m *float64) string {
	if m == nil {
		return "none"
	}
	return fmt.Sprintf("%.3f ms", *m)
}

// appCounted: once the app's 200s by route have grown from before by want
// times n (each route's count of the log, n paths), the counts.
func appCounted(t *testing.T, prom string, before, want map[string]float64, n float64) map[string]float64 {
	t.Helper()
	var now map[string]float64
	waitFor(t, "the app's counts by route", time.Minute, func() error {
		now = appRoutes(t, prom)
		for route, w := range want {
			if got := now[route] - before[route]; got != w*n {
				return fmt.Errorf("route %s: the app answered %v requests with 200, want %v", route, got, w*n)
			}
		}
		return nil
	})
	return now
}

// checkReplayed: load.json's replay sent each logged GET once to each of its
// n paths, none failed, the POSTs counted and never sent.
func checkReplayed(t *testing.T, testid, send string, n int) {
	t.Helper()
	var l struct {
		Settings struct {
			Traffic struct {
				Send    string         `json:"send"`
				Cycles  int            `json:"cycles"`
				Skipped map[string]int `json:"skipped"`
				Routes  []string       `json:"routes"`
			} `json:"traffic"`
		} `json:"settings"`
		Phases pathPhases `json:"phases"`
	}
	if err := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", testid, "load.json"))), &l); err != nil {
		t.Fatal(err)
	}
	tr := l.Settings.Traffic
	if tr.Send != send || tr.Cycles != replayRounds*replayGets || tr.Skipped["POST"] != replayRounds {
		t.Errorf("%s: the plan's replay: %+v, want %s, %d GETs, %d POSTs skipped", testid, tr, send,
			replayRounds*replayGets, replayRounds)
	}
	if strings.Join(tr.Routes, " ") != "/bytes/{id} /ping /sleep/{id}" {
		t.Errorf("%s: routes %q, want /bytes/{id} (3 of 5 GETs), /ping, /sleep/{id}", testid, tr.Routes)
	}
	paths := 0
	for _, p := range l.Phases {
		for path, v := range p.ByPath {
			paths++
			if v.Requests != replayRounds*replayGets || v.FailedRate != 0 {
				t.Errorf("%s: %s sent %v requests (%.2f%% failed), want each logged GET once, none failed", testid,
					path, v.Requests, 100*v.FailedRate)
			}
		}
	}
	if paths != n {
		t.Errorf("%s: %d paths replayed, want %d", testid, paths, n)
	}
	if _, err := os.Stat(lab.Path(t, "results", testid, "replay.tsv")); err == nil {
		t.Errorf("%s: the replay's schedule is left in results/", testid)
	}
}

// appRoutes: the app's 200s by route.
func appRoutes(t *testing.T, prom string) map[string]float64 {
	return vector(t, prom, `sum by (route) (app_http_requests_total{job="app", code="200"})`, "route")
}

// noSecrets: no planted secret in any file of the runs, nor in any label
// value Prometheus holds.
func noSecrets(t *testing.T, prom string, runs ...string) {
	t.Helper()
	for _, r := range runs {
		filepath.WalkDir(lab.Path(t, "results", r), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b := mustRead(t, p)
			for _, s := range replaySecrets {
				if strings.Contains(b, s) {
					t.Errorf("%s holds the log's %s", p, s)
				}
			}
			return nil
		})
	}
	for _, l := range promList(t, prom, "labels") {
		for _, v := range promList(t, prom, "label/"+url.PathEscape(l)+"/values") {
			for _, s := range replaySecrets {
				if strings.Contains(v, s) {
					t.Errorf("Prometheus's label %s holds %q", l, v)
				}
			}
		}
	}
}

// promList: a Prometheus API endpoint's list of strings.
func promList(t *testing.T, prom, endpoint string) []string {
	t.Helper()
	resp, err := lab.PrometheusGet(t, prom+"/api/v1/"+endpoint)
	if err != nil {
		t.Fatalf("GET /api/v1/%s: %v", endpoint, err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string   `json:"status"`
		Data   []string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("GET /api/v1/%s: %v (status %q)", endpoint, err, r.Status)
	}
	return r.Data
}

// pathPhases: load.json's phases as a replay's checks read them, each
// path's requests and failed share.
type pathPhases []struct {
	Round  int `json:"round"`
	ByPath map[string]struct {
		Requests   float64 `json:"requests"`
		FailedRate float64 `json:"failed_rate"`
	} `json:"by_path"`
}
