package main

// A sender per core (fleet.go): each request of the stream sent by exactly
// one sender, and the senders' records merged into what one sender records.

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
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

// The senders' shares of a process's segment: for segments 0/1 and 1/3 and
// 1 to 4 senders, every index of the segment is sent by exactly one sender,
// no other index by any; and their connections add up to
// OPENLOOP_CONNECTIONS (7), each sender with at least one.
func TestSendersShareTheSegmentAndTheConnections(t *testing.T) {
	for _, seg := range [][2]int{{0, 1}, {1, 3}} {
		for n := 1; n <= 4; n++ {
			cfg := defaults
			cfg.segment, cfg.segments, cfg.connections = seg[0], seg[1], 7
			by := map[int]int{}
			conns := 0
			for k := range n {
				c := shareOf(cfg, k, n)
				conns += c.connections
				if c.connections < 1 {
					t.Errorf("segment %v, %d senders: sender %d has no connection", seg, n, k)
				}
				for i := c.segment; i < 120; i += c.segments {
					by[i]++
				}
			}
			for i := range 120 {
				if want := map[bool]int{true: 1, false: 0}[i%seg[1] == seg[0]]; by[i] != want {
					t.Errorf("segment %v, %d senders: index %d sent %d times, want %d", seg, n, i, by[i], want)
				}
			}
			if conns != 7 {
				t.Errorf("segment %v, %d senders: %d connections in all, want OPENLOOP_CONNECTIONS' 7", seg, n, conns)
			}
		}
	}
}

// The same requests (drawn outcomes, durations, lateness, drops,
// connections; a replay's routes too) recorded by one record and split
// among 3 (request i in record i mod 3) then merged and finished (its
// histograms let go): load.json's phase is the same, to the byte (hdr
// included), and so are the run's totals and thresholds.
func TestSendersRecordsMergeToOnesRecord(t *testing.T) {
	for _, replay := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(54, 1))
		p, err := fixturePlan(t.TempDir(), rng, replay)
		if err != nil {
			t.Fatal(err)
		}
		wholes, merged := make([]*phaseRecord, len(p.Phases)), make([]*phaseRecord, len(p.Phases))
		for k := range p.Phases {
			ph := &p.Phases[k]
			whole := newPhaseRecord(ph, time.Minute)
			parts := []*phaseRecord{newPhaseRecord(ph, time.Minute), newPhaseRecord(ph, time.Minute), newPhaseRecord(ph, time.Minute)}
			for i := 0; i < p.requests(ph); i++ {
				recs := []*phaseRecord{whole, parts[i%3]}
				path, block := p.target(ph, i)
				if rng.IntN(20) == 0 {
					recs[0].drop()
					recs[1].drop()
					continue
				}
				o := fixtureOutcome(rng, 0.1)
				sent := time.Duration(math.Exp(rng.NormFloat64()*0.8+6.5) * float64(time.Microsecond))
				lag := time.Duration(rng.ExpFloat64() * 600 * float64(time.Microsecond))
				for _, r := range recs {
					r.add(path, block, o, times{sent: sent, due: sent + lag, queue: lag, first: sent / 3})
					r.addRoute(ph.route(i), path, block, o, sent)
				}
			}
			whole.opened(3)
			parts[1].opened(3)
			for _, r := range parts[1:] {
				parts[0].merge(r)
			}
			parts[0].finish(p, ph)
			want, _ := json.Marshal(phaseJSON(p, ph, whole))
			got, _ := json.Marshal(phaseJSON(p, ph, parts[0]))
			if string(got) != string(want) {
				t.Errorf("replay %v, phase %s: merged and finished, its load.json differs from one record's from byte %d",
					replay, ph.Name, firstDiff(got, want))
			}
			if parts[0].all.sent != nil || parts[0].byPath != nil || parts[0].byBlock != nil {
				t.Errorf("replay %v, phase %s: finished, its histograms are still kept", replay, ph.Name)
			}
			wholes[k], merged[k] = whole, parts[0]
		}
		st := start{at: time.UnixMilli(0)}
		want, _ := json.Marshal(loadJSON(p, st, wholes))
		got, _ := json.Marshal(loadJSON(p, st, merged))
		if string(got) != string(want) {
			t.Errorf("replay %v: load.json of the merged and finished phases differs from one record's", replay)
		}
	}
}

// firstDiff: where a and b first differ.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// targetServer answers after delay and counts each request by its path
// (the URL's first segment) and target (the rest), and by the connection
// it came on.
type targetServer struct {
	*httptest.Server
	mu     sync.Mutex
	got    map[string]int
	byConn map[string][]string // the targets each connection carried
}

func newTargetServer(t *testing.T, delay time.Duration) *targetServer {
	s := &targetServer{got: map[string]int{}, byConn: map[string][]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		tg := strings.TrimPrefix(r.URL.Path, "/")
		s.got[tg]++
		s.byConn[r.RemoteAddr] = append(s.byConn[r.RemoteAddr], tg)
		s.mu.Unlock()
		time.Sleep(delay)
	}))
	t.Cleanup(s.Close)
	return s
}

// numberedPlan: a measured stream of paths at rate for dur seconds in
// blocks of 1 s, each cycle's requests with its own target (/n/<cycle>, a
// replay's schedule), so that a server can tell each request apart.
func numberedPlan(t *testing.T, url string, rate, dur int, paths ...string) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("# due_us spacing_us method route target\n")
	step := float64(len(paths)) * 1e6 / float64(rate) // a cycle: one request to each path
	for c := range rate * dur / len(paths) {
		fmt.Fprintf(&b, "%.0f\t%.0f\tGET\t0\t/n/%d\n", float64(c)*step, step/float64(len(paths)), c)
	}
	if err := os.WriteFile(filepath.Join(dir, "replay.tsv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	urls := map[string]string{}
	for _, p := range paths {
		urls[p] = url + "/" + p
	}
	ph := stream(urls, float64(dur))
	ph["traffic"] = "replay.tsv"
	doc := map[string]any{"testid": "t", "urls": map[string]string{}, "gap_s": 0, "idle": nil, "describe": "numbered",
		"settings": map[string]any{"mode": "rate", "generator": "openloop", "rate": rate, "seed": 7,
			"traffic": map[string]any{"routes": []string{"/n/{id}"}}},
		"phases": []any{ph}}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(name, js, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// A stream of 2 paths at 400/s for 2 s (blocks of 1 s) against a server
// answering after 2 ms, sent by 1 sender and by 2: each time the server
// sees every request of the plan exactly once (each path, each cycle's
// target), and load.json's counts per path and per block are the plan's;
// every duration is the server's 2 ms or more, and the medians of both
// runs near it.
func TestTwoSendersSendEveryRequestOnce(t *testing.T) {
	const rate, dur, delay = 400, 2, 2 * time.Millisecond
	for _, n := range []string{"1", "2"} {
		srv := newTargetServer(t, delay)
		name := numberedPlan(t, srv.URL, rate, dur, "a", "b")
		doc, err := runPlan(t, name, map[string]string{"OPENLOOP_SENDERS": n})
		if err != nil {
			t.Fatalf("%s senders: %v", n, err)
		}
		p, err := readPlan(name)
		if err != nil {
			t.Fatal(err)
		}
		ph := &p.Phases[0]
		want := map[string][]float64{"a": {0, 0}, "b": {0, 0}}
		for i := range p.requests(ph) {
			path, block := p.target(ph, i)
			want[path][block]++
		}
		for path, blocks := range want {
			for c := range rate * dur / 2 {
				if got := srv.got[fmt.Sprintf("%s/n/%d", path, c)]; got != 1 {
					t.Fatalf("%s senders: %s's cycle %d arrived %d times, want once", n, path, c, got)
				}
			}
			v := doc["phases"].([]any)[0].(map[string]any)["by_path"].(map[string]any)[path].(map[string]any)
			for b, w := range blocks {
				if got := num(v["blocks"].([]any)[b].(map[string]any)["requests"]); got != w {
					t.Errorf("%s senders: %s's block %d: %v requests, want the plan's %v", n, path, b, got, w)
				}
			}
			h, err := hdrhistogram.Decode([]byte(v["hdr"].(map[string]any)["sent"].(string)))
			if err != nil {
				t.Fatal(err)
			}
			if lo, p50 := h.Min(), ms(v, "duration_ms", "p50"); lo < 2000 || p50 > 2*2+1 {
				t.Errorf("%s senders: %s's shortest %d µs and median %.3f ms, want the server's 2 ms (the median under 5)", n, path, lo, p50)
			}
		}
		if len(srv.got) != rate*dur {
			t.Errorf("%s senders: the server saw %d distinct requests, want the plan's %d", n, len(srv.got), rate*dur)
		}
	}
}

// 2 senders, 4 connections (2 each), a stream of one path at 100/s for 1
// s, each cycle's request numbered (its target): sender k sends the cycles
// c with c modulo 2 = k, on its own connections, so every connection the
// server sees carries numbers of one parity, and both parities come (one
// sender would send both on the connection that came back last).
func TestEachSenderSendsOnItsOwnConnections(t *testing.T) {
	srv := newTargetServer(t, 0)
	name := numberedPlan(t, srv.URL, 100, 1, "a")
	runPlan(t, name, map[string]string{"OPENLOOP_SENDERS": "2", "OPENLOOP_CONNECTIONS": "4"}) // a stall may drop some: not this test's
	parities := map[string]map[int]bool{}
	for addr, targets := range srv.byConn {
		parities[addr] = map[int]bool{}
		for _, tg := range targets {
			var c int
			if _, err := fmt.Sscanf(tg, "a/n/%d", &c); err != nil {
				t.Fatalf("target %q: %v", tg, err)
			}
			parities[addr][c%2] = true
		}
	}
	seen := map[int]bool{}
	for addr, ps := range parities {
		if len(ps) != 1 {
			t.Errorf("connection %s carried cycles of both parities: %d requests", addr, len(srv.byConn[addr]))
		}
		for p := range ps {
			seen[p] = true
		}
	}
	if len(seen) != 2 {
		t.Errorf("the connections carried cycles of parities %v, want both (2 senders)", seen)
	}
}
