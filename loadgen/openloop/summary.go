package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// What every phase counts of how a failing path fails (load.schema.json's
// statuses; a sweep's judge and the backlog scenario read them): nginx's 502,
// 503 and 504, no response at all (0), and of those a refused connection, a
// reset, a request or a connect timed out.
var (
	failing    = []string{"502", "503", "504", "0", "refused", "reset", "timeout", "connect_timeout"}
	noResponse = []string{"refused", "reset", "timeout", "connect_timeout", "error"}
)

// durations: load.json's quantiles (ms) of a histogram of µs; empty: none.
func durations(h *hdrhistogram.Histogram) map[string]float64 {
	if h == nil || h.TotalCount() == 0 {
		return map[string]float64{}
	}
	ms := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
	return map[string]float64{"avg": h.Mean() / 1000, "p50": ms(50), "p90": ms(90), "p95": ms(95),
		"p99": ms(99), "p999": ms(99.9), "max": float64(h.Max()) / 1000}
}

// encode: a histogram in HdrHistogram's compressed base64 form (V2), which
// every HdrHistogram library reads (Python's hdrhistogram: loadgen/merge_segments.py).
func encode(h *hdrhistogram.Histogram) string {
	b, err := h.Encode(hdrhistogram.V2CompressedEncodingCookieBase)
	if err != nil {
		panic(fmt.Sprintf("hdrhistogram: encode: %v", err)) // only on a zlib failure writing to memory
	}
	return string(b)
}

func share(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// phaseJSON: one phase of load.json: the plan's own fields and what was measured.
func phaseJSON(p *plan, ph *phase, r *phaseRecord) map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.json != nil {
		return r.json
	}
	out := map[string]any{}
	for k, v := range ph.raw {
		out[k] = v
	}
	t := r.all
	out["requests"] = t.requests
	out["failed_rate"] = share(t.failed, t.requests)
	out["dropped_iterations"] = r.dropped
	out["late_rate"] = share(r.late, t.requests)
	out["connections_opened"] = r.dialed
	figures(out, t)
	out["statuses"] = statusesJSON(t)
	if ph.Path == mix {
		by := map[string]any{}
		for _, path := range ph.Paths {
			pt := r.byPath[path]
			bl := make([]map[string]any, r.nBlocks)
			h := newHist(r.top)
			for b, bt := range r.byBlock[path] {
				bl[b] = blockJSON(bt, h)
			}
			v := map[string]any{
				"requests": pt.requests, "failed_rate": share(pt.failed, pt.requests),
				"statuses": statusesJSON(pt),
				"blocks":   bl,
			}
			figures(v, pt)
			by[path] = v
		}
		out["by_path"] = by
	}
	if len(r.byRoute) > 0 {
		out["by_route"] = routesJSON(ph, r)
	}
	return out
}

// figures: a tally's durations, as quantiles and as histograms (hdr), each
// under its name in load.json (merge_segments.py's HDR_FIGURES): from the
// actual send, from the due time, the generator's queue (due to written) and
// to the first byte.
func figures(out map[string]any, t *tally) {
	out["duration_ms"] = durations(t.sent)
	out["scheduled_ms"] = durations(t.due)
	out["queue_ms"] = durations(t.queue)
	out["first_byte_ms"] = durations(t.first)
	out["hdr"] = map[string]string{"sent": encode(t.sent), "due": encode(t.due), "queue": encode(t.queue),
		"first_byte": encode(t.first)}
}

// routesJSON: a replay's figures per route of the plan (settings.traffic's
// routes, in order) and path: counts, durations, and per block the number
// and sum of its successes' durations.
func routesJSON(ph *phase, r *phaseRecord) []map[string]any {
	out := make([]map[string]any, len(r.byRoute))
	for i, byPath := range r.byRoute {
		by := map[string]any{}
		for path, t := range byPath {
			sum := make([]float64, len(t.blockSumUS))
			for b, us := range t.blockSumUS {
				sum[b] = float64(us) / 1000
			}
			by[path] = map[string]any{
				"requests": t.requests, "failed_rate": share(t.failed, t.requests), "duration_ms": durations(t.sent),
				"hdr": encode(t.sent), "blocks": map[string]any{"n": t.blockN, "sum_ms": sum},
			}
		}
		out[i] = map[string]any{"route": ph.routes[i], "by_path": by}
	}
	return out
}

// statusesJSON: how a tally's requests failed, as load.json's statuses.
func statusesJSON(t *tally) map[string]int64 {
	st := map[string]int64{}
	for _, k := range failing {
		st[k] = t.statuses[k]
	}
	for _, k := range noResponse {
		st["0"] += t.statuses[k]
	}
	return st
}

// blockJSON: one block of one path: its requests, failures and the median,
// p99 and mean of its successes (null: none succeeded), with their
// histogram, made in h
// (one histogram reused block after block).
func blockJSON(t *blockTally, h *hdrhistogram.Histogram) map[string]any {
	h.Reset()
	if t == nil {
		t = &blockTally{}
	}
	for _, us := range t.us {
		record(h, time.Duration(us)*time.Microsecond)
	}
	var p50, p99, mean any
	if h.TotalCount() > 0 {
		p50 = float64(h.ValueAtQuantile(50)) / 1000
		p99, mean = float64(h.ValueAtQuantile(99))/1000, h.Mean()/1000
	}
	return map[string]any{"requests": t.requests, "failed": t.failed, "p50": p50, "p99": p99, "mean": mean,
		"hdr": encode(h)}
}

// loadJSON: the whole of load.json (load.schema.json).
func loadJSON(p *plan, st start, recs []*phaseRecord) map[string]any {
	var requests, failed int64
	phases := make([]map[string]any, len(p.Phases))
	var thresholds []string
	for i := range p.Phases {
		phases[i] = phaseJSON(p, &p.Phases[i], recs[i])
		requests += recs[i].all.requests
		failed += recs[i].all.failed
	}
	rate := share(failed, requests)
	if rate > 0.01 {
		thresholds = append(thresholds, "http_req_failed")
	}
	for _, name := range overDropped(p, recs) {
		thresholds = append(thresholds, droppedThreshold+":"+name)
	}
	doc := map[string]any{
		"testid": p.Testid, "urls": p.URLs, "gap_s": p.GapS, "idle": p.Idle,
		"settings": p.Settings, "phases": phases,
		"totals":            map[string]any{"requests": requests, "failed_rate": rate},
		"thresholds_failed": append([]string{}, thresholds...),
	}
	st.fields(doc)
	return doc
}

// droppedThreshold: thresholds_failed names a phase whose load did not go
// out as droppedThreshold:<phase name>.
const droppedThreshold = "dropped_iterations"

// overDropped: the phases whose load did not go out: more than 1% of the
// requests due (sent and dropped) dropped, not sent (an overflow: every
// connection of their path busy).
func overDropped(p *plan, recs []*phaseRecord) []string {
	var names []string
	for i, r := range recs {
		r.mu.Lock()
		over := share(r.dropped, r.all.requests+r.dropped) > 0.01
		r.mu.Unlock()
		if over {
			names = append(names, p.Phases[i].Name)
		}
	}
	return names
}

// verdict: load.json's thresholds_failed in words.
func verdict(thresholds []string) string {
	var says, phases []string
	for _, th := range thresholds {
		if name, ok := strings.CutPrefix(th, droppedThreshold+":"); ok {
			phases = append(phases, name)
		} else if th == "http_req_failed" {
			says = append(says, "more than 1% of requests failed")
		} else {
			says = append(says, th)
		}
	}
	if len(phases) > 0 {
		says = append(says, fmt.Sprintf("the load of %s did not go out (more than 1%% of its requests dropped, not sent: an overflow, every one of a path's OPENLOOP_CONNECTIONS busy)",
			strings.Join(phases, ", ")))
	}
	return strings.Join(says, "; ")
}

// table: a short table per phase, as the run ends.
func table(w io.Writer, p *plan, doc map[string]any) {
	fmt.Fprintf(w, "uds-lab openloop run %s\n\n%-28s %8s %8s %7s %7s %6s %10s %10s\n", p.Testid,
		"phase", "requests", "req/s", "failed", "dropped", "late", "p50", "p99")
	for i, ph := range doc["phases"].([]map[string]any) {
		d := ph["duration_ms"].(map[string]float64)
		cell := func(k string) string {
			if v, ok := d[k]; ok {
				return fmt.Sprintf("%.3fms", v)
			}
			return "-"
		}
		fmt.Fprintf(w, "%-28s %8d %8.0f %6.2f%% %7d %5.1f%% %10s %10s\n", p.Phases[i].Name, ph["requests"],
			float64(ph["requests"].(int64))/p.Phases[i].DurationS, 100*ph["failed_rate"].(float64),
			ph["dropped_iterations"], 100*ph["late_rate"].(float64), cell("p50"), cell("p99"))
	}
	if f := doc["thresholds_failed"].([]string); len(f) > 0 {
		fmt.Fprintf(w, "\n%s (%s)\n", verdict(f), strings.Join(f, ", "))
	}
}

// writeJSON: v, indented, to w.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
