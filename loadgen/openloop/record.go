package main

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Late: a request sent more than this behind its due time. Over 1% of a
// phase's requests late, the generator, not the path, set the pace.
const lateAfter = time.Millisecond

// Histograms hold microseconds, 3 significant digits (0.1%): a median of
// 400 µs is known to 0.4 µs. Their top is the request timeout (a longer
// duration is recorded at the top). HDR histograms, as wrk2 and Nighthawk
// keep: merged exactly by adding their counts (loadgen/merge_segments.py).
const (
	histLowest = 1
	histDigits = 3
)

func newHist(top time.Duration) *hdrhistogram.Histogram {
	return hdrhistogram.New(histLowest, max(top.Microseconds(), 1000), histDigits)
}

func record(h *hdrhistogram.Histogram, d time.Duration) {
	us := max(d.Microseconds(), histLowest)
	_ = h.RecordValue(min(us, h.HighestTrackableValue())) // in range by construction
}

// outcome is what became of one request.
type outcome struct {
	status  int    // the response's status; 0: none
	failure string // why there was none (refused, reset, timeout, connect_timeout, error)
}

// ok: what counts as a success, as k6's default expected response: 200-399.
func (o outcome) ok() bool { return o.status >= 200 && o.status < 400 }

// key: the outcome as load.json's statuses and the metrics' status label
// name it: the status, or the failure for a request without a response.
func (o outcome) key() string {
	if o.status == 200 {
		return "200" // most of them: no string made
	}
	if o.status > 0 {
		return strconv.Itoa(o.status)
	}
	return o.failure
}

// times: one request's durations from its four timestamps (due, written,
// first byte, last byte): from its actual send (written) to its last byte,
// from its due time to its last byte, its wait in the generator (due to
// written) and from written to the answer's first byte.
type times struct {
	sent, due, queue, first time.Duration
}

// tally: one set of requests' counts and the durations of its successes,
// from the actual send (sent) and, but in a route, from the due time (due),
// the generator's queue (queue) and to the first byte (first).
type tally struct {
	requests, failed        int64
	sent, due, queue, first *hdrhistogram.Histogram
	statuses                map[string]int64
}

func newTally(top time.Duration, full bool) *tally {
	t := &tally{sent: newHist(top), statuses: map[string]int64{}}
	if full {
		t.due, t.queue, t.first = newHist(top), newHist(top), newHist(top)
	}
	return t
}

func (t *tally) add(o outcome, d times) {
	t.requests++
	t.statuses[o.key()]++
	if !o.ok() {
		t.failed++
		return
	}
	record(t.sent, d.sent)
	if t.due != nil {
		record(t.due, d.due)
		record(t.queue, d.queue)
		record(t.first, d.first)
	}
}

// blockTally: one block of one path: its counts and its successes'
// durations themselves (µs), 4 bytes a request where a histogram is 139 KB
// a block: a replay of hours has thousands of blocks. load.json's histogram
// of the block is made from them as it is written.
type blockTally struct {
	requests, failed int64
	us               []int32
}

func (t *blockTally) add(o outcome, sent time.Duration) {
	t.requests++
	if !o.ok() {
		t.failed++
		return
	}
	t.us = append(t.us, int32(min(max(sent.Microseconds(), histLowest), math.MaxInt32)))
}

// phaseRecord: a phase's figures, the stream's and each path's, per block;
// a replay's also per route.
type phaseRecord struct {
	mu      sync.Mutex
	all     *tally
	late    int64 // sent more than lateAfter behind its due time
	dropped int64 // not sent: an overflow, every connection of its path's pool busy
	dialed  int64 // connections opened while it ran
	byPath  map[string]*tally
	byBlock map[string][]*blockTally // a measured interleaved stream: per path, per block (nil until used)
	byRoute []map[string]*routeTally // a replay: per route of the plan, per path (nil until used)
	nBlocks int
	top     time.Duration

	pending sync.WaitGroup // its requests handed to a connection and not yet recorded
	json    map[string]any // its phase of load.json, once finished (finish); then no tally but its counts
}

// routeTally: one route's requests on one path of a replay: its counts, the
// durations of its successes, and per block their number and sum (the report
// pairs the paths' block means route by route).
type routeTally struct {
	*tally
	blockN, blockSumUS []int64
}

func newPhaseRecord(ph *phase, top time.Duration) *phaseRecord {
	r := &phaseRecord{all: newTally(top, true), byPath: map[string]*tally{}, byBlock: map[string][]*blockTally{},
		nBlocks: blocks(ph), top: top}
	if ph.Path == mix {
		for _, p := range ph.Paths {
			r.byPath[p] = newTally(top, true)
			r.byBlock[p] = make([]*blockTally, r.nBlocks)
		}
	}
	for range ph.routes {
		r.byRoute = append(r.byRoute, map[string]*routeTally{})
	}
	return r
}

// addRoute: a replayed request's figures under its route (-1: none).
func (r *phaseRecord) addRoute(route int, path string, block int, o outcome, sent time.Duration) {
	if route < 0 || route >= len(r.byRoute) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.byRoute[route][path]
	if t == nil {
		t = &routeTally{tally: newTally(r.top, false), blockN: make([]int64, r.nBlocks), blockSumUS: make([]int64, r.nBlocks)}
		r.byRoute[route][path] = t
	}
	t.add(o, times{sent: sent})
	if o.ok() && block >= 0 && block < r.nBlocks {
		t.blockN[block]++
		t.blockSumUS[block] += max(sent.Microseconds(), histLowest)
	}
}

// add: a request's outcome and durations; it was late when it waited in
// the generator more than lateAfter.
func (r *phaseRecord) add(path string, block int, o outcome, d times) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all.add(o, d)
	if d.queue > lateAfter {
		r.late++
	}
	if t := r.byPath[path]; t != nil {
		t.add(o, d)
	}
	if block >= 0 && block < r.nBlocks {
		bs := r.byBlock[path]
		if bs[block] == nil {
			bs[block] = &blockTally{}
		}
		bs[block].add(o, d.sent)
	}
}

func (r *phaseRecord) drop() {
	r.mu.Lock()
	r.dropped++
	r.mu.Unlock()
}

// opened: connections dialed while the phase ran.
func (r *phaseRecord) opened(n int64) {
	r.mu.Lock()
	r.dialed += n
	r.mu.Unlock()
}

// merge: o's figures added to r's, o another sender's share of the same
// phase (fleet.go): counts summed, histograms merged exactly (their counts
// added), a block's durations appended. Both are done with: no request of
// either is in flight.
func (r *phaseRecord) merge(o *phaseRecord) {
	r.all.merge(o.all)
	r.late += o.late
	r.dropped += o.dropped
	r.dialed += o.dialed
	for path, t := range o.byPath {
		r.byPath[path].merge(t)
	}
	for path, bs := range o.byBlock {
		for b, bt := range bs {
			if bt == nil {
				continue
			}
			if r.byBlock[path][b] == nil {
				r.byBlock[path][b] = &blockTally{}
			}
			mine := r.byBlock[path][b]
			mine.requests += bt.requests
			mine.failed += bt.failed
			mine.us = append(mine.us, bt.us...)
		}
	}
	for i, byPath := range o.byRoute {
		for path, t := range byPath {
			mine := r.byRoute[i][path]
			if mine == nil {
				mine = &routeTally{tally: newTally(r.top, false), blockN: make([]int64, r.nBlocks), blockSumUS: make([]int64, r.nBlocks)}
				r.byRoute[i][path] = mine
			}
			mine.tally.merge(t.tally)
			for b := range t.blockN {
				mine.blockN[b] += t.blockN[b]
				mine.blockSumUS[b] += t.blockSumUS[b]
			}
		}
	}
}

// merge: o's counts and histograms added to t's (the same shape: both full
// or both not).
func (t *tally) merge(o *tally) {
	t.requests += o.requests
	t.failed += o.failed
	for k, n := range o.statuses {
		t.statuses[k] += n
	}
	t.sent.Merge(o.sent)
	if t.due != nil {
		t.due.Merge(o.due)
		t.queue.Merge(o.queue)
		t.first.Merge(o.first)
	}
}

// finish: r's phase of load.json made now, and r's histograms and
// durations let go (a histogram is 139 KB; a run keeps a phase's figures
// only until its last request is back): what stays is that phase, its
// requests, failures and drops (loadJSON's totals and thresholds).
func (r *phaseRecord) finish(p *plan, ph *phase) {
	doc := phaseJSON(p, ph, r)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.json = doc
	r.all = &tally{requests: r.all.requests, failed: r.all.failed}
	r.byPath, r.byBlock, r.byRoute = nil, nil, nil
}
