package main

// Tests against a reference server whose answers are known in advance: each
// checks a figure of load.json (or of the metrics) against the value the
// server's settings and the plan fix, within a stated tolerance. The machine
// is shared and noisy, so the tolerances are generous on the slow side; each
// still fails under the bug it is named for (tests/mutations/mutations.toml).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// answer: how the reference server answers one path: after delay; every
// failEvery-th request on the path (counted from 1 in arrival order) with
// status, the others 200.
type answer struct {
	delay     time.Duration
	failEvery int
	status    int
}

// refServer answers each path (a URL's first segment) as told and notes
// every request's arrival time per path.
type refServer struct {
	*httptest.Server
	answers  map[string]answer
	mu       sync.Mutex
	arrivals map[string][]time.Time
}

func newRefServer(t *testing.T, answers map[string]answer) *refServer {
	t.Helper()
	s := &refServer{answers: answers, arrivals: map[string][]time.Time{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *refServer) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	path, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	s.mu.Lock()
	s.arrivals[path] = append(s.arrivals[path], at)
	n := len(s.arrivals[path])
	s.mu.Unlock()
	a, ok := s.answers[path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	time.Sleep(a.delay)
	if a.failEvery > 0 && n%a.failEvery == 0 {
		w.WriteHeader(a.status)
	}
	w.Write([]byte("pong"))
}

// url: where the server answers path.
func (s *refServer) url(path string) string { return s.URL + "/" + path + "/ping" }

// got: path's arrival times so far, in order; and forgets them.
func (s *refServer) got(path string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.arrivals[path]
	delete(s.arrivals, path)
	slices.SortFunc(a, time.Time.Compare)
	return a
}

// freeAddr: a loopback address no one listens on (just now).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// alone: a phase of one path, as loadgen/plan.py writes it.
func alone(path, url string, dur float64) map[string]any {
	return map[string]any{"name": "ping__" + path + "__r1", "workload": "ping", "path": path, "round": 1,
		"phase": "measure", "endpoint": "/ping", "start_offset_s": 0, "duration_s": dur, "url": url,
		"progress": "phase " + path}
}

// stream: a measured interleaved stream of paths, in blocks of 1 s.
func stream(urls map[string]string, dur float64) map[string]any {
	paths := make([]string, 0, len(urls))
	for p := range urls {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	return map[string]any{"name": "ping__mix__r1", "workload": "ping", "path": "mix", "round": 1,
		"phase": "measure", "endpoint": "/ping", "start_offset_s": 0, "duration_s": dur, "paths": paths,
		"block_s": 1, "urls": urls, "progress": "phase mix"}
}

// knownPlan: a plan of one phase at rate; its file.
func knownPlan(t *testing.T, rate int, ph map[string]any) string {
	t.Helper()
	plan := map[string]any{"testid": "t", "urls": map[string]string{}, "gap_s": 0, "idle": nil, "describe": "known answers",
		"settings": map[string]any{"mode": "rate", "generator": "openloop", "rate": rate, "seed": 7},
		"phases":   []any{ph}}
	b, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// runScraped: runPlan with the metrics on a free port, scraped every 100 ms
// as Prometheus would until the run ends (so that it waits for a last
// scrape); load.json, the last scrape and the run's error.
func runScraped(t *testing.T, plan string, env map[string]string) (map[string]any, string, error) {
	t.Helper()
	addr := freeAddr(t)
	env["OPENLOOP_METRICS_ADDR"] = addr
	type result struct {
		doc map[string]any
		err error
	}
	done := make(chan result)
	go func() {
		doc, err := runPlan(t, plan, env)
		done <- result{doc, err}
	}()
	var body string
	for range 150 {
		select {
		case r := <-done:
			return r.doc, body, r.err
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
		}
	}
	t.Fatal("the run did not end")
	return nil, "", nil
}

// sumOf: the sum of a metric's series in a scrape.
func sumOf(t *testing.T, body, name string) float64 {
	t.Helper()
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("scrape line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

func num(v any) float64 { return v.(float64) }

func ms(doc map[string]any, key, q string) float64 {
	return num(doc[key].(map[string]any)[q])
}

// A path answering after 2 ms: every duration, from the send and from the
// due time, is at least 2 ms, and on a quiet path close to it.
func TestDurationsAreTheServersDelay(t *testing.T) {
	const delay = 2.0 // ms
	srv := newRefServer(t, map[string]answer{"tcp": {delay: 2 * time.Millisecond}})
	doc, err := runPlan(t, knownPlan(t, 200, alone("tcp", srv.url("tcp"), 1)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ph := doc["phases"].([]any)[0].(map[string]any)
	if n := len(srv.got("tcp")); n != 200 || num(ph["requests"]) != 200 {
		t.Fatalf("200/s for 1 s: the server saw %d, load.json says %v, want 200", n, ph["requests"])
	}
	for _, c := range []struct {
		key, q  string
		lo, top float64
	}{
		{"duration_ms", "p50", delay, 2*delay + 1}, // loopback and the race detector: well under 1 ms more
		{"duration_ms", "p99", delay, 15 * delay},
		{"scheduled_ms", "p50", delay, 2*delay + 2}, // plus the timer's wake-up
		{"scheduled_ms", "p99", delay, 15 * delay},
	} {
		if v := ms(ph, c.key, c.q); v < c.lo || v > c.top {
			t.Errorf("%s %s = %.3f ms, want the server's %.0f ms delay, in [%.0f, %.0f]", c.key, c.q, v, delay, c.lo, c.top)
		}
	}
	h, err := hdrhistogram.Decode([]byte(ph["hdr"].(map[string]any)["sent"].(string)))
	if err != nil || h.TotalCount() != 200 || h.Min() < 2000 {
		t.Errorf("hdr.sent: %v, %d durations, the least %d µs; want 200, none under 2,000 µs", err, h.TotalCount(), h.Min())
	}
}

// A generator stalled 500 ms (the phase's start set 500 ms back): the
// requests due in the stall go out at once. From their due time their
// durations include the stall; from the send they do not; and every one due
// more than 1 ms before the phase began is late.
func TestAStallShowsFromTheDueTimeAndAsLate(t *testing.T) {
	const stall = 500 * time.Millisecond
	srv := newRefServer(t, map[string]answer{"tcp": {delay: 2 * time.Millisecond}})
	p := &plan{Testid: "t", mode: "rate", rate: 40}
	ph := &phase{Name: "ping__tcp__r1", Workload: "ping", Path: "tcp", Round: 1, Phase: "measure", DurationS: 1,
		URL: srv.url("tcp")}
	m := newMetrics("t")
	clk, err := newClock()
	if err != nil {
		t.Fatal(err)
	}
	defer clk.close()
	s := newSender(context.Background(), defaults, m, clk)
	rec := newPhaseRecord(ph, defaults.timeout)
	now := time.Now()
	s.phase(context.Background(), p, ph, now.Add(-stall), rec)
	s.wait()

	total := p.requests(ph) // 40, one every 25 ms, 20 of them due in the stall
	wantLate := 0           // due more than lateAfter before now, so sent at least that late
	for i := range total {
		if p.at(ph, i) < stall-lateAfter {
			wantLate++
		}
	}
	doc := phaseJSON(p, ph, rec)
	if n := len(srv.got("tcp")); n != total || doc["requests"].(int64) != int64(total) {
		t.Fatalf("the server saw %d, load.json says %v, want %d", n, doc["requests"], total)
	}
	// The requests due after the stall go out on time, but on a busy
	// machine up to half of them late too.
	late := int(math.Round(doc["late_rate"].(float64) * float64(total)))
	if late < wantLate || late > wantLate+(total-wantLate)/2 {
		t.Errorf("%d of %d late, want the %d due in the stall (at most %d more)", late, total, wantLate, (total-wantLate)/2)
	}
	if got := m.counted(t, "openloop_late_requests_total"); got != float64(late) {
		t.Errorf("Prometheus counted %v late, load.json %d", got, late)
	}
	due, sent := doc["scheduled_ms"].(map[string]float64), doc["duration_ms"].(map[string]float64)
	// The first request, due at the phase's start: the stall and the
	// delay from its due time, the delay from its send. On a busy machine
	// the burst of the stall's requests waits for the cores: up to half
	// the stall more.
	stallMs := float64(stall / time.Millisecond)
	if due["max"] < stallMs+2 || due["max"] > stallMs+2+stallMs/2 {
		t.Errorf("from the due time the longest took %.1f ms, want the %v stall and the 2 ms delay (+%.0f)", due["max"], stall, stallMs/2)
	}
	if sent["max"] < 2 || sent["max"] > stallMs/2 {
		t.Errorf("from the send the longest took %.1f ms, want the 2 ms delay (+%.0f), not the %v stall", sent["max"], stallMs/2, stall)
	}
}

// counted: the sum of a counter's series in the registry.
func (m *metrics) counted(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, s := range mf.GetMetric() {
				sum += s.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// The server's arrival times give the plan's pace: two segments of a stream
// of two paths at 400/s for 1 s, each segment every other request over the
// whole second (200/s), each path 100/s of a segment's; together the
// plan's 400, 200 per path.
func TestArrivalsKeepThePlansPacePerPathAndSegment(t *testing.T) {
	const rate, dur, n = 400, 1, 2 // req/s, s, segments
	srv := newRefServer(t, map[string]answer{"a": {}, "b": {}})
	plan := knownPlan(t, rate, stream(map[string]string{"a": srv.url("a"), "b": srv.url("b")}, dur))
	perPath := map[string]int{}
	for seg := range n {
		if _, err := runPlan(t, plan, map[string]string{"OPENLOOP_SEGMENT": strconv.Itoa(seg) + "/" + strconv.Itoa(n)}); err != nil {
			t.Fatal(err)
		}
		var all []time.Time
		for _, path := range []string{"a", "b"} {
			got := srv.got(path)
			perPath[path] += len(got)
			all = append(all, got...)
			// A path's share of the segment: about half of its 200
			// (drawn per cycle), at about 100/s over the whole phase.
			if len(got) < 80 || len(got) > 120 {
				t.Errorf("segment %d/%d: %d requests to %s, want about 100", seg, n, len(got), path)
				continue
			}
			if r := float64(len(got)-1) / got[len(got)-1].Sub(got[0]).Seconds(); r < 75 || r > 125 {
				t.Errorf("segment %d/%d: %s at %.0f/s, want %d/s (±25%%)", seg, n, path, r, rate/n/2)
			}
		}
		slices.SortFunc(all, time.Time.Compare)
		// Indexes seg, seg+n, ...: due from seg/rate to (rate*dur-n+seg)/rate.
		want := float64(dur*rate-n) / rate
		if len(all) != rate*dur/n {
			t.Errorf("segment %d/%d: the server saw %d requests, want %d", seg, n, len(all), rate*dur/n)
		} else if span := all[len(all)-1].Sub(all[0]).Seconds(); span < 0.85*want || span > 1.15*want {
			t.Errorf("segment %d/%d: its requests spanned %.3f s, want the whole phase's %.3f s (±15%%)", seg, n, span, want)
		}
	}
	for path, got := range perPath {
		if got != rate*dur/2 {
			t.Errorf("the segments together sent %d requests to %s, want %d", got, path, rate*dur/2)
		}
	}
}

// A stream of three paths, 100 requests each: ok always 200, bad 502 every
// tenth request, gone refusing connections. Each path's statuses are its
// own, exactly.
func TestStatusesPerPathAreThePathsOwn(t *testing.T) {
	srv := newRefServer(t, map[string]answer{"ok": {}, "bad": {failEvery: 10, status: http.StatusBadGateway}})
	urls := map[string]string{"ok": srv.url("ok"), "bad": srv.url("bad"), "gone": "http://" + freeAddr(t) + "/gone/ping"}
	doc, err := runPlan(t, knownPlan(t, 300, stream(urls, 1)), nil)
	if !errors.Is(err, errFailed) || !strings.Contains(err.Error(), "more than 1% of requests failed") {
		t.Errorf("run: %v, want more than 1%% of requests failed", err)
	}
	ph := doc["phases"].([]any)[0].(map[string]any)
	want := map[string]map[string]float64{
		"ok":   {},
		"bad":  {"502": 10},
		"gone": {"0": 100, "refused": 100},
		"":     {"502": 10, "0": 100, "refused": 100}, // the phase, 300 requests
	}
	for path, w := range want {
		v := ph
		if path != "" {
			v = ph["by_path"].(map[string]any)[path].(map[string]any)
		}
		if want := map[bool]float64{true: 300, false: 100}[path == ""]; num(v["requests"]) != want {
			t.Errorf("%q: %v requests, want %v", path, v["requests"], want)
		}
		for _, k := range failing {
			if got := num(v["statuses"].(map[string]any)[k]); got != w[k] {
				t.Errorf("%q's statuses[%s] = %v, want %v", path, k, got, w[k])
			}
		}
	}
	if n := len(srv.got("bad")); n != 100 {
		t.Errorf("the server saw %d requests to bad, want 100", n)
	}
}

// One request in flight at most against a path answering after 50 ms: most
// of 200/s are dropped. Every request the server did not see is counted as
// dropped, in load.json and in Prometheus, and the run fails naming the phase.
func TestDroppedRequestsAreCountedAndFailTheRun(t *testing.T) {
	srv := newRefServer(t, map[string]answer{"slow": {delay: 50 * time.Millisecond}})
	const planned = 200
	doc, scrape, err := runScraped(t, knownPlan(t, planned, alone("slow", srv.url("slow"), 1)),
		map[string]string{"OPENLOOP_CONNECTIONS": "1", "OPENLOOP_SCRAPE_WAIT": "5s"})
	arrived := len(srv.got("slow"))
	ph := doc["phases"].([]any)[0].(map[string]any)
	// One at a time, each at least 50 ms: at most 20 of the second's 200.
	if arrived < 5 || arrived > 21 {
		t.Errorf("the server saw %d requests, want at most one per 50 ms", arrived)
	}
	if dropped := num(ph["dropped_iterations"]); dropped != float64(planned-arrived) || num(ph["requests"]) != float64(arrived) {
		t.Errorf("load.json: %v dropped and %v sent, want %d dropped (%d planned, %d arrived)",
			dropped, ph["requests"], planned-arrived, planned, arrived)
	}
	if got := sumOf(t, scrape, "openloop_dropped_requests_total"); got != float64(planned-arrived) {
		t.Errorf("Prometheus: %v dropped, want %d", got, planned-arrived)
	}
	th := doc["thresholds_failed"].([]any)
	if len(th) != 1 || th[0] != "dropped_iterations:ping__slow__r1" {
		t.Errorf("thresholds_failed %v, want [dropped_iterations:ping__slow__r1]", th)
	}
	if !errors.Is(err, errFailed) || !strings.Contains(err.Error(), "the load of ping__slow__r1 did not go out") {
		t.Errorf("run: %v, want a failure naming the phase whose load did not go out", err)
	}
}

// The rule: a phase fails when more than 1% of its requests due (sent and
// dropped) were dropped; at 1% it passes.
func TestOverOnePercentDroppedFailsThePhase(t *testing.T) {
	p := &plan{Testid: "t", Phases: []phase{{Name: "ping__a__r1", Path: "a"}, {Name: "ping__b__r1", Path: "b"}, {Name: "ping__c__r1", Path: "c"}}}
	recs := make([]*phaseRecord, 3)
	for i, sent := range []int{99, 98, 0} {
		recs[i] = newPhaseRecord(&p.Phases[i], time.Second)
		for range sent {
			recs[i].add(p.Phases[i].Path, -1, outcome{status: 200}, times{sent: time.Millisecond, due: time.Millisecond})
		}
	}
	recs[0].drop() // a: 1 of 100, passes
	recs[1].drop() // b: 2 of 100, fails
	recs[1].drop()
	got := overDropped(p, recs) // c: nothing due, nothing dropped, passes
	if len(got) != 1 || got[0] != "ping__b__r1" {
		t.Errorf("over 1%% dropped: %v, want [ping__b__r1]", got)
	}
	var out bytes.Buffer
	table(&out, p, loadJSON(p, start{at: time.UnixMilli(0)}, recs))
	if !strings.Contains(out.String(), "the load of ping__b__r1 did not go out") {
		t.Errorf("the table does not say which phase's load did not go out:\n%s", out.String())
	}
}

// The generator's own defaults, as values, and README.md's table says them.
func TestDefaultsAreTheGeneratorsOwn(t *testing.T) {
	got, err := loadConfig(func(k string) string { return map[string]string{"PLAN": "plan.json"}[k] })
	want := config{plan: "plan.json", metricsAddr: ":9465", scrapeWait: 10 * time.Second, timeout: 60 * time.Second,
		connections: 1000, senders: runtime.GOMAXPROCS(0), segment: 0, segments: 1}
	if err != nil || got != want {
		t.Errorf("loadConfig with PLAN alone: %+v (%v), want %+v", got, err, want)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"OPENLOOP_METRICS_ADDR": ":9465", "OPENLOOP_SCRAPE_WAIT": "10s",
		"OPENLOOP_TIMEOUT": "60s", "OPENLOOP_CONNECTIONS": "1000", "OPENLOOP_SENDERS": "GOMAXPROCS", "OPENLOOP_SEGMENT": "0/1"} {
		if row := "| `" + name + "` | `" + v + "`"; !strings.Contains(string(readme), row) {
			t.Errorf("README.md's table lacks %s", row)
		}
	}
}

// load.json's quantiles of a histogram whose answer is known: 995 requests
// of 1 ms and 5 of 100 ms: p50 to p99 1 ms, p99.9 and max 100 ms, mean
// 1.495 ms (each within the histogram's 0.1%).
func TestLoadJSONQuantilesAreTheHistograms(t *testing.T) {
	h := newHist(time.Minute)
	for i := range 1000 {
		record(h, map[bool]time.Duration{true: 100 * time.Millisecond, false: time.Millisecond}[i < 5])
	}
	want := map[string]float64{"p50": 1, "p90": 1, "p95": 1, "p99": 1, "p999": 100, "max": 100, "avg": 1.495}
	got := durations(h)
	for k, v := range want {
		if math.Abs(got[k]-v) > v/1000 {
			t.Errorf("%s = %v ms, want %v (within 0.1%%)", k, got[k], v)
		}
	}
}

// What Prometheus scrapes of a request's duration is in seconds: one
// successful request of 2 ms sums to 0.002 and falls in the 2.5 ms bucket,
// not the 1 ms one; a failed one is counted and never timed.
func TestPrometheusDurationsAreSeconds(t *testing.T) {
	m := newMetrics("t")
	l := m.phaseLabels(&phase{Workload: "ping", Round: 1, Phase: "measure"})
	m.observe(l, "tcp", outcome{status: 200}, 2*time.Millisecond, false)
	m.observe(l, "tcp", outcome{status: 502}, 7*time.Millisecond, false)
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "openloop_request_duration_seconds" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		buckets := map[float64]uint64{}
		for _, b := range h.GetBucket() {
			buckets[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		if h.GetSampleCount() != 1 || math.Abs(h.GetSampleSum()-0.002) > 1e-9 || buckets[0.001] != 0 || buckets[0.0025] != 1 {
			t.Errorf("count %d, sum %v s, buckets %v: want one request of 0.002 s, in le=0.0025 and not le=0.001",
				h.GetSampleCount(), h.GetSampleSum(), buckets)
		}
		return
	}
	t.Fatal("no openloop_request_duration_seconds scraped")
}
