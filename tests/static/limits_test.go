package static

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
)

// longestRequest reads the app's /sleep cap, the longest request it serves.
func longestRequest(t *testing.T) time.Duration {
	t.Helper()
	src, err := os.ReadFile(lab.Path(t, "services", "app", "config.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`maxSleepMS\s*=\s*(\d+)`).FindSubmatch(src)
	if m == nil {
		t.Fatal("services/app/config.go: no maxSleepMS")
	}
	ms, _ := strconv.Atoi(string(m[1]))
	return time.Duration(ms) * time.Millisecond
}

// Stopping the app (make down, docker compose stop) lets the longest request
// in flight finish: it fits in the app's drain budget with room for net/http's
// 500 ms idle checks, and the drain fits in Docker's grace period before
// SIGKILL (issue 14: with 10 s for all three the app exited 1 or was killed).
// nginx, stopped with SIGQUIT, also waits for requests in flight.
func TestStopOutlastsLongestRequest(t *testing.T) {
	p := loadCompose(t)
	longest := longestRequest(t)
	app := p.Services["app"]
	v := app.Environment["APP_SHUTDOWN_TIMEOUT"]
	if v == nil {
		t.Fatal("compose.yaml does not set the app's APP_SHUTDOWN_TIMEOUT")
	}
	drain, err := time.ParseDuration(*v)
	if err != nil {
		t.Fatalf("APP_SHUTDOWN_TIMEOUT=%q: %v", *v, err)
	}
	if drain < longest+2*time.Second {
		t.Errorf("APP_SHUTDOWN_TIMEOUT=%s: want at least the longest request (%s) + 2 s", drain, longest)
	}
	for name, need := range map[string]time.Duration{"app": drain + 2*time.Second, "nginx": longest + 2*time.Second} {
		s := p.Services[name]
		grace := 10 * time.Second // Docker's default
		if s.StopGracePeriod != nil {
			grace = time.Duration(*s.StopGracePeriod)
		}
		if grace < need {
			t.Errorf("%s: stop_grace_period %s, want at least %s", name, grace, need)
		}
	}
}

// nginx's connection budget, from .env: NGINX_MAX_IN_FLIGHT requests in
// flight hold two connections each, the idle upstream pools and listeners
// some more, and what is left of NGINX_WORKER_CONNECTIONS must let as many
// clients again be refused with a 503 rather than reset; the lab's own
// make max stays far below the limit; every connection is a file descriptor
// (issue 14: resets at ~1900 concurrent requests, and Docker 25+ gives
// containers 1024 open files).
func TestNginxConnectionBudget(t *testing.T) {
	env := lab.Env(t)
	num := func(name string) int {
		v, err := strconv.Atoi(env[name])
		if err != nil || v <= 0 {
			t.Fatalf(".env %s=%q: want a positive integer", name, env[name])
		}
		return v
	}
	workerConns, inFlight, connections := num("NGINX_WORKER_CONNECTIONS"), num("NGINX_MAX_IN_FLIGHT"), num("CONNECTIONS")
	// Two upstream {} pools of NGINX_UPSTREAM_KEEPALIVE idle connections, two listeners.
	fixed := 2*num("NGINX_UPSTREAM_KEEPALIVE") + 16
	if need := 3*inFlight + fixed; workerConns < need {
		t.Errorf("NGINX_WORKER_CONNECTIONS=%d: want >= 3 x NGINX_MAX_IN_FLIGHT + %d = %d", workerConns, fixed, need)
	}
	if inFlight < 4*connections {
		t.Errorf("NGINX_MAX_IN_FLIGHT=%d: want >= 4 x CONNECTIONS (%d), so make max never meets it", inFlight, connections)
	}
	// make sweep SWEEP=connections: its most connections in flight stay within it too.
	levels := strings.Split(env["SWEEP_CONNECTIONS"], ",")
	if top, err := strconv.Atoi(strings.TrimSpace(levels[len(levels)-1])); err != nil || top > inFlight {
		t.Errorf("SWEEP_CONNECTIONS=%s: want its last (most) <= NGINX_MAX_IN_FLIGHT (%d), so nginx's own 503s stay out of a default sweep", env["SWEEP_CONNECTIONS"], inFlight)
	}

	src, err := os.ReadFile(lab.Path(t, "nginx", "templates", "nginx.conf.template"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^worker_rlimit_nofile (\d+);`).FindSubmatch(src)
	if m == nil {
		t.Fatal("nginx.conf.template sets no worker_rlimit_nofile")
	}
	nofile, _ := strconv.Atoi(string(m[1]))
	if nofile < workerConns+64 {
		t.Errorf("worker_rlimit_nofile %d: want >= NGINX_WORKER_CONNECTIONS (%d) + 64 (temp and log files)", nofile, workerConns)
	}
	// The workers run unprivileged: they can raise their soft limit only up
	// to the hard limit the container starts with.
	u := loadCompose(t).Services["nginx"].Ulimits["nofile"]
	if u == nil || (u.Single < nofile && u.Hard < nofile) {
		t.Errorf("compose.yaml nginx ulimits nofile %+v: want a hard limit >= worker_rlimit_nofile %d", u, nofile)
	}
}
