package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// inFlight reads app_http_requests_in_flight on both listeners, minus the
// scrape itself.
func (a *testApp) inFlight(t *testing.T) float64 {
	t.Helper()
	code, body := doGet(tcpClient(false), a.url("/metrics"))
	if code != 200 {
		t.Fatalf("scrape: %d %s", code, body)
	}
	return metricValue(t, body, `app_http_requests_in_flight{listener="tcp"}`) +
		metricValue(t, body, `app_http_requests_in_flight{listener="unix"}`) - 1
}

// waitInFlight waits until n requests (the scrape left out) are in flight.
func (a *testApp) waitInFlight(t *testing.T, n float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for a.inFlight(t) != n {
		if time.Now().After(deadline) {
			t.Fatalf("in flight: %v, want %v", a.inFlight(t), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// getCtx is doGet with a context the test can cancel.
func getCtx(ctx context.Context, c *http.Client, url string) (int, string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A /cpu request whose client has gone stops working (issue 14: 400 abandoned
// requests kept the CPU busy long after nginx had given up on them).
func TestCPUStopsWhenClientGoes(t *testing.T) {
	env := testEnv(socketDir(t))
	env["APP_CPU_MAX_ITERATIONS"] = "100000000" // tens of seconds of SHA-256
	env["APP_CPU_CONCURRENCY"] = "1"
	a := startApp(t, env)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { code, _ := getCtx(ctx, tcpClient(false), a.url("/cpu/100000000")); done <- code }()
	a.waitInFlight(t, 1)
	cancel()
	<-done

	// The handler notices and returns: the request is counted as 499 and the
	// slot is free for the next one.
	start := time.Now()
	a.waitInFlight(t, 0)
	if code, body := a.get(t, "tcp", "/cpu/1"); code != 200 {
		t.Fatalf("/cpu/1 after the abandoned request: %d %s", code, body)
	}
	_, m := a.get(t, "tcp", "/metrics")
	if v := metricValue(t, m, `app_http_requests_total{code="499",listener="tcp",route="/cpu/:iterations"}`); v != 1 {
		t.Errorf("abandoned /cpu counted %v times as 499, want 1", v)
	}
	t.Logf("abandoned /cpu request stopped %v after its client left", time.Since(start))
}

// At most APP_CPU_CONCURRENCY /cpu requests run and APP_CPU_QUEUE wait; the
// next one is answered 503 at once with a JSON reason.
func TestCPUConcurrencyBounded(t *testing.T) {
	env := testEnv(socketDir(t))
	env["APP_CPU_MAX_ITERATIONS"] = "100000000"
	env["APP_CPU_CONCURRENCY"] = "1"
	env["APP_CPU_QUEUE"] = "2"
	a := startApp(t, env)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 3 { // one runs, two wait
		wg.Add(1)
		go func() { defer wg.Done(); getCtx(ctx, tcpClient(false), a.url("/cpu/100000000")) }()
	}
	defer func() { cancel(); wg.Wait() }()
	a.waitInFlight(t, 3)

	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer rcancel()
	code, body := getCtx(rctx, tcpClient(false), a.url("/cpu/1"))
	var e struct {
		Error string `json:"error"`
	}
	if code != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &e) != nil ||
		!strings.Contains(e.Error, "APP_CPU_CONCURRENCY") || !strings.Contains(e.Error, "APP_CPU_QUEUE") {
		t.Fatalf("4th /cpu request: %d %q, want 503 with a JSON error naming the limits", code, body)
	}
	// Other routes are not limited.
	if code, _ := a.get(t, "unix", "/ping"); code != 200 {
		t.Errorf("/ping while /cpu is full: %d", code)
	}
}

// A waiting /cpu request gives up after APP_CPU_QUEUE_TIMEOUT with a 503,
// long before nginx's proxy_read_timeout would answer for it.
func TestCPUQueueTimeout(t *testing.T) {
	env := testEnv(socketDir(t))
	env["APP_CPU_MAX_ITERATIONS"] = "100000000"
	env["APP_CPU_CONCURRENCY"] = "1"
	env["APP_CPU_QUEUE_TIMEOUT"] = "200ms"
	a := startApp(t, env)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); getCtx(ctx, tcpClient(false), a.url("/cpu/100000000")) }()
	defer func() { cancel(); <-done }()
	a.waitInFlight(t, 1)

	rctx, rcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer rcancel()
	start := time.Now()
	code, body := getCtx(rctx, tcpClient(false), a.url("/cpu/1"))
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "APP_CPU_QUEUE_TIMEOUT") {
		t.Fatalf("waiting /cpu request: %d %q after %v, want 503 naming APP_CPU_QUEUE_TIMEOUT", code, body, time.Since(start))
	}
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Errorf("gave up after %v, want about 200ms", d)
	}
}
