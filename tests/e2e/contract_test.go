package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
)

// The reference app, built here from contract/minimal-app as a user would
// build their own image.
const minimalImage = "uds-lab-e2e/minimal-app:local"

// The label of its Dockerfile's build stage, which the classic builder leaves
// behind as an untagged image (kept between runs, as the image is: the next
// build is the builder's cache; `docker image prune -f --filter
// label=uds-lab.stage=minimal-app-build` removes it).
const minimalStage = "uds-lab.stage=minimal-app-build"

// An app that keeps the contract and falls into every socket pitfall on
// purpose (contract/pitfall-app): a backlog of 1, the proxy header dropped
// over the socket, one worker of three taking every connection.
const pitfallImage = "uds-lab-e2e/pitfall-app:local"

type contractResult struct {
	Image   string `json:"image"`
	OK      bool   `json:"ok"`
	Clauses []struct {
		Clause   string   `json:"clause"`
		Required bool     `json:"required"`
		Pass     bool     `json:"pass"`
		Why      string   `json:"why"`
		Panels   []string `json:"panels"`
		Workload string   `json:"workload"`
		Pitfall  bool     `json:"pitfall"`
		Status   string   `json:"status"`
		Fix      string   `json:"fix"`
		Levels   []struct {
			Listener    string  `json:"listener"`
			Concurrency int     `json:"concurrency"`
			Sent        int     `json:"sent"`
			OK          int     `json:"ok"`
			Refused     int     `json:"refused"`
			P99Ms       float64 `json:"p99_ms"`
		} `json:"levels"`
	} `json:"clauses"`
}

// The socket pitfalls' rows (contract/checker/pitfalls.go). The envelopes'
// names end with the somaxconn they ran at: the app's own (the namespace's
// default here, APP_SOMAXCONN being empty), then 16.
var pitfallRows = []string{"listen backlog of each listener", "client address: the same over both listeners",
	"workers: accepted connections spread over the app's processes", envelope,
	"keep-alive: the app's idle timeout against nginx's upstream keepalive_timeout",
	"CLOSE_WAIT: kept connections the app leaves open after nginx closes them"}

const (
	envelope    = "failure envelope: bursts of new connections on each listener"
	lowEnvelope = envelope + " (net.core.somaxconn 16)"
)

// pitfalls: the rows of a contract run by name (the app's own envelope under
// envelope), each one there once.
func pitfalls(t *testing.T, r contractResult) map[string]int {
	t.Helper()
	rows := map[string]int{}
	for i, c := range r.Clauses {
		if !c.Pitfall {
			continue
		}
		name := c.Clause
		if strings.HasPrefix(name, envelope+" (") && name != lowEnvelope {
			name = envelope
		}
		if _, twice := rows[name]; twice {
			t.Errorf("%s: pitfall row %q twice", r.Image, name)
		}
		rows[name] = i
	}
	for _, name := range append(pitfallRows, lowEnvelope) {
		if _, ok := rows[name]; !ok {
			t.Errorf("%s: no pitfall row %q (got %v)", r.Image, name, rows)
		}
	}
	return rows
}

// contract runs `make contract` with the settings given (APP_IMAGE=...; none:
// the lab's app) and reads its JSON.
func contract(t *testing.T, settings ...string) contractResult {
	t.Helper()
	// Its JSON in a temporary folder, not the checkout's results/.
	out := filepath.Join(t.TempDir(), "contract.json")
	mk(t, append([]string{"contract", "CONTRACT_OUT=" + out}, settings...)...)
	var r contractResult
	if err := json.Unmarshal([]byte(mustRead(t, out)), &r); err != nil {
		t.Fatal(err)
	}
	if !r.OK {
		t.Errorf("%s: contract not kept", r.Image)
	}
	names := map[string]bool{}
	for _, c := range r.Clauses {
		names[c.Clause] = true
		if c.Required && !c.Pass {
			t.Errorf("%s: %s: %s", r.Image, c.Clause, c.Why)
		}
	}
	for _, want := range []string{"image HEALTHCHECK turns healthy", "socket: refused to other users",
		"restart over a stale socket", "SIGTERM: requests in flight answered, socket removed", "route /ping"} {
		if !names[want] {
			t.Errorf("%s: no clause %q", r.Image, want)
		}
	}
	return r
}

func checkContracts(t *testing.T) {
	own := contract(t)
	for _, c := range own.Clauses {
		if !c.Pass {
			t.Errorf("the lab's app fails %s: %s", c.Clause, c.Why)
		}
	}
	// Every pitfall row passes on the lab's app but the idle timeout's, which
	// outlasts e2e's short wait (CONTRACT_IDLE_WAIT, tests/e2e/run.sh): info;
	// at somaxconn 16 its socket refuses a burst (nginx's 502) where TCP
	// queues every connection.
	rows := pitfalls(t, own)
	for _, name := range pitfallRows {
		c, want := own.Clauses[rows[name]], "pass"
		if name == pitfallRows[4] {
			want = "info"
			if !strings.Contains(c.Why, "unix: still open after") {
				t.Errorf("the lab's app: %s: %s, want its connections still open at the wait's end", name, c.Why)
			}
		}
		if c.Status != want {
			t.Errorf("the lab's app: %s: %s %s, want %s", name, c.Status, c.Why, want)
		}
	}
	low := own.Clauses[rows[lowEnvelope]]
	refusedSocket := false
	for _, lv := range low.Levels {
		if lv.Listener == "unix" && lv.Refused > 0 {
			refusedSocket = true
		}
		if lv.Listener == "tcp" && (lv.Refused > 0 || lv.OK == 0) {
			t.Errorf("the lab's app at somaxconn 16: TCP at %d in flight refused %d and answered %d of %d, want it to queue every one",
				lv.Concurrency, lv.Refused, lv.OK, lv.Sent)
		}
	}
	if !refusedSocket || low.Status != "info" || !strings.Contains(low.Why, "The socket refused from") {
		t.Errorf("the lab's app at somaxconn 16: the socket never refused: %s %s", low.Status, low.Why)
	}

	// Each pitfall row fails, with its fix, on an app that falls into it.
	step(t, "build "+pitfallImage, func() {
		run(t, "docker", "build", "-q", "--build-arg", "GO_IMAGE="+os.Getenv("GO_IMAGE"), "-t", pitfallImage, "contract/pitfall-app")
	})
	pit := contract(t, "APP_IMAGE="+pitfallImage)
	rows = pitfalls(t, pit)
	for name, want := range map[string]string{
		pitfallRows[0]: "unix /sock/app.sock 1", pitfallRows[1]: `unix ""`,
		pitfallRows[2]: "24, 0, 0", pitfallRows[3]: "The socket refused from 4 in flight",
		// Told to close idle connections after 1 s, and never to close its side.
		pitfallRows[4]: "unix: closed by the app after 1.",
		pitfallRows[5]: "still held 16 on tcp in CLOSE_WAIT and 16 on unix",
	} {
		if c := pit.Clauses[rows[name]]; c.Status != "WARN" || c.Pass || c.Fix == "" || !strings.Contains(c.Why, want) {
			t.Errorf("pitfall app: %s: %s %q (fix %q), want WARN with %q and a fix", name, c.Status, c.Why, c.Fix, want)
		}
	}

	step(t, "build "+minimalImage, func() {
		run(t, "docker", "build", "-q", "--build-arg", "GO_IMAGE="+os.Getenv("GO_IMAGE"), "-t", minimalImage, "contract/minimal-app")
	})
	min := contract(t, "APP_IMAGE="+minimalImage)
	// It leaves out routes and metrics on purpose: the table must say so.
	optional := map[string]contractFailure{}
	for _, c := range min.Clauses {
		if !c.Pass {
			optional[c.Clause] = contractFailure{c.Workload, c.Panels}
		}
	}
	if f := optional["route /cpu/"+lab.Env(t)["CPU_ITERATIONS"]]; f.workload != "cpu" {
		t.Errorf("minimal app: no failed cpu route naming its workload: %v", optional)
	}
	if f := optional["metric app_connections_accepted_total"]; len(f.panels) == 0 {
		t.Errorf("minimal app: no failed connections metric naming its panels: %v", optional)
	}
}

type contractFailure struct {
	workload string
	panels   []string
}

// swapApp runs the lab on another app image: nginx restarts with it (its
// upstream address is resolved at start), and make load works through it.
func swapApp(t *testing.T, prom, nginx, image, testid string) {
	nginxBefore := inspectService(t, "nginx")
	step(t, "make up APP_IMAGE="+image, func() { mk(t, "up", "APP_IMAGE="+image) })
	if got := strings.TrimSpace(run(t, "docker", "inspect", "-f", "{{.Config.Image}}", inspectService(t, "app").ID)); got != image {
		t.Fatalf("app runs %s, want %s", got, image)
	}
	if inspectService(t, "nginx").StartedAt == nginxBefore.StartedAt {
		t.Errorf("nginx was not restarted with the new app: it would keep the old app's address")
	}
	before := appCounters(t, prom).requests
	// Every path in one stream (ROUNDS=0): each one's requests counted below.
	step(t, "make load on "+image, func() {
		mk(t, "load", "TESTID="+testid, "SCENARIO=ping", "PATHS="+allPaths(),
			"RATE=50", "INTERLEAVE=10", "ROUNDS=0", "IDLE=0")
	})
	// The generator's series are stale once it has exited: their last values (see scrapedTotal).
	waitFor(t, "openloop's and the app's counts", 60*time.Second, func() error {
		ok := vector(t, prom, fmt.Sprintf(`sum by (path) (last_over_time(openloop_requests_total{job="openloop", testid=%q, status=~"[23].."}[1h]))`, testid), "path")
		after := appCounters(t, prom).requests
		for _, l := range []string{"tcp", "unix"} {
			var sent float64
			for _, p := range paths {
				if p.listener == l {
					if ok[p.path] == 0 {
						return fmt.Errorf("/%s/: no successful openloop requests", p.path)
					}
					sent += ok[p.path]
				}
			}
			if got := after[l] - before[l]; got != sent {
				return fmt.Errorf("%s: listener %s counted %v /ping, openloop got %v answers", image, l, got, sent)
			}
		}
		return nil
	})
	if failed := vector(t, prom, fmt.Sprintf(`sum(last_over_time(openloop_requests_total{job="openloop", testid=%q, status!~"[23].."}[1h]))`, testid), "")[""]; failed != 0 {
		t.Errorf("%s: %v openloop requests failed", image, failed)
	}
}
