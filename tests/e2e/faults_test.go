package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
)

// background starts `make load` with args and returns a wait function that
// gives its output and whether it ended within limit (a hang is a failure).
func background(t *testing.T, limit time.Duration, args ...string) func() (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	cmd := exec.CommandContext(ctx, "make", append([]string{"load"}, args...)...)
	cmd.Dir = lab.Root(t)
	var out lockedBuilder
	cmd.Stdout, cmd.Stderr = &out, &out
	// Stopped as a group: make, lab_run.py and the compose client it runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	// A test that stops before waiting for it (t.Fatal) stops it too, rather
	// than leave it loading the next scenario's lab, and shows what it said.
	t.Cleanup(func() {
		if ctx.Err() == nil && cmd.ProcessState == nil {
			cancel()
			_ = cmd.Wait()
			t.Logf("make load %v, stopped with the test; it said:\n%s", args, out.String())
		}
	})
	return func() (string, error) {
		defer cancel()
		err := cmd.Wait()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("make load %v still running after %s: killed\n%s", args, limit, out.String())
		}
		return out.String(), err
	}
}

// lockedBuilder is a strings.Builder that a command's output and the test
// may use at once.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// container is what docker knows of a service's container.
type container struct {
	ID, StartedAt string
	Restarts      int
	OOMKilled     bool
	Health        string
}

func inspectService(t *testing.T, service string) container {
	t.Helper()
	id := strings.TrimSpace(run(t, "docker", "compose", "ps", "-q", service))
	f := strings.Fields(run(t, "docker", "inspect", "-f",
		"{{.Id}} {{.State.StartedAt}} {{.RestartCount}} {{.State.OOMKilled}} {{if .State.Health}}{{.State.Health.Status}}{{end}}", id))
	c := container{ID: f[0], StartedAt: f[1], OOMKilled: f[3] == "true"}
	c.Restarts, _ = strconv.Atoi(f[2])
	if len(f) > 4 {
		c.Health = f[4]
	}
	return c
}

// phases reads the generator's per-phase statistics from results/<testid>/load.json
// (openloop's dropped_iterations: requests due but not sent).
func phases(t *testing.T, testid string) (requests, failed, dropped float64) {
	t.Helper()
	var l struct {
		Phases []struct {
			Requests   float64 `json:"requests"`
			FailedRate float64 `json:"failed_rate"`
			Dropped    float64 `json:"dropped_iterations"`
		} `json:"phases"`
	}
	if err := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", testid, "load.json"))), &l); err != nil {
		t.Fatalf("results/%s/load.json: %v", testid, err)
	}
	for _, p := range l.Phases {
		requests += p.Requests
		failed += p.Requests * p.FailedRate
		dropped += p.Dropped
	}
	return requests, failed, dropped
}

// until polls ok every 100 ms and returns how long it took to hold.
func until(t *testing.T, what string, limit time.Duration, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

func status(u string) int {
	resp, err := http.Get(u)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// restartUnderLoad restarts nginx, then Prometheus, during a fixed-rate load:
// the app keeps running and serves every request nginx passes on, and
// Prometheus keeps what it stored before its restart.
func restartUnderLoad(t *testing.T, prom, nginx, testid string) {
	app := inspectService(t, "app")
	// The count starts from a scrape taken now: requests of the scenario
	// before (its probes of /ping) are in it, not in this one's.
	scrapedAfter(t, prom, "app", time.Now())
	before := appCounters(t, prom).requests
	// The stream alone (ROUNDS=0), long enough to span both restarts.
	wait := background(t, 3*time.Minute, "TESTID="+testid, "SCENARIO=ping", "PATHS=tcp,uds",
		"RATE=50", "INTERLEAVE=30", "ROUNDS=0", "IDLE=0")
	waitForLoad(t, prom, testid)
	marked := time.Now()

	// Each outage counts from the restart command to serving again.
	restart := func(service string, limit time.Duration, ok func() bool) time.Duration {
		start := time.Now()
		run(t, "docker", "compose", "restart", service)
		until(t, service+" serving after its restart", limit, ok)
		return time.Since(start)
	}
	// The probe asks /healthz, not /ping: the app's /ping count is the generator's alone.
	nginxBack := restart("nginx", 30*time.Second, func() bool {
		return status(nginx+"/tcp/healthz") == 200 && status(nginx+"/uds/healthz") == 200
	})
	promBack := restart("prometheus", 60*time.Second, func() bool {
		resp, err := lab.PrometheusGet(t, prom+"/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	_, _ = wait() // more than 1% failed while nginx was down: openloop exits 1, as it should

	requests, failed, _ := phases(t, testid)
	var counted float64
	waitFor(t, "the app's counters after the load", 30*time.Second, func() error {
		after := appCounters(t, prom).requests
		counted = after["tcp"] + after["unix"] - before["tcp"] - before["unix"]
		if served := requests - failed; counted < served {
			return fmt.Errorf("app counted %v /ping since the load began, openloop got %v answers", counted, served)
		}
		return nil
	})
	t.Logf("docker compose restart under 50 req/s: nginx serving again %.2f s after the command, Prometheus ready %.2f s after; "+
		"openloop: %.0f of %.0f requests failed; the app counted %.0f", nginxBack.Seconds(), promBack.Seconds(), failed, requests, counted)
	// A request openloop saw fail may still have reached the app (its answer
	// lost while nginx stopped), so the app counts at most what openloop sent.
	if counted > requests {
		t.Errorf("app counted %v requests, openloop sent only %v", counted, requests)
	}
	now := inspectService(t, "app")
	if now.StartedAt != app.StartedAt || now.Restarts != app.Restarts || now.Health != "healthy" {
		t.Errorf("the app was touched: before %+v, after %+v", app, now)
	}
	if v := vector(t, prom, `sum(app_http_requests_total{job="app", code=~"5.."})`, "")[""]; v != 0 {
		t.Errorf("the app answered %v requests with 5xx", v)
	}
	// What Prometheus stored before its restart is still there (its volume).
	if n := len(promAPI(t, prom, "query", url.Values{
		"query": {`up{job="app"}`}, "time": {fmt.Sprint(marked.Unix())},
	})); n != 1 {
		t.Errorf("up{job=\"app\"} at %s (before the restart): %d series, want 1", marked.Format(time.TimeOnly), n)
	}
}

// peakMemory reads the highest memory use of a container's cgroup (v2:
// memory.peak; v1: memory.max_usage_in_bytes), after reset if asked.
func peakMemory(t *testing.T, id string, reset bool) (int64, string) {
	t.Helper()
	for _, f := range []string{
		"/sys/fs/cgroup/system.slice/docker-" + id + ".scope/memory.peak",
		"/sys/fs/cgroup/docker/" + id + "/memory.peak",
		"/sys/fs/cgroup/memory/docker/" + id + "/memory.max_usage_in_bytes",
		"/sys/fs/cgroup/memory/system.slice/docker-" + id + ".scope/memory.max_usage_in_bytes",
	} {
		if reset {
			_ = os.WriteFile(f, []byte("0"), 0) // resettable on cgroup v1 and on v2 from Linux 6.12
		}
		b, err := os.ReadFile(f)
		if err == nil {
			v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			if err == nil {
				return v, filepath.Base(f)
			}
		}
	}
	t.Fatalf("no memory.peak or memory.max_usage_in_bytes for container %s", id)
	return 0, ""
}

// overload drives 10 times .env's RATE for a bounded time: nothing crashes or
// hangs, memory stays under each limit, and every failure the generator sees
// is a 5xx or no response at all (noResponse), never another answer.
func overload(t *testing.T, prom, nginx, testid string) {
	env := lab.Env(t)
	base, _ := strconv.Atoi(env["RATE"])
	rate := 10 * base
	limits := map[string]string{"app": env["APP_MEMORY"], "nginx": env["NGINX_MEMORY"]}
	before := map[string]container{}
	for s := range limits {
		before[s] = inspectService(t, s)
		peakMemory(t, before[s].ID, true)
	}
	start := time.Now()
	out, err := background(t, 3*time.Minute, "TESTID="+testid, "SCENARIO=ping", "PATHS=tcp,uds",
		fmt.Sprintf("RATE=%d", rate), "INTERLEAVE=15", "ROUNDS=0", "IDLE=0")()
	took := time.Since(start)
	requests, failed, dropped := phases(t, testid)
	if requests == 0 {
		t.Fatalf("no openloop results (%v):\n%s", err, out)
	}
	var figures []string
	for s, limit := range limits {
		now := inspectService(t, s)
		if now.Restarts != before[s].Restarts || now.OOMKilled || now.StartedAt != before[s].StartedAt {
			t.Errorf("%s crashed or was restarted under overload: before %+v, after %+v", s, before[s], now)
		}
		peak, source := peakMemory(t, now.ID, false)
		max := parseBytes(t, limit)
		if peak >= max {
			t.Errorf("%s: peak memory %d bytes, limit %s", s, peak, limit)
		}
		figures = append(figures, fmt.Sprintf("%s peak %.1f MiB of %s (%s)", s, float64(peak)/(1<<20), limit, source))
	}
	// openloop's status label: the HTTP status, or why there was no response.
	// Its series are stale once it has exited: their last values (see scrapedTotal).
	var statuses map[string]float64
	waitFor(t, "Prometheus's last scrape of openloop", 30*time.Second, func() error {
		statuses = vector(t, prom, fmt.Sprintf(`sum by (status) (last_over_time(openloop_requests_total{job="openloop", testid=%q}[1h]))`, testid), "status")
		var sum float64
		for _, v := range statuses {
			sum += v
		}
		if sum != requests {
			return fmt.Errorf("Prometheus has %v of openloop's %v requests", sum, requests)
		}
		return nil
	})
	// The load dashboard's dropped-requests series shows what openloop dropped
	// (its "or 0" fallback would draw a line either way).
	if dropped > 0 {
		waitFor(t, "the dropped-requests panel showing openloop's drops", 30*time.Second, func() error {
			for expr, peak := range fallbackPeaks(t, prom, "load.json", "Requests/s per path vs requests dropped (openloop)", testid, start, time.Now()) {
				if peak <= 0 {
					return fmt.Errorf("%s: peak %v, want > 0: openloop dropped %v requests", expr, peak, dropped)
				}
			}
			return nil
		})
	} else {
		t.Logf("openloop dropped no request at 10x RATE: the dropped-requests panel is not proven by this run")
	}
	for s := range statuses {
		if s != "200" && !noResponse[s] && !strings.HasPrefix(s, "5") {
			t.Errorf("status %s under overload: want 200, 5xx or no response (refused, reset, timeout, connect_timeout, error)", s)
		}
	}
	back := until(t, "every path serving after the overload", 10*time.Second, func() bool {
		for _, p := range paths {
			if status(pathURL(t, nginx, p)+"/ping") != 200 {
				return false
			}
		}
		return true
	})
	t.Logf("overload at %d req/s (10x RATE) on /tcp/ and /uds/ interleaved for 15 s: make load ended after %.0f s; "+
		"openloop sent %.0f requests (%.0f req/s), %.0f failed, %.0f requests dropped by openloop; statuses %v; %s; "+
		"every path served again %.2f s after", rate, took.Seconds(), requests, requests/15, failed, dropped,
		statuses, strings.Join(figures, ", "), back.Seconds())
}

// noResponse: openloop's status label for a request that got no response
// (loadgen/openloop: a refused connection, a reset, a request or a connect
// that timed out, another error).
var noResponse = map[string]bool{"refused": true, "reset": true, "timeout": true, "connect_timeout": true, "error": true}

// parseBytes reads a compose memory size such as 256m.
func parseBytes(t *testing.T, s string) int64 {
	t.Helper()
	mult := map[byte]int64{'k': 1 << 10, 'm': 1 << 20, 'g': 1 << 30}[s[len(s)-1]]
	if mult == 0 {
		mult, s = 1, s+"_"
	}
	v, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
	if err != nil {
		t.Fatalf("memory limit %q: %v", s, err)
	}
	return v * mult
}
