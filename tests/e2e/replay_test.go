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

// The mixed run logged: 40 rounds of 5 GETs and a POST, 0.25 s apart (about
// 11 s: the 10 blocks of 1 s an answer needs), with the secrets planted.
const (
	replayRounds = 40
	replayGets   = 5
	replayMixed  = `nginx -c /out/nginx.conf && for i in $(seq 1 40); do
  for r in ping bytes/100 bytes/16384 sleep/3 "bytes/102400?token=SECRETQUERY$i"; do
    curl -s -o /dev/null -u SECRETUSER:pw -A SECRETAGENT -e https://SECRETREF.example/ -b session=SECRETCOOKIE "http://127.0.0.1:8099/$r"
  done
  curl -s -o /dev/null -X POST -A SECRETAGENT http://127.0.0.1:8099/ping; sleep 0.25
done; nginx -c /out/nginx.conf -s quit`
)

var replaySecrets = []string{"SECRETQUERY", "SECRETUSER", "SECRETAGENT", "SECRETREF", "SECRETCOOKIE"}

func replayRun(t *testing.T, prom, testid string) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(replayNginx), 0o644); err != nil {
		t.Fatal(err)
	}
	before := appRoutes(t, prom)
	step(t, "a mixed run through nginx, logged", func() {
		run(t, "docker", "run", "--rm", "--network", os.Getenv("COMPOSE_PROJECT_NAME")+"_default",
			"-v", dir+":/out", os.Getenv("NGINX_IMAGE"), "sh", "-c", replayMixed)
	})
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
		Phases []struct {
			Round  int `json:"round"`
			ByPath map[string]struct {
				Requests   float64 `json:"requests"`
				FailedRate float64 `json:"failed_rate"`
			} `json:"by_path"`
		} `json:"phases"`
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
