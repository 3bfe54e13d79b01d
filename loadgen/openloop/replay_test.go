package main

// A replayed log (loadgen/replay.py's schedule) against a server that notes
// every request: each path gets exactly the schedule's requests, in its
// order, with its methods, at its due times.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

type noted struct {
	method, target string
	at             time.Time
}

// noteServer answers 200 at once and notes each request under its path (the
// URL's first segment), with the rest of the URL as the target.
type noteServer struct {
	*httptest.Server
	mu  sync.Mutex
	got map[string][]noted
}

func newNoteServer(t *testing.T) *noteServer {
	s := &noteServer{got: map[string][]noted{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.RequestURI(), "/"), "/")
		s.mu.Lock()
		s.got[path] = append(s.got[path], noted{r.Method, "/" + rest, time.Now()})
		s.mu.Unlock()
		if strings.HasPrefix(rest, "slow/") {
			time.Sleep(5 * time.Millisecond)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// replayPlan: a schedule of cycles (a burst of 5 at 2 ms, a gap, then one
// every 15 ms; every 4th a HEAD) and a plan with a warm-up replaying its
// first 40 ms and the measured stream replaying it whole over paths a, b, c.
func replayPlan(t *testing.T, url string) (plan string, due []int64, targets, methods []string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# uds-lab replay: due_us spacing_us method route target\n")
	for c := range 30 {
		d := int64(c) * 2000
		if c >= 5 {
			d = 100000 + int64(c-5)*15000
		}
		m := "GET"
		if c%4 == 3 {
			m = "HEAD"
		}
		tg := fmt.Sprintf("/users/%d/orders?page=%d", c, c%3) // route 0; odd cycles route 1, answered after 5 ms
		if c%2 == 1 {
			tg = fmt.Sprintf("/slow/%d", c)
		}
		due, targets, methods = append(due, d), append(targets, tg), append(methods, m)
		spacing := 500 // the burst's cycles 2 ms apart; the others 15 ms apart, their paths 5 ms
		if c >= 5 {
			spacing = 5000
		}
		fmt.Fprintf(&b, "%d\t%d\t%s\t%d\t%s\n", d, spacing, m, c%2, tg)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "replay.tsv"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	urls := map[string]string{"a": url + "/a", "b": url + "/b", "c": url + "/c"}
	ph := func(r int, dur float64, at float64) map[string]any {
		return map[string]any{"name": fmt.Sprintf("traffic__mix__r%d", r), "workload": "traffic", "path": "mix",
			"round": r, "phase": map[int]string{0: "warmup", 1: "measure"}[r], "endpoint": "",
			"start_offset_s": at, "duration_s": dur, "paths": []string{"a", "b", "c"}, "block_s": 1, "urls": urls,
			"progress": "phase", "traffic": "replay.tsv"}
	}
	doc := map[string]any{"testid": "t", "urls": map[string]string{}, "gap_s": 0, "idle": nil, "describe": "a replay",
		"settings": map[string]any{"mode": "rate", "generator": "openloop", "rate": 100, "seed": 7,
			"traffic": map[string]any{"routes": []string{"/users/{id}/orders", "/slow/{id}"}}},
		"phases": []any{ph(0, 0.04, 0), ph(1, 1, 0.2)}}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	plan = filepath.Join(dir, "plan.json")
	if err := os.WriteFile(plan, js, 0o644); err != nil {
		t.Fatal(err)
	}
	return plan, due, targets, methods
}

func TestReplaySendsTheScheduleToEveryPath(t *testing.T) {
	srv := newNoteServer(t)
	plan, due, targets, methods := replayPlan(t, srv.URL)
	doc, err := runPlan(t, plan, nil)
	if err != nil {
		t.Fatal(err)
	}
	phases := doc["phases"].([]any)
	warm, measured := phases[0].(map[string]any), phases[1].(map[string]any)
	if num(warm["requests"]) != 5*3 || num(measured["requests"]) != 3*30 {
		t.Fatalf("requests: warm-up %v (want the 5 cycles due in its 40 ms x 3 paths), stream %v (want 90)",
			warm["requests"], measured["requests"])
	}
	if _, ok := measured["traffic"]; ok {
		t.Error("load.json names the schedule's file (a plan-only field)")
	}
	// Per route: 15 cycles each, on every path; each block's count and sum of
	// durations, their mean the route's answer time: the slow route's 5 ms
	// more than the other's on each path (a busy machine adds to both alike).
	means := map[string][2]float64{}
	for i, route := range []string{"/users/{id}/orders", "/slow/{id}"} {
		rt := measured["by_route"].([]any)[i].(map[string]any)
		if rt["route"] != route {
			t.Fatalf("by_route[%d] is %v, want %s", i, rt["route"], route)
		}
		for _, p := range []string{"a", "b", "c"} {
			v := rt["by_path"].(map[string]any)[p].(map[string]any)
			bl := v["blocks"].(map[string]any)
			var n, sum float64
			for b := range bl["n"].([]any) {
				n += num(bl["n"].([]any)[b])
				sum += num(bl["sum_ms"].([]any)[b])
			}
			if num(v["requests"]) != 15 || n != 15 {
				t.Errorf("%s on %s: %v requests, %v in blocks; want 15 and 15", route, p, v["requests"], n)
			}
			m := means[p]
			m[i] = sum / n
			means[p] = m
		}
	}
	for p, m := range means {
		if m[1] < 5 || m[1]-m[0] < 3 {
			t.Errorf("path %s: route means %.2f and %.2f ms, want the slow one's at least 5 ms and 3 ms more", p, m[0], m[1])
		}
	}
	first, last := make([]time.Time, 30), make([]time.Time, 30) // each cycle's first and last arrival
	for _, p := range []string{"a", "b", "c"} {
		got := srv.got[p]
		slices.SortFunc(got, func(x, y noted) int { return x.at.Compare(y.at) })
		if len(got) != 5+30 {
			t.Fatalf("path %s: %d requests, want 35 (5 warm-up + 30)", p, len(got))
		}
		// The stream's requests by target (each cycle's is its own; the warm-up,
		// 160 ms before, sent the first 5 again): a slow answer on a busy
		// machine may let the next cycle's overtake it at the server.
		stream := map[string]noted{}
		for _, g := range got[5:] {
			stream[g.target] = g
		}
		for c := range due {
			if g, ok := stream[targets[c]]; !ok || g.method != methods[c] {
				t.Fatalf("path %s, cycle %d: %s %s missing (the schedule's, query kept); got %v", p, c, methods[c],
					targets[c], got[5:])
			}
		}
		for c := range due {
			g := stream[targets[c]]
			if first[c].IsZero() || g.at.Before(first[c]) {
				first[c] = g.at
			}
			if g.at.After(last[c]) {
				last[c] = g.at
			}
		}
	}
	// The median cycle's spread (one late request on a busy machine shrinks a cycle's).
	var spread []time.Duration
	for c := 5; c < 30; c++ {
		spread = append(spread, last[c].Sub(first[c]))
	}
	slices.Sort(spread)
	if m := spread[len(spread)/2]; m < 2500*time.Microsecond || m > 40*time.Millisecond {
		t.Errorf("a cycle's 3 requests went out %v apart (median), want 2 x 5 ms (its spacing_us)", m)
	}
}

func TestReplayScheduleErrorsNameTheLine(t *testing.T) {
	for line, want := range map[string]string{
		"5\t1\tGET\t0\t/x\n3\t1\tGET\t0\t/y\n": "line 3: due_us \"3\"",
		"0\t0\tGET\t0\t/x\n":                   "line 2: spacing_us",
		"0\t1\tPOST\t0\t/x\n":                  "line 2: method \"POST\"",
		"0\t1\tGET\t0\tx\n":                    "line 2: a target",
		"0\t1\tGET\t0\n":                       "line 2: 4 fields",
		"":                                     "no request",
	} {
		name := filepath.Join(t.TempDir(), "replay.tsv")
		if err := os.WriteFile(name, []byte("# header\n"+line), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := readSchedule(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to say %q", line, err, want)
		}
	}
}

// Each request of a replay is due at its cycle's due time plus its place in
// the cycle times the cycle's spacing, exactly (the sender's timing against
// them: TestReplaySendsTheScheduleToEveryPath and known_test.go).
func TestReplayDueTimesAreTheSchedules(t *testing.T) {
	plan, due, _, _ := replayPlan(t, "http://127.0.0.1:1")
	p, err := readPlan(plan)
	if err != nil {
		t.Fatal(err)
	}
	ph := &p.Phases[1]
	if p.requests(ph) != 90 || p.requests(&p.Phases[0]) != 15 {
		t.Fatalf("requests %d and %d, want 90 (30 cycles x 3) and 15 (the 5 due in the warm-up's 40 ms)",
			p.requests(ph), p.requests(&p.Phases[0]))
	}
	for c := range due {
		spacing := int64(500)
		if c >= 5 {
			spacing = 5000
		}
		for k := range 3 {
			want := time.Duration(due[c]+int64(k)*spacing) * time.Microsecond
			if got := p.at(ph, 3*c+k); got != want {
				t.Fatalf("cycle %d, path %d: due at %v, want %v", c, k, got, want)
			}
		}
	}
}
