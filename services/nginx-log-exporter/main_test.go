package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// syncBuffer is an io.Writer safe for the exporter goroutine and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testEnv: the syslog socket alone, on free ports.
func testEnv() map[string]string {
	return map[string]string{
		"LOG_EXPORTER_PIPE":         "",
		"LOG_EXPORTER_SYSLOG_ADDR":  "127.0.0.1:0",
		"LOG_EXPORTER_METRICS_ADDR": "127.0.0.1:0",
	}
}

type testExporter struct {
	syslogAddr, metricsAddr string // syslogAddr: "" when it has no socket
	cancel                  context.CancelFunc
	done                    chan error
	stdout, stderr          *syncBuffer
	udp                     net.Conn
}

var listeningRE = regexp.MustCompile(`listening metrics=http:(\S+) syslog=(?:off|udp:(\S+))`)

// startExporter runs the real program in a goroutine on free ports and learns
// the actual addresses from its startup line.
func startExporter(t *testing.T, env map[string]string) *testExporter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e := &testExporter{cancel: cancel, done: make(chan error, 1), stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	go func() { e.done <- run(ctx, []string{"nginx-log-exporter"}, envFunc(env), e.stdout, e.stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-e.done:
		case <-time.After(10 * time.Second):
			t.Error("exporter did not stop")
		}
	})

	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := listeningRE.FindStringSubmatch(e.stdout.String()); m != nil {
			e.metricsAddr, e.syslogAddr = m[1], m[2]
			break
		}
		select {
		case err := <-e.done:
			e.done <- err // let Cleanup see it
			t.Fatalf("run returned before listening: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("exporter did not log its addresses")
		}
	}
	if e.syslogAddr == "" {
		return e
	}
	udp, err := net.Dial("udp", e.syslogAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udp.Close() })
	e.udp = udp
	return e
}

// send writes each line as one datagram, as nginx does.
func (e *testExporter) send(t *testing.T, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if _, err := e.udp.Write([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *testExporter) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + e.metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// waitLines scrapes until ok+malformed lines reach want (datagrams are
// processed asynchronously) and then returns a fresh scrape: one scrape is not
// a snapshot (families are gathered one after another), so the one that saw
// the last line counted may predate its other series.
func (e *testExporter) waitLines(t *testing.T, want float64) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := e.scrape(t)
		got := metricValue(t, s, `nginx_log_lines_total{result="ok"}`) + metricValue(t, s, `nginx_log_lines_total{result="malformed"}`)
		if got == want {
			return e.scrape(t)
		}
		if got > want || time.Now().After(deadline) {
			t.Fatalf("nginx_log_lines_total = %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
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

func TestRunCountsNginxLines(t *testing.T) {
	e := startExporter(t, testEnv())
	if !strings.Contains(e.stdout.String(), "rcvbuf=") {
		t.Errorf("startup line: %q", e.stdout.String())
	}

	// Before any traffic every per-path series exists at 0.
	s := e.scrape(t)
	for _, p := range []string{"tcp", "uds", "tcp-ka", "uds-ka", "other"} {
		for _, series := range []string{
			`nginx_location_requests_total{path="` + p + `",status="200"}`,
			`nginx_location_requests_total{path="` + p + `",status="502"}`,
			`nginx_location_requests_total{path="` + p + `",status="503"}`,
			`nginx_location_requests_total{path="` + p + `",status="504"}`,
			`nginx_location_request_duration_seconds_count{path="` + p + `"}`,
			`nginx_location_upstream_connect_seconds_count{path="` + p + `"}`,
			`nginx_location_upstream_header_seconds_count{path="` + p + `"}`,
			`nginx_location_upstream_response_seconds_count{path="` + p + `"}`,
			`nginx_location_response_bytes_total{path="` + p + `"}`,
		} {
			if v := metricValue(t, s, series); v != 0 {
				t.Errorf("%s = %v before any line", series, v)
			}
		}
	}
	for _, r := range []string{"ok", "malformed"} {
		if v := metricValue(t, s, `nginx_log_lines_total{result="`+r+`"}`); v != 0 {
			t.Errorf("lines %s = %v", r, v)
		}
	}
	for _, want := range []string{"go_goroutines", "process_open_fds"} {
		metricValue(t, s, want) // present, or the test stops naming it
	}

	e.send(t,
		nginxLine("/tcp-ka/ping", "200", "0.002", "0.000", "0.001", "0.002", "183"),
		nginxLine("/tcp-ka/bytes/10", "200", "0.004", "0.001", "0.003", "0.004", "200"),
		nginxLine("/tcp-ka/ping", "502", "0.000", "0.001, 0.002", "-, -", "0.001 : 0.002", "150"),
		nginxLine("/uds/ping", "200", "0.001", "-", "-", "-", "100"),
		nginxLine("/uds", "999", "0.000", "", "", "", "0"),
		nginxLine("/etc/passwd/JUNK-URI", "404", "0.000", "", "", "", "50"),
		nginxLine(`/\u0001/<xyzzy>`, "400", "0.000", "", "", "", "50"),
		`<190>Nov 22 14:03:07 nginx: {"uri":"/tcp/ping","status":"200"`,
		`<190>Nov 22 14:03:07 nginx: GET /tcp/ping 200`,
		nginxLine("/tcp/ping", "200", "fast", "", "", "", "1"),
	)
	s = e.waitLines(t, 10)

	checks := map[string]float64{
		`nginx_log_lines_total{result="ok"}`:        7,
		`nginx_log_lines_total{result="malformed"}`: 3,

		`nginx_location_requests_total{path="tcp-ka",status="200"}`:  2,
		`nginx_location_requests_total{path="tcp-ka",status="502"}`:  1,
		`nginx_location_requests_total{path="uds",status="200"}`:     1,
		`nginx_location_requests_total{path="uds",status="invalid"}`: 1,
		`nginx_location_requests_total{path="other",status="404"}`:   1,
		`nginx_location_requests_total{path="other",status="400"}`:   1,
		`nginx_location_requests_total{path="tcp",status="200"}`:     0, // only malformed /tcp lines

		`nginx_location_request_duration_seconds_count{path="tcp-ka"}`:               3,
		`nginx_location_request_duration_seconds_sum{path="tcp-ka"}`:                 0.006,
		`nginx_location_request_duration_seconds_bucket{path="tcp-ka",le="0.0005"}`:  1,
		`nginx_location_request_duration_seconds_bucket{path="tcp-ka",le="0.002"}`:   2,
		`nginx_location_request_duration_seconds_bucket{path="tcp-ka",le="0.005"}`:   3,
		`nginx_location_request_duration_seconds_count{path="uds"}`:                  2,
		`nginx_location_request_duration_seconds_count{path="other"}`:                2,
		`nginx_location_request_duration_seconds_count{path="tcp"}`:                  0,
		`nginx_location_upstream_connect_seconds_count{path="tcp-ka"}`:               3,
		`nginx_location_upstream_connect_seconds_sum{path="tcp-ka"}`:                 0.004,
		`nginx_location_upstream_header_seconds_count{path="tcp-ka"}`:                2, // "-, -" is not observed
		`nginx_location_upstream_header_seconds_sum{path="tcp-ka"}`:                  0.004,
		`nginx_location_upstream_response_seconds_count{path="tcp-ka"}`:              3,
		`nginx_location_upstream_response_seconds_sum{path="tcp-ka"}`:                0.009,
		`nginx_location_upstream_response_seconds_bucket{path="tcp-ka",le="0.0005"}`: 0,
		`nginx_location_upstream_response_seconds_bucket{path="tcp-ka",le="0.002"}`:  1,
		`nginx_location_upstream_connect_seconds_count{path="uds"}`:                  0, // "-" and ""
		`nginx_location_upstream_response_seconds_count{path="uds"}`:                 0,
		`nginx_location_response_bytes_total{path="tcp-ka"}`:                         533,
		`nginx_location_response_bytes_total{path="uds"}`:                            100,
		`nginx_location_response_bytes_total{path="other"}`:                          100,
		`nginx_location_response_bytes_total{path="tcp"}`:                            0,
	}
	for series, want := range checks {
		if got := metricValue(t, s, series); !near(got, want) {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}

	// Bounded labels: only the catalogue's paths and other, and 3-digit codes or "invalid".
	names, err := readPaths(labCatalogue)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"other": true}
	for _, n := range names {
		known[n] = true
	}
	pathRE := regexp.MustCompile(`path="([^"]*)"`)
	for _, m := range pathRE.FindAllStringSubmatch(s, -1) {
		if !known[m[1]] {
			t.Errorf("unexpected path label %q", m[1])
		}
	}
	statusRE := regexp.MustCompile(`status="([^"]*)"`)
	for _, m := range statusRE.FindAllStringSubmatch(s, -1) {
		if m[1] != "invalid" && parseStatus(m[1]) == 0 {
			t.Errorf("unexpected status label %q", m[1])
		}
	}
	// Only the exporter's own lines: Go/process values may contain "999".
	var own strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "nginx_") {
			own.WriteString(line + "\n")
		}
	}
	for _, junk := range []string{"passwd", "JUNK", "xyzzy", "999"} {
		if strings.Contains(own.String(), junk) {
			t.Errorf("%q leaked into /metrics", junk)
		}
	}
	// The first malformed line is reported once, the rest only counted.
	if got := strings.Count(e.stderr.String(), "malformed line"); got != 1 {
		t.Errorf("stderr reports %d malformed lines, want 1: %q", got, e.stderr.String())
	}
}

// TestRunBurst: a burst well within the socket buffer is counted exactly.
func TestRunBurst(t *testing.T) {
	e := startExporter(t, testEnv())
	const n = 200
	line := nginxLine("/uds-ka/ping", "200", "0.001", "0.000", "0.001", "0.001", "10")
	for range n {
		e.send(t, line)
	}
	s := e.waitLines(t, n)
	if got := metricValue(t, s, `nginx_location_requests_total{path="uds-ka",status="200"}`); got != n {
		t.Errorf("requests = %v, want %d", got, n)
	}
	if got := metricValue(t, s, `nginx_location_response_bytes_total{path="uds-ka"}`); got != 10*n {
		t.Errorf("bytes = %v, want %d", got, 10*n)
	}
}

func TestRunShutsDownCleanly(t *testing.T) {
	e := startExporter(t, testEnv())
	e.cancel()
	select {
	case err := <-e.done:
		e.done <- err
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	if !strings.Contains(e.stdout.String(), "shutdown complete") {
		t.Errorf("stdout %q", e.stdout.String())
	}
	// Both sockets are closed: the ports can be bound again.
	if pc, err := net.ListenPacket("udp", e.syslogAddr); err != nil {
		t.Errorf("UDP port still held: %v", err)
	} else {
		pc.Close()
	}
	if l, err := net.Listen("tcp", e.metricsAddr); err != nil {
		t.Errorf("TCP port still held: %v", err)
	} else {
		l.Close()
	}
}

func TestRunBindErrorsNameTheSetting(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()

	for name, addr := range map[string]string{
		"LOG_EXPORTER_METRICS_ADDR": l.Addr().String(),
		"LOG_EXPORTER_SYSLOG_ADDR":  pc.LocalAddr().String(),
	} {
		env := testEnv()
		env[name] = addr
		err := run(context.Background(), []string{"nginx-log-exporter"}, envFunc(env), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s in use: err = %v", name, addr, err)
		}
	}
}

func TestRunRefusesBadEnv(t *testing.T) {
	for _, name := range []string{"LOG_EXPORTER_SYSLOG_ADDR", "LOG_EXPORTER_METRICS_ADDR"} {
		env := testEnv()
		env[name] = "nonsense"
		err := run(context.Background(), []string{"nginx-log-exporter"}, envFunc(env), io.Discard, io.Discard)
		if err == nil || !strings.HasPrefix(err.Error(), name+`="nonsense"`) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestRunUnknownSubcommand(t *testing.T) {
	err := run(context.Background(), []string{"nginx-log-exporter", "bogus"}, envFunc(nil), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("err = %v", err)
	}
}

// Implausible numbers are malformed and counted as such; they leave every
// sum finite and untouched (issue 14: two 308-digit request_times made the
// duration sum +Inf until restart).
func TestRunRejectsImplausibleNumbers(t *testing.T) {
	e := startExporter(t, testEnv())
	huge := "9" + strings.Repeat("9", 307)
	e.send(t,
		nginxLine("/tcp/ping", "200", huge, "", "", "", "1"),
		nginxLine("/tcp/ping", "200", huge, "", "", "", "1"),
		nginxLine("/tcp/ping", "200", "0.001", "", "", "", "18446744073709551615"),
		nginxLine("/tcp/ping", "200", "0.002", "0.000", "0.001", "0.001", "100"),
	)
	s := e.waitLines(t, 4)
	for series, want := range map[string]float64{
		`nginx_log_lines_total{result="malformed"}`:                 3,
		`nginx_log_lines_total{result="ok"}`:                        1,
		`nginx_location_request_duration_seconds_sum{path="tcp"}`:   0.002,
		`nginx_location_request_duration_seconds_count{path="tcp"}`: 1,
		`nginx_location_response_bytes_total{path="tcp"}`:           100,
		`nginx_location_requests_total{path="tcp",status="200"}`:    1,
	} {
		if got := metricValue(t, s, series); !near(got, want) {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}
