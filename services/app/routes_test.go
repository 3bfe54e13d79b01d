package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
)

type handlerFixture struct {
	h     http.Handler
	ready *Readiness
	file  string
	size  int64
}

func newHandler(t *testing.T) *handlerFixture {
	t.Helper()
	file := filepath.Join(t.TempDir(), "download.bin")
	const size = 200000
	if err := writeDownloadFile(file, size); err != nil {
		t.Fatal(err)
	}
	ready := &Readiness{}
	h := NewServer(Deps{Metrics: NewMetrics(), Readiness: ready, DownloadFile: file, CPUMaxIterations: 1000})
	return &handlerFixture{h: h, ready: ready, file: file, size: size}
}

func (f *handlerFixture) do(method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

func jsonBody(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type = %q, body %q", ct, rec.Body.String())
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q: %v", rec.Body.String(), err)
	}
	return m
}

func TestJSONRoutes(t *testing.T) {
	f := newHandler(t)
	digest := [32]byte{}
	for range 3 {
		digest = sha256.Sum256(digest[:])
	}
	tests := []struct {
		path string
		code int
		want string
	}{
		{"/ping", 200, `{"message":"pong"}`},
		{"/healthz", 200, `{"status":"ok"}`},
		{"/readyz", 200, `{"status":"ready"}`},
		{"/sleep/0", 200, `{"slept_ms":0}`},
		{"/sleep/5", 200, `{"slept_ms":5}`},
		{"/cpu/3", 200, `{"digest":"` + hex.EncodeToString(digest[:]) + `","iterations":3}`},
	}
	for _, tc := range tests {
		rec := f.do("GET", tc.path)
		if rec.Code != tc.code {
			t.Errorf("%s: code %d, body %s", tc.path, rec.Code, rec.Body)
			continue
		}
		got := jsonBody(t, rec)
		var want map[string]any
		_ = json.Unmarshal([]byte(tc.want), &want)
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		if !bytes.Equal(gb, wb) {
			t.Errorf("%s: body %s, want %s", tc.path, gb, wb)
		}
	}
}

func TestReadyzWhileDraining(t *testing.T) {
	f := newHandler(t)
	f.ready.SetDraining()
	rec := f.do("GET", "/readyz")
	if rec.Code != 503 || jsonBody(t, rec)["status"] != "shutting down" {
		t.Fatalf("code %d body %s", rec.Code, rec.Body)
	}
	if rec := f.do("GET", "/healthz"); rec.Code != 200 {
		t.Fatalf("healthz while draining: %d", rec.Code)
	}
}

func TestBytes(t *testing.T) {
	f := newHandler(t)
	for _, n := range []int{0, 1, 1000, maxBytes} {
		rec := f.do("GET", "/bytes/"+strconv.Itoa(n))
		if rec.Code != 200 || rec.Body.Len() != n {
			t.Fatalf("n=%d: code %d len %d", n, rec.Code, rec.Body.Len())
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/octet-stream" {
			t.Fatalf("Content-Type %q", ct)
		}
		if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(n) {
			t.Fatalf("Content-Length %q", cl)
		}
		if bytes.IndexByte(rec.Body.Bytes(), 0) >= 0 {
			t.Fatal("payload contains zero bytes")
		}
	}
}

// The replay route has the logged shape: the bytes asked for, not before the
// time asked for; out of range, a 400 naming the parameter.
func TestReplay(t *testing.T) {
	f := newHandler(t)
	for _, tc := range []struct{ bytes, us int }{{0, 0}, {1234, 0}, {maxBytes, 0}, {10, 30000}} {
		start := time.Now()
		rec := f.do("GET", fmt.Sprintf("/replay/%d/%d", tc.bytes, tc.us))
		took := time.Since(start)
		if rec.Code != 200 || rec.Body.Len() != tc.bytes || rec.Header().Get("Content-Length") != strconv.Itoa(tc.bytes) {
			t.Fatalf("%+v: code %d, %d bytes, Content-Length %q", tc, rec.Code, rec.Body.Len(), rec.Header().Get("Content-Length"))
		}
		if took < time.Duration(tc.us)*time.Microsecond {
			t.Fatalf("%+v: answered after %v, before the %d us asked", tc, took, tc.us)
		}
	}
	for path, name := range map[string]string{
		fmt.Sprintf("/replay/%d/0", maxBytes+1):        "bytes",
		"/replay/-1/0":                                 "bytes",
		fmt.Sprintf("/replay/0/%d", maxSleepMS*1000+1): "us",
		"/replay/0/x":                                  "us",
	} {
		rec := f.do("GET", path)
		if msg, _ := jsonBody(t, rec)["error"].(string); rec.Code != 400 || !strings.Contains(msg, "parameter "+name) {
			t.Errorf("%s: code %d, error %q, want 400 naming %s", path, rec.Code, msg, name)
		}
	}
}

func TestDownloads(t *testing.T) {
	f := newHandler(t)
	want, err := os.ReadFile(f.file)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(want)) != f.size || bytes.IndexByte(want, 0) >= 0 {
		t.Fatalf("download file has %d bytes (want %d) or zero bytes", len(want), f.size)
	}
	for _, p := range []string{"/download/file", "/download/stream"} {
		rec := f.do("GET", p)
		if rec.Code != 200 || !bytes.Equal(rec.Body.Bytes(), want) {
			t.Errorf("%s: code %d, %d bytes", p, rec.Code, rec.Body.Len())
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/octet-stream" {
			t.Errorf("%s: Content-Type %q", p, ct)
		}
		if cl := rec.Header().Get("Content-Length"); cl != strconv.FormatInt(f.size, 10) {
			t.Errorf("%s: Content-Length %q", p, cl)
		}
	}
}

func TestDownloadStreamMissingFile(t *testing.T) {
	h := NewServer(Deps{DownloadFile: filepath.Join(t.TempDir(), "missing"), CPUMaxIterations: 10})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/download/stream", nil))
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), `"error"`) {
		t.Fatalf("code %d body %s", rec.Code, rec.Body)
	}
}

func TestBadInput(t *testing.T) {
	f := newHandler(t)
	long := "/" + strings.Repeat("x", 500)
	tests := []struct {
		method, path string
		code         int
		wantMsg      []string
	}{
		{"GET", "/bytes/abc", 400, []string{"n=", "not an integer"}},
		{"GET", "/bytes/-1", 400, []string{"n=-1", "negative"}},
		{"GET", "/bytes/16777217", 400, []string{"n=16777217", "16777216"}},
		{"GET", "/bytes/99999999999999999999", 400, []string{"out of range", "16777216"}},
		{"GET", "/bytes/1.5", 400, []string{"not an integer"}},
		{"GET", "/cpu/0", 400, []string{"iterations=0", "minimum 1"}},
		{"GET", "/cpu/-3", 400, []string{"iterations=-3", "negative"}},
		{"GET", "/cpu/1001", 400, []string{"iterations=1001", "1000"}},
		{"GET", "/cpu/x", 400, []string{"iterations=", "not an integer"}},
		{"GET", "/cpu/99999999999999999999", 400, []string{"out of range"}},
		{"GET", "/sleep/-1", 400, []string{"ms=-1", "negative"}},
		{"GET", "/sleep/10001", 400, []string{"ms=10001", "10000"}},
		{"GET", "/sleep/soon", 400, []string{"ms=", "not an integer"}},
		{"GET", "/sleep/99999999999999999999", 400, []string{"out of range"}},
		{"GET", "/nope", 404, []string{"no route for GET /nope"}},
		{"GET", "/bytes", 404, []string{"no route"}},
		{"GET", long, 404, []string{"no route for GET /xxx"}},
		{"POST", "/ping", 405, []string{"POST", "/ping"}},
		{"DELETE", "/bytes/5", 405, []string{"DELETE"}},
		{"PUT", "/metrics", 405, []string{"PUT"}},
	}
	for _, tc := range tests {
		rec := f.do(tc.method, tc.path)
		if rec.Code != tc.code {
			t.Errorf("%s %s: code %d body %s", tc.method, tc.path, rec.Code, rec.Body)
			continue
		}
		msg, _ := jsonBody(t, rec)["error"].(string)
		for _, w := range tc.wantMsg {
			if !strings.Contains(msg, w) {
				t.Errorf("%s %s: error %q lacks %q", tc.method, tc.path, msg, w)
			}
		}
		if len(msg) > 200 {
			t.Errorf("%s %s: echoed path not truncated (%d bytes)", tc.method, tc.path, len(msg))
		}
	}
}

func TestRecoveryAnswersJSON(t *testing.T) {
	r := gin.New()
	r.Use(NewMetrics().middleware(), recovery(nil))
	r.GET("/boom", func(*gin.Context) { panic("boom") })
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest("GET", "/boom", nil))
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), `"error"`) {
		t.Fatalf("code %d body %s", rec.Code, rec.Body)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	f := newHandler(t)
	f.do("GET", "/ping")
	rec := f.do("GET", "/metrics")
	body := rec.Body.String()
	for _, want := range []string{
		`app_http_requests_total{code="200",listener="tcp",route="/ping"} 1`,
		`app_http_request_duration_seconds_bucket{code="200",listener="tcp",route="/ping",le="5e-05"}`,
		`app_http_requests_in_flight{listener="unix"} 0`,
		`app_connections_accepted_total{listener="unix",peer="local"} 0`,
		`app_connections_accepted_total{listener="tcp",peer="loopback"} 0`,
		`app_connections_accepted_total{listener="tcp",peer="network"} 0`,
		`app_connections_open{listener="tcp"} 0`,
		"go_goroutines",
		"process_cpu_seconds_total",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// fakeRF records whether ReadFrom (net/http's sendfile path) was reached.
type fakeRF struct {
	*httptest.ResponseRecorder
	used bool
}

func (f *fakeRF) ReadFrom(r io.Reader) (int64, error) {
	f.used = true
	return io.Copy(struct{ io.Writer }{f.ResponseRecorder}, r)
}

func TestReadFromWriterReachesUnderlyingReaderFrom(t *testing.T) {
	under := &fakeRF{ResponseRecorder: httptest.NewRecorder()}
	c, _ := gin.CreateTestContext(under)
	c.Status(http.StatusOK)
	n, err := io.Copy(readFromWriter{c.Writer}, struct{ io.Reader }{strings.NewReader("hello")})
	if err != nil || n != 5 || !under.used || under.Body.String() != "hello" || c.Writer.Status() != 200 {
		t.Fatalf("n=%d err=%v used=%v body=%q", n, err, under.used, under.Body)
	}
}

// An unsatisfiable Range gets a JSON 416 like every other error (issue 14:
// http.ServeFile's text/plain answer), and a good one still works.
func TestDownloadRange(t *testing.T) {
	f := newHandler(t)
	req := httptest.NewRequest("GET", "/download/file", nil)
	req.Header.Set("Range", "bytes=999999999-")
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestedRangeNotSatisfiable {
		t.Fatalf("code %d, body %q", rec.Code, rec.Body)
	}
	if msg, _ := jsonBody(t, rec)["error"].(string); !strings.Contains(msg, "range") {
		t.Errorf("error %q does not mention the range", msg)
	}

	req = httptest.NewRequest("GET", "/download/file", nil)
	req.Header.Set("Range", "bytes=10-19")
	rec = httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	want, _ := os.ReadFile(f.file)
	if rec.Code != http.StatusPartialContent || !bytes.Equal(rec.Body.Bytes(), want[10:20]) {
		t.Errorf("bytes=10-19: code %d, body %q", rec.Code, rec.Body)
	}
}

// GET /client: the same client over the TCP port and over the socket, where
// the peer has no address, as long as nginx sends X-Real-IP or X-Forwarded-For.
func TestClientAddress(t *testing.T) {
	f := newHandler(t)
	for _, tc := range []struct {
		remote, real, fwd string
		client, from      string
	}{
		{"172.18.0.5:41234", "", "", "172.18.0.5", "peer"},
		{"@", "", "", "", "peer"},
		{"", "", "", "", "peer"},
		{"@", "", "203.0.113.7, 10.0.0.1", "203.0.113.7", "X-Forwarded-For"},
		{"172.18.0.5:41234", "", "203.0.113.7", "203.0.113.7", "X-Forwarded-For"},
		{"@", "203.0.113.9", "203.0.113.7", "203.0.113.9", "X-Real-IP"},
		{"[::1]:8080", "", " ", "::1", "peer"},
	} {
		req := httptest.NewRequest(http.MethodGet, "/client", nil)
		req.RemoteAddr = tc.remote
		if tc.real != "" {
			req.Header.Set("X-Real-IP", tc.real)
		}
		if tc.fwd != "" {
			req.Header.Set("X-Forwarded-For", tc.fwd)
		}
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%+v: status %d", tc, rec.Code)
		}
		m := jsonBody(t, rec)
		if m["client"] != tc.client || m["from"] != tc.from {
			t.Errorf("%+v: got client %q from %q", tc, m["client"], m["from"])
		}
	}
}
