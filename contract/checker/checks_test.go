package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/fcgi"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"uds-lab/contract/panels"
)

// TestMain doubles as one checker step when CONTRACT_TEST_STEP is set, so a
// test can run a step as another user (see asOther).
func TestMain(m *testing.M) {
	if n := os.Getenv("CONTRACT_TEST_WORKER"); n != "" {
		testWorker(n) // a worker process of pitfalls_test's multi-process app
	}
	if step := os.Getenv("CONTRACT_TEST_STEP"); step != "" {
		if err := run([]string{"contract", step}, os.Getenv, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// flaws a test app can have: each breaks exactly one clause. The zero value
// is an app that keeps every clause, optional ones included.
type flaws struct {
	socketStatus  int         // the socket answers every request with this status
	tcpNotHTTP    bool        // the TCP port accepts and closes without an answer
	mode          os.FileMode // socket mode (0660 when zero)
	dirMode       os.FileMode // the socket's folder (0755 when zero)
	unixReadyz    int         // /readyz answers this on the socket
	noHealth      bool        // no /healthz, /readyz
	unixExtraByte string      // this route answers one byte more on the socket
	missingRoute  string      // this route answers 404
	countTCPOnly  bool        // app_http_requests_total labels every request listener="tcp"
	countNoUnix   bool        // app_http_requests_total leaves the socket's requests out
	rawURLLabels  bool        // route label = the URL path
	histTCPOnly   bool        // the duration histogram labels every request listener="tcp"
	histSummary   bool        // the duration is a summary
	connTCPOnly   bool        // app_connections_accepted_total has listener="tcp" only
	noConnMetric  bool        // no app_connections_accepted_total
	noMetrics     bool        // no /metrics at all
	abruptStop    bool        // Close instead of Shutdown: in-flight requests cut
	keepSocket    bool        // the socket file stays after the stop
	fastcgi       bool        // speaks FastCGI (net/http/fcgi, as PHP-FPM) on both, not HTTP
}

type testApp struct {
	cfg     Config
	servers []*http.Server
	f       flaws
}

func testConfig(tcp, sock string) Config {
	return Config{
		TCP:        tcp,
		Socket:     sock,
		Dashboards: filepath.Join("..", "..", "grafana", "dashboards"),
		Workloads:  filepath.Join("..", "..", "catalogue.json"),
		Wait:       time.Second,
		StopWait:   6 * time.Second, // longer than drainSleep
		Params:     map[string]string{"CPU_ITERATIONS": "100", "SLEEP_MS": "1", "ENDPOINT": "/ping"},
	}
}

// startApp serves a small app on 127.0.0.1 and on a socket in a folder of its
// own: every catalogue workload's route, /sleep/{ms}, health and the metrics
// the dashboards read, each unless a flaw leaves it out or breaks it.
func startApp(t *testing.T, f flaws) *testApp {
	t.Helper()
	// A short folder: a socket's path may not exceed 107 bytes.
	dir, err := os.MkdirTemp("", "contract")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "app.sock")
	uds, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	uds.(*net.UnixListener).SetUnlinkOnClose(!f.keepSocket)
	a := &testApp{f: f, cfg: testConfig(tcp.Addr().String(), sock)}
	if f.fastcgi {
		a.cfg.Protocol, a.cfg.Script = "fastcgi", "/app/index.php"
	}
	chmod(t, sock, f.mode, 0o660)
	chmod(t, dir, f.dirMode, 0o755)

	workloads, err := loadWorkloads(a.cfg)
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string][]byte{}
	for _, w := range workloads {
		bodies[w.path] = []byte(fmt.Sprintf(`{"workload":%q}`, w.name))
		if n, ok := strings.CutPrefix(w.path, "/bytes/"); ok {
			size, _ := strconv.Atoi(n)
			bodies[w.path] = make([]byte, size)
		}
	}
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: requestsMetric}, []string{"listener", "route", "code"})
	var duration interface {
		prometheus.Collector
		WithLabelValues(...string) prometheus.Observer
	} = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: durationMetric}, []string{"listener", "route"})
	if f.histSummary {
		duration = prometheus.NewSummaryVec(prometheus.SummaryOpts{Name: durationMetric}, []string{"listener", "route"})
	}
	reg.MustRegister(requests, duration, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if !f.noConnMetric {
		conns := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "app_connections_accepted_total"}, []string{"listener", "peer"})
		reg.MustRegister(conns)
		conns.WithLabelValues("tcp", "network").Add(1)
		if !f.connTCPOnly {
			conns.WithLabelValues("unix", "local").Add(1)
		}
	}
	fillDashboardMetrics(t, reg, a.cfg.Dashboards)
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})

	// serve answers one request; it returns the route label.
	serve := func(listener string, w http.ResponseWriter, r *http.Request) string {
		p := r.URL.Path
		switch {
		case listener == "unix" && f.socketStatus != 0:
			w.WriteHeader(f.socketStatus)
			return "unmatched"
		case p == "/metrics" && !f.noMetrics:
			metrics.ServeHTTP(w, r)
			return p
		case (p == "/healthz" || p == "/readyz") && !f.noHealth:
			if p == "/readyz" && listener == "unix" && f.unixReadyz != 0 {
				w.WriteHeader(f.unixReadyz)
			}
			return p
		case strings.HasPrefix(p, "/sleep/"):
			ms, _ := strconv.Atoi(strings.TrimPrefix(p, "/sleep/"))
			time.Sleep(time.Duration(ms) * time.Millisecond)
			return "/sleep/{ms}"
		case bodies[p] != nil && p != f.missingRoute:
			w.Write(bodies[p])
			if listener == "unix" && p == f.unixExtraByte {
				w.Write([]byte{'x'})
			}
			return p
		}
		w.WriteHeader(404)
		return "unmatched"
	}
	handler := func(listener string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			route := serve(listener, w, r)
			if f.rawURLLabels {
				route = r.URL.Path
			}
			counted, timed := listener, listener
			if f.countTCPOnly {
				counted = "tcp"
			}
			if f.histTCPOnly {
				timed = "tcp"
			}
			if !(f.countNoUnix && listener == "unix") {
				requests.WithLabelValues(counted, route, "200").Inc()
			}
			duration.WithLabelValues(timed, route).Observe(time.Since(start).Seconds())
		})
	}
	if f.tcpNotHTTP {
		go func() {
			for {
				c, err := tcp.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("not http\n"))
				c.Close()
			}
		}()
		t.Cleanup(func() { tcp.Close() })
	}
	for i, l := range []net.Listener{tcp, uds} {
		if i == 0 && f.tcpNotHTTP {
			continue
		}
		if f.fastcgi {
			// As PHP-FPM: a request that names another script is "File not found.".
			h, script := handler([]string{"tcp", "unix"}[i]), a.cfg.Script
			go fcgi.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if got := fcgi.ProcessEnv(r)["SCRIPT_FILENAME"]; got != script {
					http.Error(w, "File not found.", http.StatusNotFound)
					return
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(func() { l.Close() })
			continue
		}
		s := &http.Server{Handler: handler([]string{"tcp", "unix"}[i]), ReadHeaderTimeout: time.Second}
		a.servers = append(a.servers, s)
		go s.Serve(l)
	}
	t.Cleanup(func() {
		for _, s := range a.servers {
			s.Close()
		}
	})
	return a
}

func chmod(t *testing.T, path string, mode, def os.FileMode) {
	t.Helper()
	if mode == 0 {
		mode = def
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// fillDashboardMetrics registers a gauge, on both listeners, for every app
// metric the dashboards read that reg lacks, so the test app keeps every
// optional clause whatever the dashboards come to read.
func fillDashboardMetrics(t *testing.T, reg *prometheus.Registry, dir string) {
	t.Helper()
	uses, err := panels.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := families{}
	for _, mf := range mfs {
		have[mf.GetName()] = mf
	}
	for name := range uses {
		if strings.HasPrefix(name, requestsMetric) || strings.HasPrefix(name, durationMetric) ||
			name == "app_connections_accepted_total" || have.family(name) != nil {
			continue
		}
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name}, []string{"listener"})
		reg.MustRegister(g)
		g.WithLabelValues("tcp").Set(1)
		g.WithLabelValues("unix").Set(1)
	}
}

func (a *testApp) stop() {
	for _, s := range a.servers {
		if a.f.abruptStop {
			s.Close()
		} else {
			s.Shutdown(context.Background())
		}
	}
}

// clauses runs check and returns its clauses by name.
func clauses(t *testing.T, a *testApp) map[string]Clause {
	t.Helper()
	got := map[string]Clause{}
	err := check(a.cfg, newApp(a.cfg), func(c Clause) {
		if _, dup := got[c.Name]; dup {
			t.Errorf("two clauses named %q", c.Name)
		}
		got[c.Name] = c
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func failing(got map[string]Clause) []string {
	var names []string
	for name, c := range got {
		if !c.Pass {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func TestCheckPassesAFullApp(t *testing.T) {
	got := clauses(t, startApp(t, flaws{}))
	if f := failing(got); len(f) > 0 {
		for _, name := range f {
			t.Errorf("%s: %s", name, got[name].Why)
		}
	}
	for _, name := range []string{servesName, socketName, healthName, countedName, boundedName, histName,
		"route /ping", "route /bytes/1024", "route /cpu/100", "metric app_connections_accepted_total"} {
		if _, ok := got[name]; !ok {
			t.Errorf("no clause %q", name)
		}
	}
	if !strings.Contains(got[histName].Why, "classic") {
		t.Errorf("histogram clause: %+v", got[histName])
	}
	for name, c := range got {
		if c.Required != (name == servesName || name == socketName) {
			t.Errorf("%s: required %v", name, c.Required)
		}
		if !c.Required && c.Effect == "" {
			t.Errorf("%s: optional, and says nothing of what failing it costs", name)
		}
	}
}

// An unmodified app (issue 12): it serves HTTP on both listeners with a safe
// socket, and has no /metrics, no /healthz, /readyz. It keeps every required
// clause; the optional ones fail naming the panels left empty.
func TestCheckPassesAnAppWithNoMetricsAndNoHealth(t *testing.T) {
	got := clauses(t, startApp(t, flaws{noMetrics: true, noHealth: true}))
	for name, c := range got {
		if c.Required && !c.Pass {
			t.Errorf("%s: %s", name, c.Why)
		}
	}
	// Labels cannot grow without metrics: that clause holds (issue 22: it was listed as missing).
	if c := got[boundedName]; !c.Pass || !strings.Contains(c.Why, "no metrics") {
		t.Errorf("%s: %+v, want a pass for an app without metrics", boundedName, c)
	}
	want := []string{countedName, histName, healthName}
	for name := range got {
		if strings.HasPrefix(name, "metric ") {
			want = append(want, name)
		}
	}
	sort.Strings(want)
	if f := failing(got); !slices.Equal(f, want) {
		t.Errorf("failing %v, want %v", f, want)
	}
	for _, name := range []string{countedName, histName, "metric app_connections_accepted_total"} {
		c := got[name]
		if len(c.Panels) == 0 || c.Effect != panelsEmpty || !strings.Contains(c.Why, "no metrics") {
			t.Errorf("%s: %+v, want the panels it leaves empty and why", name, c)
		}
	}
}

// Each flaw fails its clause and only it.
func TestCheckCatchesEachFlaw(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    flaws
		want string
	}{
		{"socket answers 502", flaws{socketStatus: 502}, servesName},
		{"TCP port speaks no HTTP", flaws{tcpNotHTTP: true}, servesName},
		{"socket readable by others 0664", flaws{mode: 0o664}, socketName},
		{"socket open to all 0666", flaws{mode: 0o666}, socketName},
		{"group cannot write 0640", flaws{mode: 0o640}, socketName},
		{"folder world-writable", flaws{dirMode: 0o777}, socketName},
		{"readyz 503 on the socket", flaws{unixReadyz: 503}, healthName},
		{"no health routes", flaws{noHealth: true}, healthName},
		{"a size differs between listeners", flaws{unixExtraByte: "/bytes/1024"}, "route /bytes/1024"},
		{"no /ping", flaws{missingRoute: "/ping"}, "route /ping"},
		{"no /download/file", flaws{missingRoute: "/download/file"}, "route /download/file"},
		{"requests counted on one listener", flaws{countTCPOnly: true}, countedName},
		{"requests on the socket not counted", flaws{countNoUnix: true}, countedName},
		{"raw URLs as labels", flaws{rawURLLabels: true}, boundedName},
		{"histogram on one listener", flaws{histTCPOnly: true}, histName},
		{"duration as a summary", flaws{histSummary: true}, histName},
		{"connections metric on one listener", flaws{connTCPOnly: true}, "metric app_connections_accepted_total"},
		{"no connections metric", flaws{noConnMetric: true}, "metric app_connections_accepted_total"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := clauses(t, startApp(t, tc.f))
			if f := failing(got); !slices.Equal(f, []string{tc.want}) {
				t.Errorf("failing %v, want only %q", f, tc.want)
				for _, name := range f {
					t.Logf("%s: %s", name, got[name].Why)
				}
			}
			if tc.want == servesName && len(got) != 1 {
				t.Errorf("%d clauses after the app failed to serve, want the check to stop there", len(got))
			}
		})
	}
}

func TestSocketClauseRefusesAFileThatIsNoSocket(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig("127.0.0.1:1", filepath.Join(dir, "app.sock"))
	if err := os.WriteFile(cfg.Socket, nil, 0o660); err != nil {
		t.Fatal(err)
	}
	if c := socketMode(cfg); c.Pass || !strings.Contains(c.Why, "not a socket") {
		t.Errorf("%+v", c)
	}
}

// asOther runs the others step as a user outside the socket's group: as
// root, this test binary again as 65534:65534 (nobody); otherwise in this
// process, where the caller's socket mode stands for another user's access.
func asOther(t *testing.T, cfg Config) Clause {
	t.Helper()
	if os.Geteuid() != 0 {
		return others(cfg)
	}
	// nobody must be able to run the binary: a copy in a folder it can enter.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "contract-bin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "contract.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	chmod(t, dir, 0o755, 0)
	cmd := exec.Command(bin)
	cmd.Env = []string{"CONTRACT_TEST_STEP=others", "CONTRACT_SOCKET=" + cfg.Socket, "CONTRACT_WAIT=1s"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("others as 65534: %v", err)
	}
	var c Clause
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatalf("others as 65534: %q: %v", out, err)
	}
	return c
}

func TestOthers(t *testing.T) {
	// Refused: the lab's mode for another user. (As a user that is not root
	// this process owns the socket, so mode 0000 stands for that refusal.)
	a := startApp(t, flaws{})
	if os.Geteuid() != 0 {
		chmod(t, a.cfg.Socket, 0o000, 0)
	}
	if c := asOther(t, a.cfg); !c.Pass || c.Name != othersName {
		t.Errorf("a socket closed to others: %+v, want a pass", c)
	}
	// Let in: it connects, so the clause fails.
	a = startApp(t, flaws{})
	chmod(t, a.cfg.Socket, 0o666, 0)
	if c := asOther(t, a.cfg); c.Pass || !strings.Contains(c.Why, "connected as") {
		t.Errorf("a socket open to others: %+v, want a failure", c)
	}
}

// The restart step: serving again on both listeners, or a failure once the
// wait is over.
func TestRestartStep(t *testing.T) {
	a := startApp(t, flaws{})
	env := map[string]string{"CONTRACT_TCP": a.cfg.TCP, "CONTRACT_SOCKET": a.cfg.Socket, "CONTRACT_WAIT": "1s"}
	step := func() Clause {
		var out strings.Builder
		if err := run([]string{"contract", "wait"}, func(k string) string { return env[k] }, &out); err != nil {
			t.Fatal(err)
		}
		var c Clause
		if err := json.Unmarshal([]byte(out.String()), &c); err != nil || c.Name != restartName || !c.Required {
			t.Fatalf("wait: %q (%v)", out.String(), err)
		}
		return c
	}
	if c := step(); !c.Pass {
		t.Errorf("a serving app: %s", c.Why)
	}
	a.stop()
	if c := step(); c.Pass {
		t.Errorf("a stopped app passed: %s", c.Why)
	}
}

// drainWith runs the drain step and stops the app when it says so, as
// contract/contract.py does with docker compose stop.
func drainWith(t *testing.T, a *testApp) Clause {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan Clause)
	go func() {
		c := drain(newApp(a.cfg), a.cfg, pw)
		pw.Close()
		done <- c
	}()
	sc := bufio.NewScanner(pr)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"inflight"`) {
		t.Fatalf("drain's first line: %q, want the in-flight event", sc.Text())
	}
	a.stop()
	go io.Copy(io.Discard, pr)
	return <-done
}

func TestDrain(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    flaws
		pass bool
	}{
		{"graceful", flaws{}, true},
		{"abrupt stop", flaws{abruptStop: true}, false},
		{"socket left behind", flaws{keepSocket: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := drainWith(t, startApp(t, tc.f))
			if c.Pass != tc.pass || c.Required || c.Name != drainName {
				t.Errorf("%+v, want pass %v", c, tc.pass)
			}
		})
	}
}

func TestRunRefusesBadSettings(t *testing.T) {
	for _, bad := range []map[string]string{{"CONTRACT_WAIT": "soon"}, {"SLEEP_MS": "-1"}, {"ENDPOINT": "ping"},
		{"APP_PROTOCOL": "grpc"}, {"APP_PROTOCOL": "fastcgi", "APP_FASTCGI_SCRIPT": ""}, {"APP_FASTCGI_SCRIPT": "index.php", "APP_PROTOCOL": "fastcgi"}} {
		err := run([]string{"contract", "check"}, func(k string) string { return bad[k] }, io.Discard)
		for k := range bad {
			if err == nil || !strings.Contains(err.Error(), k) {
				t.Errorf("%v: error %v, want one naming %s", bad, err, k)
			}
		}
	}
	if err := run([]string{"contract", "bogus"}, func(string) string { return "" }, io.Discard); err == nil {
		t.Error("unknown step accepted")
	}
	cfg, err := loadConfig(func(string) string { return "" })
	if err != nil || cfg.endpoint() != "/ping" {
		t.Errorf("defaults: %+v %v, want ENDPOINT /ping", cfg, err)
	}
}
