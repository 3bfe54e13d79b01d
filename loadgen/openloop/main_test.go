package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// testPlan: a plan as loadgen/plan.py writes one (its fields), against srv:
// a warm-up and a measured interleaved stream of paths, then one phase of
// the first path alone.
func testPlan(t *testing.T, srv string, rate int, paths ...string) string {
	t.Helper()
	urls := map[string]string{}
	for _, p := range paths {
		urls[p] = srv + "/" + p + "/ping"
	}
	mixPhase := func(round int, start, dur float64) map[string]any {
		return map[string]any{"name": "ping__mix__r" + string(rune('0'+round)), "workload": "ping", "path": "mix",
			"round": round, "phase": map[bool]string{true: "warmup", false: "measure"}[round == 0], "endpoint": "/ping",
			"start_offset_s": start, "duration_s": dur, "paths": paths, "block_s": 1, "urls": urls,
			"progress": "phase mix"}
	}
	plan := map[string]any{
		"testid": "t", "urls": urls, "gap_s": 0.2, "idle": nil, "describe": "a test", "length_s": 4, "first_round": 1,
		"settings": map[string]any{"mode": "rate", "generator": "openloop", "rate": rate, "seed": 7, "paths": paths},
		"phases": []any{
			mixPhase(0, 0, 0.5), mixPhase(1, 0.7, 2),
			map[string]any{"name": "ping__" + paths[0] + "__r1", "workload": "ping", "path": paths[0], "round": 1,
				"phase": "measure", "endpoint": "/ping", "start_offset_s": 2.9, "duration_s": 0.5,
				"url": urls[paths[0]], "progress": "phase one"},
		},
	}
	dir := t.TempDir()
	b, _ := json.Marshal(plan)
	name := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// server: counts requests by path; a path named "bad" answers 502.
type server struct {
	mu  sync.Mutex
	got map[string]int
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")[0]
	s.mu.Lock()
	s.got[path]++
	s.mu.Unlock()
	if path == "bad" {
		w.WriteHeader(http.StatusBadGateway)
	}
	w.Write([]byte("pong"))
}

func runPlan(t *testing.T, plan string, env map[string]string) (map[string]any, error) {
	t.Helper()
	getenv := func(k string) string {
		if k == "PLAN" {
			return plan
		}
		if v, ok := env[k]; ok {
			return v
		}
		return map[string]string{"OPENLOOP_METRICS_ADDR": "off"}[k]
	}
	var out, errb bytes.Buffer
	err := run(context.Background(), nil, getenv, &out, &errb)
	b, rerr := os.ReadFile(loadFile(plan))
	if rerr != nil {
		t.Fatalf("no load.json (run: %v; stderr %s)", err, errb.String())
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc, err
}

func TestRunSendsThePlanOnTimeAndCountsEveryRequest(t *testing.T) {
	s := &server{got: map[string]int{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	paths := []string{"tcp", "uds", "tcp-lo", "uds-lo"}
	doc, err := runPlan(t, testPlan(t, srv.URL, 400, paths...), nil)
	if err != nil {
		t.Fatal(err)
	}
	// 400/s: 200 in the warm-up, 800 in the stream, 200 alone.
	if got := s.got["tcp"]; got != 50+200+200 {
		t.Errorf("server saw %d requests to tcp, want 450", got)
	}
	for _, p := range paths[1:] {
		if s.got[p] != 250 {
			t.Errorf("server saw %d requests to %s, want 250", s.got[p], p)
		}
	}
	phases := doc["phases"].([]any)
	stream := phases[1].(map[string]any)
	for _, k := range []string{"url", "urls", "progress"} {
		if _, ok := stream[k]; ok {
			t.Errorf("load.json's phase keeps the plan's %q", k)
		}
	}
	if stream["requests"].(float64) != 800 || stream["failed_rate"].(float64) != 0 {
		t.Errorf("stream: %v requests, failed %v", stream["requests"], stream["failed_rate"])
	}
	by := stream["by_path"].(map[string]any)
	for _, p := range paths {
		blocks := by[p].(map[string]any)["blocks"].([]any)
		if len(blocks) != 2 {
			t.Fatalf("%s: %d blocks, want 2", p, len(blocks))
		}
		for b, bl := range blocks {
			blk := bl.(map[string]any)
			// Each path once per cycle of 4: 400 a second, 100 a block each.
			if blk["requests"].(float64) != 100 || blk["p50"] == nil {
				t.Errorf("%s block %d: %v requests, p50 %v", p, b, blk["requests"], blk["p50"])
			}
			h, err := hdrhistogram.Decode([]byte(blk["hdr"].(string)))
			if err != nil || h.TotalCount() != 100 || float64(h.ValueAtQuantile(50))/1000 != blk["p50"].(float64) {
				t.Errorf("%s block %d: histogram %v (%v) does not hold the block", p, b, h, err)
			}
		}
	}
	if warm := phases[0].(map[string]any)["by_path"].(map[string]any)["tcp"].(map[string]any)["blocks"].([]any); len(warm) != 0 {
		t.Errorf("the warm-up has %d blocks, want none", len(warm))
	}
	if late := stream["late_rate"].(float64); late > 0.5 {
		t.Errorf("%.0f%% of requests late at 400/s", 100*late)
	}
}

func TestFailuresAreCountedNotTimed(t *testing.T) {
	s := &server{got: map[string]int{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	doc, err := runPlan(t, testPlan(t, srv.URL, 200, "tcp", "bad"), nil)
	if !errors.Is(err, errFailed) {
		t.Errorf("run: %v, want %v", err, errFailed)
	}
	by := doc["phases"].([]any)[1].(map[string]any)["by_path"].(map[string]any)
	bad := by["bad"].(map[string]any)
	if bad["failed_rate"].(float64) != 1 || len(bad["duration_ms"].(map[string]any)) != 0 {
		t.Errorf("bad: failed %v, durations %v: a failure must be counted, never timed", bad["failed_rate"], bad["duration_ms"])
	}
	for _, bl := range bad["blocks"].([]any) {
		if blk := bl.(map[string]any); blk["p50"] != nil || blk["failed"].(float64) != blk["requests"].(float64) {
			t.Errorf("bad's block: %v", blk)
		}
	}
	if doc["thresholds_failed"].([]any)[0] != "http_req_failed" {
		t.Errorf("thresholds_failed: %v", doc["thresholds_failed"])
	}
}

func TestSegmentsSplitTheStreamExactly(t *testing.T) {
	s := &server{got: map[string]int{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	paths := []string{"tcp", "uds", "tcp-ka"}
	plan := testPlan(t, srv.URL, 300, paths...)
	var blocks [2]map[string][]float64
	for seg := range 2 {
		doc, err := runPlan(t, plan, map[string]string{"OPENLOOP_SEGMENT": []string{"0/2", "1/2"}[seg]})
		if err != nil {
			t.Fatal(err)
		}
		blocks[seg] = map[string][]float64{}
		for p, v := range doc["phases"].([]any)[1].(map[string]any)["by_path"].(map[string]any) {
			for _, bl := range v.(map[string]any)["blocks"].([]any) {
				blocks[seg][p] = append(blocks[seg][p], bl.(map[string]any)["requests"].(float64))
			}
		}
	}
	// Together the two segments sent the stream once: 300/s for 2 s, each
	// path 100 a block; each segment every other request.
	for _, p := range paths {
		for b := range 2 {
			if sum := blocks[0][p][b] + blocks[1][p][b]; sum != 100 {
				t.Errorf("%s block %d: %v + %v requests, want 100", p, b, blocks[0][p][b], blocks[1][p][b])
			}
		}
	}
	// tcp: a third of the warm-up's 150 and of the stream's 600, and 150 alone.
	if s.got["tcp"] != 50+200+150 {
		t.Errorf("server saw %d requests to tcp, want 400", s.got["tcp"])
	}
}

func TestTheStreamIsBalancedInEveryCycle(t *testing.T) {
	p := &plan{rate: 1000, seed: 42}
	ph := &phase{Path: mix, Paths: []string{"a", "b", "c", "d", "e"}, Round: 1, BlockS: 1, DurationS: 3}
	firsts := map[string]int{}
	for c := range 200 {
		seen := map[string]bool{}
		for j := range 5 {
			path, _ := p.target(ph, c*5+j)
			seen[path] = true
			if j == 0 {
				firsts[path]++
			}
		}
		if len(seen) != 5 {
			t.Fatalf("cycle %d holds %v, not every path once", c, seen)
		}
	}
	for path, n := range firsts {
		if n < 20 || n > 60 { // 40 expected of 200 cycles
			t.Errorf("%s first in %d of 200 cycles: the order is not drawn", path, n)
		}
	}
	if _, b := p.target(ph, 2999); b != 2 {
		t.Errorf("the last request is in block %d, want 2", b)
	}
	if _, b := p.target(ph, 999); b != 0 {
		t.Errorf("request 999 (due at 0.999 s) is in block %d, want 0", b)
	}
}

func TestBadSettingsAreRefusedByName(t *testing.T) {
	for env, want := range map[string]string{
		"OPENLOOP_SEGMENT=2/2":        "OPENLOOP_SEGMENT",
		"OPENLOOP_SEGMENT=x":          "OPENLOOP_SEGMENT",
		"OPENLOOP_TIMEOUT=0s":         "OPENLOOP_TIMEOUT",
		"OPENLOOP_CONNECTIONS=0":      "OPENLOOP_CONNECTIONS",
		"OPENLOOP_CONNECTIONS=many":   "OPENLOOP_CONNECTIONS",
		"OPENLOOP_MAX_IN_FLIGHT=1000": "OPENLOOP_CONNECTIONS",
		"OPENLOOP_SENDERS=0":          "OPENLOOP_SENDERS",
		"OPENLOOP_SENDERS=all":        "OPENLOOP_SENDERS",
		"OPENLOOP_SCRAPE_WAIT=soon":   "OPENLOOP_SCRAPE_WAIT",
		"OPENLOOP_LOG_LOAD_JSON=yes":  "OPENLOOP_LOG_LOAD_JSON",
		"PLAN=":                       "PLAN",
		"PLAN=/nonexistent/plan.json": "PLAN",
	} {
		k, v, _ := strings.Cut(env, "=")
		getenv := func(name string) string {
			if name == k {
				return v
			}
			return map[string]string{"PLAN": "plan.json"}[name]
		}
		err := run(context.Background(), nil, getenv, &bytes.Buffer{}, &bytes.Buffer{})
		var se settingError
		if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &se) {
			t.Errorf("%s: %v, want a setting error naming %s", env, err, want)
		}
	}
}

func TestAPlanItCannotRunIsRefused(t *testing.T) {
	dir := t.TempDir()
	for name, doc := range map[string]string{
		"max":         `{"testid":"t","settings":{"mode":"max"},"phases":[{"name":"ping__tcp__r1","path":"tcp","duration_s":1,"url":"http://x/"}]}`,
		"connections": `{"testid":"t","settings":{"mode":"sweep","rate":1},"phases":[{"name":"ping__tcp__s1__r1","path":"tcp","duration_s":1,"connections":4,"url":"http://x/"}]}`,
		"no url":      `{"testid":"t","settings":{"mode":"rate","rate":1},"phases":[{"name":"ping__tcp__r1","path":"tcp","duration_s":1}]}`,
		"not json":    `{`,
	} {
		f := filepath.Join(dir, "plan.json")
		os.WriteFile(f, []byte(doc), 0o644)
		if _, err := readPlan(f); err == nil {
			t.Errorf("%s: a plan it cannot run was taken", name)
		}
	}
}

func TestLoadFileSitsBesideThePlan(t *testing.T) {
	for plan, want := range map[string]string{"/r/x/plan.json": "/r/x/load.json", "/r/x/plan-r5.json": "/r/x/load-r5.json",
		"/r/x/plan-s3.json": "/r/x/load-s3.json"} {
		if got := loadFile(plan); got != want {
			t.Errorf("loadFile(%s) = %s, want %s", plan, got, want)
		}
	}
}

func TestMetricsWaitForAScrapeAfterTheEnd(t *testing.T) {
	m := newMetrics("t")
	if !m.awaitScrape(context.Background(), time.Now(), time.Second) {
		t.Error("never scraped: it should not wait")
	}
	m.scraped.Store(time.Now().Add(-time.Minute).UnixNano())
	start := time.Now()
	if m.awaitScrape(context.Background(), time.Now(), 200*time.Millisecond) || time.Since(start) < 200*time.Millisecond {
		t.Error("scraped before the end only: it should wait its time and say no")
	}
	go func() { time.Sleep(100 * time.Millisecond); m.scraped.Store(time.Now().UnixNano()) }()
	if !m.awaitScrape(context.Background(), time.Now(), 5*time.Second) {
		t.Error("scraped after the end: it should say yes")
	}
}

func TestPrometheusScrapesTheRun(t *testing.T) {
	s := &server{got: map[string]int{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	_, body, err := runScraped(t, testPlan(t, srv.URL, 100, "tcp", "bad"), map[string]string{"OPENLOOP_SCRAPE_WAIT": "5s"})
	if !errors.Is(err, errFailed) {
		t.Errorf("run: %v, want %v", err, errFailed)
	}
	// bad: 100 in the stream; tcp: 100 there and 50 alone, both measured in round 1.
	for _, want := range []string{
		`openloop_requests_total{level="",path="bad",phase="measure",round="1",status="502",step="",testid="t",workload="ping"} 100`,
		`openloop_request_duration_seconds_count{level="",path="tcp",phase="measure",round="1",step="",testid="t",workload="ping"} 150`,
		`openloop_requests_in_flight{testid="t"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the last scrape lacks %s", want)
		}
	}
	if strings.Contains(body, `openloop_request_duration_seconds_count{level="",path="bad"`) {
		t.Error("failed requests were timed")
	}
}

func TestCheckReadsThePlanAndSendsNothing(t *testing.T) {
	s := &server{got: map[string]int{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	plan := testPlan(t, srv.URL, 100, "tcp", "uds")
	var out bytes.Buffer
	getenv := func(k string) string { return map[string]string{"PLAN": plan}[k] }
	if err := run(context.Background(), []string{"check"}, getenv, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	// 100/s: 50 in the warm-up, 200 in the stream, 50 alone.
	if want := plan + ": 3 phases, 300 requests: a test\n"; out.String() != want || len(s.got) != 0 {
		t.Errorf("check said %q (want %q); the server saw %v", out.String(), want, s.got)
	}
	if _, err := os.Stat(loadFile(plan)); err == nil {
		t.Error("check wrote load.json")
	}
	var se settingError
	if err := run(context.Background(), []string{"go"}, getenv, &out, &bytes.Buffer{}); !errors.As(err, &se) {
		t.Errorf("an unknown argument: %v, want a setting error", err)
	}
}

// What counts as a success (200-399, as k6's default), how a request
// without a response is named, and how a phase counts them: every kind of
// no response in "0", each also by its own name; the run's threshold passes
// at 1% failed and fails above it.
func TestOutcomesAreCountedByKind(t *testing.T) {
	for status, ok := range map[int]bool{199: false, 200: true, 399: true, 400: false, 502: false} {
		if (outcome{status: status}).ok() != ok {
			t.Errorf("status %d: ok %v, want %v", status, !ok, ok)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	_, err = http.Get("http://" + closed + "/")
	if o := outcomeOf(0, err); o.failure != "refused" || o.key() != "refused" {
		t.Errorf("a connection refused: %+v (%v)", o, err)
	}

	ph := &phase{Name: "ping__tcp__r1", Path: "tcp", Round: 1, DurationS: 1}
	p := &plan{Testid: "t", Phases: []phase{*ph}}
	rec := newPhaseRecord(ph, time.Second)
	for i, o := range []outcome{{failure: "refused"}, {failure: "refused"}, {failure: "reset"}, {status: 502}} {
		rec.add("tcp", -1, o, times{sent: time.Millisecond, due: 3 * time.Millisecond, queue: time.Duration(i) * time.Millisecond})
	}
	for range 396 {
		rec.add("tcp", -1, outcome{status: 200}, times{sent: time.Millisecond, due: time.Millisecond})
	}
	got := phaseJSON(p, ph, rec)["statuses"].(map[string]int64)
	want := map[string]int64{"502": 1, "503": 0, "504": 0, "0": 3, "refused": 2, "reset": 1, "timeout": 0, "connect_timeout": 0}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("statuses[%q] = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if doc := loadJSON(p, start{at: time.UnixMilli(0)}, []*phaseRecord{rec}); len(doc["thresholds_failed"].([]string)) != 0 || doc["totals"].(map[string]any)["failed_rate"] != 0.01 {
		t.Errorf("4 of 400 failed (1%%): %v, %v; want the threshold passed", doc["totals"], doc["thresholds_failed"])
	}
	rec.add("tcp", -1, outcome{status: 503}, times{sent: time.Millisecond, due: time.Millisecond})
	if doc := loadJSON(p, start{at: time.UnixMilli(0)}, []*phaseRecord{rec}); len(doc["thresholds_failed"].([]string)) != 1 {
		t.Errorf("5 of 401 failed: thresholds_failed %v, want http_req_failed", doc["thresholds_failed"])
	}
}

// A pod's messages share load.json's stream: on stderr, "more than 1% of
// requests failed" landed inside load.json in a pod's log (the runtime reads
// the two pipes apart) and scripts/k8s.sh read broken JSON.
func TestMessagesShareTheStreamWhereLoadJSONIsLogged(t *testing.T) {
	var out, errs bytes.Buffer
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "OPENLOOP_LOG_LOAD_JSON" {
				return v
			}
			return ""
		}
	}
	if w := messages(env("true"), &out, &errs); w != &out {
		t.Errorf("OPENLOOP_LOG_LOAD_JSON=true: messages on stderr, want stdout")
	}
	for _, v := range []string{"", "false", "maybe"} {
		if w := messages(env(v), &out, &errs); w != &errs {
			t.Errorf("OPENLOOP_LOG_LOAD_JSON=%q: messages on stdout, want stderr", v)
		}
	}
}
