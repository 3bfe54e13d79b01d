package main

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// TestMergeFixtures is not a test: it writes the fixtures of
// loadgen/test_merge_segments.py's property (one run recorded whole by one
// process and as n segments, through this program's own records and
// load.json) where OPENLOOP_FIXTURES_DIR names a folder, and returns at
// once where it does not (the TestHelperProcess pattern).
//
//	OPENLOOP_FIXTURES_DIR=d OPENLOOP_FIXTURES_SEED=s OPENLOOP_FIXTURES_SEGMENTS=n
//
// writes d/plan.json, d/whole.json and d/seg-<i>.json (0 <= i < n).
func TestMergeFixtures(t *testing.T) {
	dir := os.Getenv("OPENLOOP_FIXTURES_DIR")
	if dir == "" {
		return
	}
	seed, err := strconv.ParseUint(os.Getenv("OPENLOOP_FIXTURES_SEED"), 10, 64)
	if err != nil {
		t.Fatalf("OPENLOOP_FIXTURES_SEED: %v", err)
	}
	n, err := strconv.Atoi(os.Getenv("OPENLOOP_FIXTURES_SEGMENTS"))
	if err != nil || n < 1 {
		t.Fatalf("OPENLOOP_FIXTURES_SEGMENTS: must be a whole number >= 1")
	}
	if err := writeMergeFixtures(dir, seed, n); err != nil {
		t.Fatal(err)
	}
}

// fixturePlan: a plan as loadgen/plan.py writes one, read by readPlan: a
// warm-up and a measured interleaved stream of paths in blocks of block_s,
// then one path alone; its rate and lengths drawn from rng. A replay (make
// load TRAFFIC=): the interleaved phases send a schedule of cycles at the
// rate, each of one of 3 routes drawn.
func fixturePlan(dir string, rng *rand.Rand, replay bool) (*plan, error) {
	paths := []string{"tcp", "uds", "uds-lo"}[:2+rng.IntN(2)]
	urls := map[string]string{}
	for _, p := range paths {
		urls[p] = "http://127.0.0.1:1/" + p + "/ping"
	}
	rate := 40 + rng.IntN(160)
	blockS := 1 + rng.IntN(2)
	mixPhase := func(round int, start, dur float64) map[string]any {
		return map[string]any{"name": fmt.Sprintf("ping__mix__r%d", round), "workload": "ping", "path": mix,
			"round": round, "phase": map[bool]string{true: "warmup", false: "measure"}[round == 0],
			"endpoint": "/ping", "start_offset_s": start, "duration_s": dur, "paths": paths, "block_s": blockS,
			"urls": urls, "progress": "phase mix"}
	}
	measured := float64(blockS * (3 + rng.IntN(4)))
	settings := map[string]any{"mode": "rate", "generator": "openloop", "rate": rate, "seed": rng.IntN(1000),
		"paths": paths}
	if replay {
		sched := "# due_us spacing_us method route target\n"
		step := 1e6 / float64(rate)
		for c := 0; float64(c)*step*float64(len(paths)) < (0.7+measured)*1e6; c++ {
			sched += fmt.Sprintf("%.0f\t%.0f\tGET\t%d\t/r\n", float64(c)*step*float64(len(paths)), step, rng.IntN(3))
		}
		if err := os.WriteFile(filepath.Join(dir, "replay.tsv"), []byte(sched), 0o644); err != nil {
			return nil, err
		}
		settings["traffic"] = map[string]any{"routes": []string{"/a/{id}", "/b", "other"}}
	}
	mixPhase0 := mixPhase
	mixPhase = func(round int, start, dur float64) map[string]any {
		ph := mixPhase0(round, start, dur)
		if replay {
			ph["traffic"] = "replay.tsv"
		}
		return ph
	}
	doc := map[string]any{
		"testid": "fixtures", "urls": urls, "gap_s": 0.2, "idle": nil, "describe": "merge fixtures",
		"settings": settings,
		"phases": []any{
			mixPhase(0, 0, 0.5), mixPhase(1, 0.7, measured),
			map[string]any{"name": "ping__" + paths[1] + "__r1", "workload": "ping", "path": paths[1], "round": 1,
				"phase": "measure", "endpoint": "/ping", "start_offset_s": 0.9 + measured, "duration_s": 1.5,
				"url": urls[paths[1]], "progress": "phase one"},
		},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	name := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(name, b, 0o644); err != nil {
		return nil, err
	}
	return readPlan(name)
}

// fixtureOutcome: a request's outcome, success or any way openloop counts a failure.
func fixtureOutcome(rng *rand.Rand, failing float64) outcome {
	if rng.Float64() >= failing {
		return outcome{status: []int{200, 200, 200, 204, 301}[rng.IntN(5)]}
	}
	kinds := []outcome{{status: 502}, {status: 503}, {status: 504}, {status: 404}, {status: 500},
		{failure: "refused"}, {failure: "reset"}, {failure: "timeout"}, {failure: "connect_timeout"},
		{failure: "error"}}
	return kinds[rng.IntN(len(kinds))]
}

// writeMergeFixtures: every request of the plan's phases (its path and block
// the plan's own, target's), dropped or sent with a drawn outcome, durations
// and lateness, recorded into one whole record and into the record of
// segment i mod n, as the sender records them; then their load.json.
func writeMergeFixtures(dir string, seed uint64, n int) error {
	rng := rand.New(rand.NewPCG(seed, 51))
	p, err := fixturePlan(dir, rng, n%2 == 1) // an odd number of pods: a replay
	if err != nil {
		return err
	}
	const top = 60 * time.Second
	failing := []float64{0, 0.004, 0.05, 0.3}[rng.IntN(4)]
	dropping := []float64{0, 0.02, 0.1}[rng.IntN(3)]
	whole := make([]*phaseRecord, len(p.Phases))
	segs := make([][]*phaseRecord, n)
	for s := range segs {
		segs[s] = make([]*phaseRecord, len(p.Phases))
	}
	for k := range p.Phases {
		ph := &p.Phases[k]
		whole[k] = newPhaseRecord(ph, top)
		for s := range segs {
			segs[s][k] = newPhaseRecord(ph, top)
		}
		for i := 0; i < p.requests(ph); i++ {
			recs := []*phaseRecord{whole[k], segs[i%n][k]}
			path, block := p.target(ph, i)
			if rng.Float64() < dropping {
				for _, r := range recs {
					r.drop()
				}
				continue
			}
			o := fixtureOutcome(rng, failing)
			sent := time.Duration(math.Exp(rng.NormFloat64()*0.8+6.5) * float64(time.Microsecond))
			if rng.IntN(500) == 0 {
				sent = top + time.Second // beyond the histogram's top: recorded at it
			}
			lag := time.Duration(rng.ExpFloat64() * 400 * float64(time.Microsecond))
			for _, r := range recs {
				r.add(path, block, o, times{sent: sent, due: sent + lag, queue: lag, first: sent / 3})
				r.addRoute(ph.route(i), path, block, o, sent)
			}
		}
		for s := range segs { // connections each pod dialed during the phase
			n := rng.Int64N(4)
			segs[s][k].opened(n)
			whole[k].opened(n)
		}
	}
	// Every pod waits for the run's start instant (OPENLOOP_START_AT) and
	// begins up to startLateMax after it; the run, as its last pod did.
	instant := time.UnixMilli(1_700_000_000_000)
	var last time.Duration
	for s := range segs {
		late := time.Duration(rng.Int64N(int64(startLateMax)))
		last = max(last, late)
		st := start{at: instant, late: late, instant: true}
		if err := writeFile(filepath.Join(dir, fmt.Sprintf("seg-%d.json", s)), loadJSON(p, st, segs[s])); err != nil {
			return err
		}
	}
	return writeFile(filepath.Join(dir, "whole.json"), loadJSON(p, start{at: instant, late: last, instant: true}, whole))
}
