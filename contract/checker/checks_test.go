package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// flaws a test app can have, each of which some clause must catch.
type flaws struct {
	rawURLLabels bool        // route label = the URL path
	oneListener  bool        // every request labelled listener="tcp"
	mode         os.FileMode // socket mode (0660 when zero)
	abruptStop   bool        // Close instead of Shutdown: in-flight requests cut
}

type testApp struct {
	cfg     Config
	servers []*http.Server
	f       flaws
}

// startApp serves a small contract app on 127.0.0.1 and a socket in a temp dir.
func startApp(t *testing.T, f flaws) *testApp {
	t.Helper()
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: requestsMetric}, []string{"listener", "route", "code"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: durationMetric}, []string{"listener", "route"})
	reg.MustRegister(requests, duration)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(404) })
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"message":"pong"}`) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("GET /sleep/{ms}", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.PathValue("ms"))
		time.Sleep(time.Duration(ms) * time.Millisecond)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	instrument := func(listener string) http.Handler {
		if f.oneListener {
			listener = "tcp"
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			mux.ServeHTTP(w, r)
			route := r.Pattern
			if f.rawURLLabels {
				route = r.URL.Path
			} else if route == "" {
				route = "unmatched"
			}
			requests.WithLabelValues(listener, route, "200").Inc()
			duration.WithLabelValues(listener, route).Observe(time.Since(start).Seconds())
		})
	}
	dir := t.TempDir()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "app.sock")
	uds, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mode := f.mode
	if mode == 0 {
		mode = 0o660
	}
	if err := os.Chmod(sock, mode); err != nil {
		t.Fatal(err)
	}
	a := &testApp{f: f, cfg: Config{
		TCP:        tcp.Addr().String(),
		Socket:     sock,
		Dashboards: filepath.Join("..", "..", "grafana", "dashboards"),
		Workloads:  filepath.Join("..", "..", "catalogue.json"),
		Wait:       2 * time.Second,
		Params:     map[string]string{"CPU_ITERATIONS": "100", "SLEEP_MS": "1", "ENDPOINT": "/ping"},
	}}
	for i, l := range []net.Listener{tcp, uds} {
		s := &http.Server{Handler: instrument([]string{"tcp", "unix"}[i]), ReadHeaderTimeout: time.Second}
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
	err := check(a.cfg, newApp(a.cfg), func(c Clause) { got[c.Name] = c })
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestCheckPassesAGoodApp(t *testing.T) {
	got := clauses(t, startApp(t, flaws{}))
	for name, c := range got {
		if c.Required && !c.Pass {
			t.Errorf("%s: failed: %s", name, c.Why)
		}
	}
	// The test app has no /bytes, /cpu or /download: those workloads fail,
	// optionally, and the dashboards' other app metrics name their panels.
	if c := got["route /bytes/1024"]; c.Pass || c.Required || c.Workload != "bytes-1k" {
		t.Errorf("route /bytes/1024: %+v, want an optional failure for bytes-1k", c)
	}
	if c := got["metric app_connections_accepted_total"]; c.Pass || len(c.Panels) == 0 {
		t.Errorf("metric app_connections_accepted_total: %+v, want a failure naming panels", c)
	}
	if !strings.Contains(got[durationMetric+" per listener"].Why, "classic") {
		t.Errorf("histogram clause: %+v", got[durationMetric+" per listener"])
	}
}

func TestCheckCatchesFlaws(t *testing.T) {
	for _, tc := range []struct {
		name   string
		f      flaws
		failed []string
	}{
		{"raw URLs as labels", flaws{rawURLLabels: true}, []string{"labels are route templates, not URLs"}},
		{"one listener label", flaws{oneListener: true}, []string{requestsMetric + " counts each listener's requests", durationMetric + " per listener"}},
		{"socket open to all", flaws{mode: 0o666}, []string{"socket: nginx's user can connect, others have no access"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := clauses(t, startApp(t, tc.f))
			for _, name := range tc.failed {
				c, ok := got[name]
				if !ok || c.Pass {
					t.Errorf("%s: %+v, want a failure", name, c)
				}
			}
		})
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
	if c := drainWith(t, startApp(t, flaws{})); !c.Pass {
		t.Errorf("graceful shutdown: %s", c.Why)
	}
	if c := drainWith(t, startApp(t, flaws{abruptStop: true})); c.Pass {
		t.Errorf("abrupt stop passed: %s", c.Why)
	}
}

func TestRunOutputsJSONLines(t *testing.T) {
	a := startApp(t, flaws{})
	env := map[string]string{"CONTRACT_TCP": a.cfg.TCP, "CONTRACT_SOCKET": a.cfg.Socket, "CONTRACT_WAIT": "2s"}
	var out strings.Builder
	if err := run([]string{"contract", "wait"}, func(k string) string { return env[k] }, &out); err != nil {
		t.Fatal(err)
	}
	var c Clause
	if err := json.Unmarshal([]byte(out.String()), &c); err != nil || !c.Pass {
		t.Errorf("wait: %q (%v)", out.String(), err)
	}
	for _, bad := range []map[string]string{{"CONTRACT_WAIT": "soon"}, {"SLEEP_MS": "-1"}} {
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
}
