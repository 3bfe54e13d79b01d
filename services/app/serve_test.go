package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestRunServesEveryRouteOnBothListeners(t *testing.T) {
	dir := socketDir(t)
	a := startApp(t, testEnv(dir))
	download, err := os.ReadFile(filepath.Join(dir, "download.bin"))
	if err != nil || len(download) != 100000 {
		t.Fatalf("download file: %d bytes, %v", len(download), err)
	}
	if !strings.Contains(a.stdout.String(), "unix="+a.sock) || !strings.Contains(a.stdout.String(), "socket_mode=0660") {
		t.Errorf("startup line: %q", a.stdout.String())
	}

	for _, l := range []string{"tcp", "unix"} {
		checks := []struct {
			path string
			code int
			want string
		}{
			{"/ping", 200, `{"message":"pong"}`},
			{"/healthz", 200, `{"status":"ok"}`},
			{"/readyz", 200, `{"status":"ready"}`},
			{"/sleep/1", 200, `{"slept_ms":1}`},
			{"/cpu/1", 200, `"iterations":1`},
			{"/bytes/abc", 400, `"error"`},
			{"/nope", 404, `{"error":"no route for GET /nope"}`},
			{"/metrics", 200, "app_http_requests_total"},
		}
		for _, c := range checks {
			code, body := a.get(t, l, c.path)
			if code != c.code || !strings.Contains(body, c.want) {
				t.Errorf("%s %s: %d %q", l, c.path, code, body)
			}
		}
		if code, body := a.get(t, l, "/bytes/70000"); code != 200 || len(body) != 70000 {
			t.Errorf("%s /bytes/70000: %d, %d bytes", l, code, len(body))
		}
		for _, p := range []string{"/download/file", "/download/stream"} {
			if code, body := a.get(t, l, p); code != 200 || body != string(download) {
				t.Errorf("%s %s: %d, %d bytes", l, p, code, len(body))
			}
		}
		resp, err := a.clients[l].Post(a.url("/ping"), "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 {
			t.Errorf("%s POST /ping: %d", l, resp.StatusCode)
		}
	}

	st, err := os.Stat(a.sock)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %v, want socket 0660", st.Mode())
	}
	if err := a.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}
	if _, err := os.Lstat(a.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket not removed: %v", err)
	}
}

func TestSocketModeAndGID(t *testing.T) {
	dir := socketDir(t)
	env := testEnv(dir)
	env["APP_SOCKET_MODE"] = "0770"
	env["APP_SOCKET_GID"] = strconv.Itoa(os.Getgid())
	a := startApp(t, env)
	st, err := os.Stat(a.sock)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o770 {
		t.Errorf("mode %v, want 0770", st.Mode().Perm())
	}
	if gid := fileGID(st); gid != os.Getgid() {
		t.Errorf("gid %d, want %d", gid, os.Getgid())
	}
}

// metricValue finds the sample of an exact series, name{labels} with the
// labels in the exposition's order (sorted, le last), in a text exposition
// parsed by expfmt (what Prometheus's scrape reads), histograms' _count,
// _sum and _bucket included.
func metricValue(t *testing.T, exposition, series string) float64 {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(exposition))
	if err != nil {
		t.Fatalf("exposition: %v", err)
	}
	samples, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{Timestamp: model.Now()}, slices.Collect(maps.Values(families))...)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		var labels, last []string // a bucket's le and a quantile come last
		for _, k := range slices.Sorted(maps.Keys(s.Metric)) {
			l := fmt.Sprintf("%s=%q", k, s.Metric[k])
			switch k {
			case model.MetricNameLabel:
			case model.BucketLabel, model.QuantileLabel:
				last = append(last, l)
			default:
				labels = append(labels, l)
			}
		}
		labels = append(labels, last...)
		name := string(s.Metric[model.MetricNameLabel])
		if len(labels) > 0 {
			name += "{" + strings.Join(labels, ",") + "}"
		}
		if name == series {
			return float64(s.Value)
		}
	}
	t.Fatalf("series %s not found", series)
	return 0
}

func TestMetricLabelsAndConnectionCounting(t *testing.T) {
	a := startApp(t, testEnv(socketDir(t)))
	scrape := func() string {
		// A fresh connection each time so the scrape's own connection is
		// counted on tcp only.
		code, body := doGet(tcpClient(false), a.url("/metrics"))
		if code != 200 {
			t.Fatalf("scrape: %d %s", code, body)
		}
		return body
	}

	for _, l := range []string{"tcp", "unix"} {
		a.get(t, l, "/bytes/10")
		a.get(t, l, "/bytes/20")
	}
	random := fmt.Sprintf("/does-not-exist-%d", time.Now().UnixNano())
	a.get(t, "unix", random)

	m := scrape()
	for _, l := range []string{"tcp", "unix"} {
		if v := metricValue(t, m, `app_http_requests_total{code="200",listener="`+l+`",route="/bytes/:n"}`); v != 2 {
			t.Errorf("%s /bytes/:n count = %v, want 2", l, v)
		}
		metricValue(t, m, `app_http_request_duration_seconds_count{code="200",listener="`+l+`",route="/bytes/:n"}`)
	}
	if v := metricValue(t, m, `app_http_requests_total{code="404",listener="unix",route="unmatched"}`); v != 1 {
		t.Errorf("unmatched = %v", v)
	}
	if strings.Contains(m, random) || strings.Contains(m, `route="/bytes/10"`) {
		t.Error("raw URL leaked into a label")
	}

	// The test's clients are on loopback; the socket's peer is local.
	accepted := func(m, l string) float64 {
		peer := map[string]string{"tcp": "loopback", "unix": "local"}[l]
		if l == "tcp" && metricValue(t, m, `app_connections_accepted_total{listener="tcp",peer="network"}`) != 0 {
			t.Error("a connection from 127.0.0.1 was counted as peer=network")
		}
		return metricValue(t, m, `app_connections_accepted_total{listener="`+l+`",peer="`+peer+`"}`)
	}
	for _, l := range []string{"tcp", "unix"} {
		before := accepted(scrape(), l)
		keep := map[string]*http.Client{"tcp": tcpClient(true), "unix": unixClient(a.sock, true)}[l]
		for range 5 {
			if code, _ := doGet(keep, a.url("/ping")); code != 200 {
				t.Fatal("ping failed")
			}
		}
		after := accepted(scrape(), l)
		// tcp: +1 keepalive connection +1 for the scrape in between.
		want := 1.0
		if l == "tcp" {
			want = 2
		}
		if after-before != want {
			t.Errorf("%s keepalive: accepted grew by %v, want %v", l, after-before, want)
		}

		before = after
		fresh := map[string]*http.Client{"tcp": tcpClient(false), "unix": unixClient(a.sock, false)}[l]
		for range 3 {
			doGet(fresh, a.url("/ping"))
		}
		after = accepted(scrape(), l)
		want = 3
		if l == "tcp" {
			want = 4
		}
		if after-before != want {
			t.Errorf("%s no keepalive: accepted grew by %v, want %v", l, after-before, want)
		}
	}
	if v := metricValue(t, scrape(), `app_connections_open{listener="unix"}`); v < 1 {
		t.Errorf("open unix connections = %v, want >= 1 (keepalive clients)", v)
	}
}

func TestStaleSocketIsRemoved(t *testing.T) {
	dir := socketDir(t)
	env := testEnv(dir)
	l, err := net.Listen("unix", env["APP_UNIX_SOCKET"])
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // leaves the file behind, as a crash would
	if _, err := os.Lstat(env["APP_UNIX_SOCKET"]); err != nil {
		t.Fatal(err)
	}
	a := startApp(t, env)
	if code, _ := a.get(t, "unix", "/ping"); code != 200 {
		t.Fatal("ping over replaced socket failed")
	}
}

func TestLiveSocketRefused(t *testing.T) {
	dir := socketDir(t)
	env := testEnv(dir)
	l, err := net.Listen("unix", env["APP_UNIX_SOCKET"])
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = run(context.Background(), []string{"app"}, envFunc(env), io.Discard, io.Discard)
	want := "APP_UNIX_SOCKET " + env["APP_UNIX_SOCKET"] + ": another process is listening on it"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if _, err := os.Lstat(env["APP_UNIX_SOCKET"]); err != nil {
		t.Fatalf("live socket was removed: %v", err)
	}
}

func TestNonSocketFileRefused(t *testing.T) {
	dir := socketDir(t)
	env := testEnv(dir)
	if err := os.WriteFile(env["APP_UNIX_SOCKET"], []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"app"}, envFunc(env), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not a socket") || !strings.Contains(err.Error(), "APP_UNIX_SOCKET") {
		t.Fatalf("err = %v", err)
	}
	if b, _ := os.ReadFile(env["APP_UNIX_SOCKET"]); string(b) != "precious" {
		t.Fatal("user file was touched")
	}
}

func TestMissingSocketDirRefused(t *testing.T) {
	env := testEnv(socketDir(t))
	env["APP_UNIX_SOCKET"] = "/nonexistent-uds-lab/app.sock"
	err := run(context.Background(), []string{"app"}, envFunc(env), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "parent directory /nonexistent-uds-lab") {
		t.Fatalf("err = %v", err)
	}
}

func TestBadEnvFailsRun(t *testing.T) {
	for _, kv := range [][2]string{
		{"APP_SOCKET_MODE", "0777"}, {"APP_SOCKET_MODE", "0666"}, {"APP_SOCKET_MODE", "abc"}, {"APP_SOCKET_MODE", "01777"},
		{"APP_TCP_ADDR", "nope"}, {"APP_SOCKET_GID", "x"}, {"APP_SHUTDOWN_TIMEOUT", "soon"},
		{"APP_DOWNLOAD_SIZE", "big"}, {"APP_CPU_MAX_ITERATIONS", "0"},
	} {
		env := testEnv(socketDir(t))
		env[kv[0]] = kv[1]
		err := run(context.Background(), []string{"app"}, envFunc(env), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), kv[0]) || !strings.Contains(err.Error(), kv[1]) {
			t.Errorf("%s=%s: err = %v", kv[0], kv[1], err)
		}
		if _, err := os.Lstat(env["APP_UNIX_SOCKET"]); err == nil {
			t.Errorf("%s=%s: socket created despite bad config", kv[0], kv[1])
		}
	}
}

func TestGracefulShutdownDrains(t *testing.T) {
	ready := &Readiness{}
	a := startAppReady(t, testEnv(socketDir(t)), ready)
	if code, body := a.get(t, "unix", "/readyz"); code != 200 {
		t.Fatalf("readyz before shutdown: %d %s", code, body)
	}

	type result struct {
		code int
		body string
	}
	inflight := make(chan result, 1)
	go func() {
		code, body := doGet(unixClient(a.sock, false), a.url("/sleep/500"))
		inflight <- result{code, body}
	}()
	time.Sleep(150 * time.Millisecond) // let the sleep request start

	a.cancel() // what SIGTERM does via signal.NotifyContext
	deadline := time.Now().Add(200 * time.Millisecond)
	for !ready.Draining() {
		if time.Now().After(deadline) {
			t.Fatal("readiness not flipped after cancel")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case r := <-inflight:
		t.Fatalf("in-flight request finished before the drain was observed: %+v", r)
	default: // still draining: /readyz would answer 503 now (see TestReadyzWhileDraining)
	}

	r := <-inflight
	if r.code != 200 || r.body != `{"slept_ms":500}` {
		t.Errorf("in-flight request: %d %q", r.code, r.body)
	}
	if err := a.stop(t); err != nil {
		t.Fatalf("run returned %v, want nil", err)
	}
	if _, err := os.Lstat(a.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket still present: %v", err)
	}
	if !strings.Contains(a.stdout.String(), "shutdown complete") {
		t.Errorf("no shutdown line: %q", a.stdout.String())
	}
	// New connections are refused once shut down.
	if code, _ := doGet(tcpClient(false), a.url("/ping")); code != 0 {
		t.Errorf("tcp still answering after shutdown: %d", code)
	}
}

func TestShutdownTimeoutReturnsError(t *testing.T) {
	env := testEnv(socketDir(t))
	env["APP_SHUTDOWN_TIMEOUT"] = "100ms"
	a := startApp(t, env)
	go doGet(unixClient(a.sock, false), a.url("/sleep/3000"))
	time.Sleep(150 * time.Millisecond)
	start := time.Now()
	err := a.stop(t)
	if err == nil || !strings.Contains(err.Error(), "APP_SHUTDOWN_TIMEOUT") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("forced shutdown took %v", d)
	}
	if _, err := os.Lstat(a.sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket still present: %v", err)
	}
}
