// Package integration runs the real app binary behind the project's real nginx
// template (rendered with local ports and paths) and proves what each nginx
// location does: which app listener it reaches and whether it reuses
// upstream connections.
package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
)

// stack is the app, nginx-log-exporter and nginx, each a real process on
// local ports.
type stack struct {
	nginxURL  string            // http://127.0.0.1:port, nginx
	urls      map[string]string // each nginx of the catalogue (nginx, nginx-lo) by name
	statusURL string            // nginx's stub_status server
	appTCP    string            // http://127.0.0.1:port, the app's own TCP listener
	logExp    string            // http://127.0.0.1:port, nginx-log-exporter's metrics
	workers   int               // nginx worker processes
	app       *exec.Cmd
	nginx     *exec.Cmd // nginx's master process
	dir       string    // nginx's run folder (pid, temp files)
}

// build compiles one of services/* into dir.
func build(t *testing.T, dir, service string) string {
	t.Helper()
	bin := filepath.Join(dir, service)
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = lab.Path(t, "services", service)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", service, err, out)
	}
	return bin
}

// options change the stack for one test: extra or overriding template
// variables, and an edit of the rendered config (to shorten a timeout the
// test would otherwise wait out).
type options struct {
	vars map[string]string
	edit func(t *testing.T, conf string) string
}

func startStack(t *testing.T) stack { return startStackWith(t, options{}) }

func startStackWith(t *testing.T, o options) stack {
	t.Helper()
	dir := lab.ShortTempDir(t)

	// Socket permissions as in compose: a folder and socket that only the app's
	// user and nginx workers' group may use. As root, workers run as nobody and
	// reach the socket only through the group, like uid/gid 101 in the image.
	sockDir := filepath.Join(dir, "sock")
	if err := os.Mkdir(sockDir, 0o750); err != nil {
		t.Fatal(err)
	}
	// The temp folder itself only needs to be passable, like / in a container.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	var nginxUser, socketGID string
	if os.Geteuid() == 0 {
		grp, err := user.LookupGroup("nogroup")
		if err != nil {
			t.Fatal(err)
		}
		gid, _ := strconv.Atoi(grp.Gid)
		if err := os.Chown(sockDir, 0, gid); err != nil {
			t.Fatal(err)
		}
		nginxUser = "user nobody nogroup;"
		socketGID = grp.Gid
	}
	socket := filepath.Join(sockDir, "app.sock")

	app := build(t, dir, "app")

	appPort := lab.FreePort(t)
	appEnv := append(os.Environ(),
		fmt.Sprintf("APP_TCP_ADDR=127.0.0.1:%d", appPort),
		"APP_UNIX_SOCKET="+socket,
		"APP_SOCKET_GID="+socketGID,
		"APP_DOWNLOAD_FILE="+filepath.Join(dir, "download.bin"),
		"APP_DOWNLOAD_SIZE=65536",
	)
	appCmd := start(t, "app", appEnv, app)
	health := exec.Command(app, "healthcheck")
	health.Env = appEnv
	waitFor(t, "app healthcheck on both listeners", func() error {
		out, err := health.CombinedOutput()
		health = exec.Command(app, "healthcheck")
		health.Env = appEnv
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})

	// nginx's access log goes to the exporter as compose has it (.env's
	// NGINX_ACCESS_LOG: the buffered log through the exporter's FIFO), with
	// the log volume's folder moved here and in nginx workers' group.
	logExp := build(t, dir, "nginx-log-exporter")
	logMetricsPort := lab.FreePort(t)
	logDir := filepath.Join(dir, "log")
	if err := os.Mkdir(logDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if socketGID != "" {
		gid, _ := strconv.Atoi(socketGID)
		if err := os.Chown(logDir, 0, gid); err != nil {
			t.Fatal(err)
		}
	}
	const composeLogDir = "/log/" // compose.yaml's log volume in nginx-log-exporter
	logEnv := append(os.Environ(),
		"LOG_EXPORTER_SYSLOG_ADDR="+lab.Env(t)["LOG_EXPORTER_SYSLOG_ADDR"],
		"LOG_EXPORTER_PIPE="+filepath.Join(logDir, "access.pipe"),
		"LOG_EXPORTER_SOCKET_GID="+socketGID,
		fmt.Sprintf("LOG_EXPORTER_METRICS_ADDR=127.0.0.1:%d", logMetricsPort),
		"LOG_EXPORTER_CATALOGUE="+lab.Path(t, "catalogue.json"),
	)
	start(t, "nginx-log-exporter", logEnv, logExp)
	accessLog := strings.ReplaceAll(lab.Env(t)["NGINX_ACCESS_LOG"], composeLogDir, logDir+"/")
	if !strings.Contains(accessLog, logDir) {
		t.Fatalf(".env NGINX_ACCESS_LOG=%q names nothing in %s", lab.Env(t)["NGINX_ACCESS_LOG"], composeLogDir)
	}
	waitFor(t, "nginx-log-exporter's pipe", func() error { _, err := os.Stat(filepath.Join(logDir, "access.pipe")); return err })

	// Both nginx of the catalogue, from the one template as compose runs them:
	// nginx-lo's locations carry the suffix -lo. Here both reach the app on
	// loopback; only e2e has the Docker bridge between nginx and the app.
	const workers = 2
	s := stack{appTCP: fmt.Sprintf("http://127.0.0.1:%d", appPort), logExp: fmt.Sprintf("http://127.0.0.1:%d", logMetricsPort),
		workers: workers, app: appCmd, urls: map[string]string{}}
	for name, suffix := range map[string]string{"nginx": "", "nginx-lo": "-lo"} {
		runDir := filepath.Join(dir, name)
		if err := os.Mkdir(runDir, 0o755); err != nil {
			t.Fatal(err)
		}
		port, statusPort := lab.FreePort(t), lab.FreePort(t)
		vars := map[string]string{
			"APP_PROTOCOL":           "http",
			"APP_FASTCGI_SCRIPT":     "/unused.php",
			"NGINX_WORKER_PROCESSES": strconv.Itoa(workers),
			"NGINX_RUN_DIR":          runDir,
			"NGINX_LISTEN_PORT":      strconv.Itoa(port),
			"NGINX_STATUS_PORT":      strconv.Itoa(statusPort),
			"NGINX_PATH_SUFFIX":      suffix,
			"APP_TCP_UPSTREAM":       fmt.Sprintf("127.0.0.1:%d", appPort),
			"APP_UNIX_SOCKET":        socket,
			"NGINX_ACCESS_LOG":       accessLog,
		}
		// Settings compose gives nginx from .env, as .env has them.
		for _, k := range []string{"NGINX_WORKER_CONNECTIONS", "NGINX_MAX_IN_FLIGHT", "NGINX_UPSTREAM_KEEPALIVE"} {
			vars[k] = lab.Env(t)[k]
		}
		for k, v := range o.vars {
			vars[k] = v
		}
		cmd := runNginx(t, name, runDir, vars, o.edit, nginxUser)
		s.urls[name] = fmt.Sprintf("http://127.0.0.1:%d", port)
		if name == "nginx" {
			s.nginx, s.dir = cmd, runDir
			s.nginxURL = s.urls[name]
			s.statusURL = fmt.Sprintf("http://127.0.0.1:%d/stub_status", statusPort)
		}
		waitFor(t, name, func() error { _, err := get(http.DefaultClient, s.urls[name]+"/healthz"); return err })
	}
	waitFor(t, "nginx-log-exporter", func() error { _, err := get(http.DefaultClient, s.logExp+"/healthz"); return err })
	return s
}

// runNginx renders the templates with vars into runDir (edit, if any, changes
// the main config), checks them with nginx -t and starts nginx on them for the
// length of the test. user is nginx's "user" directive ("" when not root).
func runNginx(t *testing.T, name, runDir string, vars map[string]string, edit func(*testing.T, string) string, user string) *exec.Cmd {
	t.Helper()
	nginx := lab.Tool(t, "nginx")
	conf := lab.RenderNginx(t, vars, runDir)
	confPath := filepath.Join(runDir, "nginx.conf")
	if edit != nil {
		if err := os.WriteFile(confPath, []byte(edit(t, conf)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(nginx, "-t", "-c", confPath, "-g", user).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	return start(t, name, os.Environ(), nginx, "-c", confPath, "-g", "daemon off; "+user)
}

// start runs a process for the length of the test and stops it with SIGTERM.
func start(t *testing.T, name string, env []string, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	out, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			log, _ := os.ReadFile(out.Name())
			t.Logf("%s output:\n%s", name, log)
		}
	})
	return cmd
}

func waitFor(t *testing.T, what string, try func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := try()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 20s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func get(c *http.Client, url string) ([]byte, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body, nil
}

// counts is what the app reports per listener.
type counts struct{ requests, accepted map[string]float64 }

func appCounts(t *testing.T, c *http.Client, s stack) counts {
	t.Helper()
	mf, err := lab.Metrics(c, s.appTCP+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	got := counts{requests: map[string]float64{}, accepted: map[string]float64{}}
	for _, l := range []string{"tcp", "unix"} {
		got.requests[l], _ = lab.Value(mf, "app_http_requests_total", map[string]string{"listener": l, "route": "/ping", "code": "200"})
		var ok bool
		// Every peer is on loopback here (e2e shows nginx's from across the bridge).
		peer := map[string]string{"tcp": "loopback", "unix": "local"}[l]
		if got.accepted[l], ok = lab.Value(mf, "app_connections_accepted_total", map[string]string{"listener": l, "peer": peer}); !ok {
			t.Fatalf("app_connections_accepted_total{listener=%q} missing", l)
		}
	}
	return got
}

// logged reads what nginx-log-exporter counted for a path: requests answered
// 200, and upstream connect and header times observed.
func logged(t *testing.T, s stack, path string) map[string]float64 {
	t.Helper()
	mf, err := lab.Metrics(http.DefaultClient, s.logExp+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	out["nginx_location_requests_total"], _ = lab.Value(mf, "nginx_location_requests_total", map[string]string{"path": path, "status": "200"})
	for _, h := range []string{"nginx_location_upstream_connect_seconds", "nginx_location_upstream_header_seconds"} {
		out[h+"_count"] = lab.HistogramCount(mf, h, map[string]string{"path": path})
	}
	return out
}

func TestLocations(t *testing.T) {
	s := startStack(t)
	// One client connection for scraping, opened before any baseline, so the
	// scrapes themselves add no accepted connections to the deltas.
	scraper := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	appCounts(t, scraper, s)

	const n = 60
	type pathCase struct {
		path      string
		url       string // the path at its nginx
		listener  string // the app listener this location must reach
		keepalive bool
	}
	var cases []pathCase
	for name, p := range lab.ReadCatalogue(t).Paths {
		cases = append(cases, pathCase{name, s.urls[p.Nginx] + "/" + name, p.Listener, p.Pooled})
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			// Taken before the warm-up: nginx logs a request after it has
			// answered, so the warm-up's line may arrive at any time after.
			logBefore := logged(t, s, tc.path)
			// Warm the pool first so a keepalive path starts with its connections open.
			if _, err := get(client, tc.url+"/ping"); err != nil {
				t.Fatal(err)
			}
			before := appCounts(t, scraper, s)
			for i := 0; i < n; i++ {
				body, err := get(client, tc.url+"/ping")
				if err != nil {
					t.Fatal(err)
				}
				if strings.TrimSpace(string(body)) != `{"message":"pong"}` {
					t.Fatalf("/%s/ping body %q", tc.path, body)
				}
			}
			after := appCounts(t, scraper, s)

			other := map[string]string{"tcp": "unix", "unix": "tcp"}[tc.listener]
			if d := after.requests[tc.listener] - before.requests[tc.listener]; d != n {
				t.Errorf("/%s/: %v /ping requests reached the %s listener, want %d", tc.path, d, tc.listener, n)
			}
			if d := after.requests[other] - before.requests[other]; d != 0 {
				t.Errorf("/%s/: %v /ping requests reached the %s listener, want 0", tc.path, d, other)
			}
			accepted := after.accepted[tc.listener] - before.accepted[tc.listener]
			if tc.keepalive {
				// The warm-up opened at most one pooled connection per worker; n
				// sequential requests must reuse them.
				if accepted > float64(s.workers) {
					t.Errorf("/%s/: %v new upstream connections for %d requests, want <= %d (pooled)", tc.path, accepted, n, s.workers)
				}
			} else if accepted != n {
				t.Errorf("/%s/: %v new upstream connections for %d requests, want %d (one per request)", tc.path, accepted, n, n)
			}
			t.Logf("/%s/: %d requests -> %s listener, %v connections accepted", tc.path, n, tc.listener, accepted)

			// Every request, the warm-up's too, reached nginx-log-exporter as
			// one access-log line (buffered: nginx flushes it within 1 s).
			waitFor(t, "access log lines for /"+tc.path+"/", func() error {
				got := logged(t, s, tc.path)
				for name, v := range got {
					if d := v - logBefore[name]; d != n+1 {
						return fmt.Errorf("%s{path=%q}: %v new, want %d", name, tc.path, d, n+1)
					}
				}
				return nil
			})
		})
	}
}

func TestRoutesThroughEachPath(t *testing.T) {
	s := startStack(t)
	cat := lab.ReadCatalogue(t)
	for path, p := range cat.Paths {
		t.Run(path, func(t *testing.T) {
			base := s.urls[p.Nginx] + "/" + path
			// What the reference stacks are held to (stacks_test.go).
			checkRoutes(t, cat, cat.Stacks["go"], base)
			body, err := get(http.DefaultClient, base+"/bytes/1000")
			if err != nil || len(body) != 1000 {
				t.Fatalf("/bytes/1000: %d bytes, %v", len(body), err)
			}
			for _, dl := range []string{"/download/file", "/download/stream"} {
				body, err := get(http.DefaultClient, base+dl)
				if err != nil || len(body) != 65536 {
					t.Fatalf("%s: %d bytes, %v", dl, len(body), err)
				}
			}
			if _, err := get(http.DefaultClient, base+"/sleep/5"); err != nil {
				t.Fatal(err)
			}
			if _, err := get(http.DefaultClient, base+"/cpu/10"); err != nil {
				t.Fatal(err)
			}
			// The app's own errors pass through nginx untouched.
			wantJSONError(t, base+"/bytes/-1", http.StatusBadRequest)
			wantJSONError(t, base+"/no-such-route", http.StatusNotFound)
		})
	}
	wantJSONError(t, s.nginxURL+"/elsewhere", http.StatusNotFound)
	if body, err := get(http.DefaultClient, s.statusURL); err != nil || !strings.Contains(string(body), "Active connections") {
		t.Fatalf("stub_status: %q, %v", body, err)
	}
}

func wantJSONError(t *testing.T, url string, status int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Error string `json:"error"`
	}
	if resp.StatusCode != status {
		t.Fatalf("GET %s: %d, want %d", url, resp.StatusCode, status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Error == "" {
		t.Fatalf("GET %s: body is not a JSON error (%v)", url, err)
	}
}

// Malformed and hostile requests through nginx: each gets its documented status
// (JSON from the app; nginx's own answer where nginx rejects it first), and no
// junk URL becomes a label of the app's metrics.
func TestMalformedRequests(t *testing.T) {
	s := startStack(t)
	big := strings.Repeat("x", 16<<10)
	cases := []struct {
		method, path string
		header       map[string]string
		status       int
		json         bool // a JSON {"error"}: from the app, or nginx's own
	}{
		{"GET", "/tcp/bytes/abc", nil, 400, true},
		{"GET", "/uds/bytes/-1", nil, 400, true},
		{"GET", "/tcp-ka/bytes/16777217", nil, 400, true},
		{"GET", "/uds-ka/bytes/99999999999999999999", nil, 400, true},
		{"GET", "/tcp/bytes/1e3", nil, 400, true},
		{"GET", "/uds/bytes/0x10", nil, 400, true},
		{"GET", "/tcp/cpu/0", nil, 400, true},
		{"GET", "/uds/cpu/1000000001", nil, 400, true},
		{"GET", "/tcp-ka/sleep/10001", nil, 400, true},
		{"GET", "/uds-ka/sleep/1.5", nil, 400, true},
		{"GET", "/tcp/cpu/%20", nil, 400, true},
		{"GET", "/tcp/bytes/", nil, 404, true},
		{"GET", "/uds/no-such-route", nil, 404, true},
		{"GET", "/tcp-ka/download/secret", nil, 404, true},
		{"POST", "/tcp/ping", nil, 405, true},
		{"DELETE", "/uds-ka/bytes/10", nil, 405, true},
		// Traversal: nginx normalizes the URI before choosing a location, so
		// these end outside the four paths, at nginx's JSON 404.
		{"GET", "/uds/download/../../etc/passwd", nil, 404, true},
		{"GET", "/tcp/download/%2e%2e/%2e%2e/etc/passwd", nil, 404, true},
		// Rejected by nginx itself, before any location: a path above the root,
		// TRACE, an oversize header or URI, a NUL byte; nginx's JSON (issue 14:
		// these were HTML pages).
		{"GET", "/tcp-ka/download/file/../../../../etc/passwd", nil, 400, true},
		{"TRACE", "/tcp/ping", nil, 405, true},
		{"GET", "/tcp/ping", map[string]string{"X-Big": big}, 400, true},
		{"GET", "/tcp/bytes/" + strings.Repeat("9", 9000), nil, 414, true},
		{"GET", "/uds/bytes/%00", nil, 400, true},
		// An unsatisfiable Range: the app's JSON 416, passed through.
		{"GET", "/tcp/download/file", map[string]string{"Range": "bytes=99999999-"}, 416, true},
		{"GET", "/uds-ka/download/file", map[string]string{"Range": "bytes=99999999-"}, 416, true},
	}
	for _, tc := range cases {
		name := tc.method + " " + tc.path
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, s.nginxURL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d, want %d: %.200s", resp.StatusCode, tc.status, body)
			}
			var e struct {
				Error string `json:"error"`
			}
			if isJSON := json.Unmarshal(body, &e) == nil && e.Error != ""; isJSON != tc.json {
				t.Errorf("JSON error body = %v, want %v: %.200s", isJSON, tc.json, body)
			}
		})
	}

	// Bounded labels: route templates (or "unmatched") and 3-digit codes only.
	mf, err := lab.Metrics(http.DefaultClient, s.appTCP+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string]bool{"/ping": true, "/bytes/:n": true, "/cpu/:iterations": true, "/sleep/:ms": true,
		"/download/file": true, "/download/stream": true, "/healthz": true, "/readyz": true, "/metrics": true, "unmatched": true}
	for _, m := range mf["app_http_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "route":
				if !routes[l.GetValue()] {
					t.Errorf("route label %q is not a route template", l.GetValue())
				}
			case "code":
				if len(l.GetValue()) != 3 {
					t.Errorf("code label %q", l.GetValue())
				}
			}
		}
	}
}

// With the app gone, every path answers nginx's JSON 502, not an HTML page.
func TestAppDown(t *testing.T) {
	s := startStack(t)
	if err := s.app.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = s.app.Process.Wait()
	for path, p := range lab.ReadCatalogue(t).Paths {
		resp, err := http.Get(s.urls[p.Nginx] + "/" + path + "/ping")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error string `json:"error"`
		}
		if resp.StatusCode != http.StatusBadGateway || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, "not answering") {
			t.Errorf("/%s/ping with the app down: %d %q, want 502 with a JSON error", path, resp.StatusCode, body)
		}
	}
	// nginx's JSON error page keeps the request's $uri: the access log still
	// files each 502 under its path.
	waitFor(t, "the 502s in nginx-log-exporter", func() error {
		mf, err := lab.Metrics(http.DefaultClient, s.logExp+"/metrics")
		if err != nil {
			return err
		}
		for _, path := range []string{"tcp", "uds", "tcp-ka", "uds-ka"} {
			if v, _ := lab.Value(mf, "nginx_location_requests_total", map[string]string{"path": path, "status": "502"}); v != 1 {
				return fmt.Errorf("nginx_location_requests_total{path=%q,status=\"502\"} = %v, want 1", path, v)
			}
		}
		return nil
	})
}
