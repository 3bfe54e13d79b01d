package main

import (
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
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
	if o.status > 0 {
		return strconv.Itoa(o.status)
	}
	return o.failure
}

// classify: a request's outcome from its response or error.
func classify(resp *http.Response, err error) outcome {
	if err == nil {
		return outcome{status: resp.StatusCode}
	}
	var op *net.OpError
	dial := errors.As(err, &op) && op.Op == "dial"
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout() && dial:
		return outcome{failure: "connect_timeout"}
	case errors.As(err, &ne) && ne.Timeout():
		return outcome{failure: "timeout"}
	case errors.Is(err, syscall.ECONNREFUSED):
		return outcome{failure: "refused"}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return outcome{failure: "reset"}
	}
	return outcome{failure: "error"}
}

// tally: one set of requests' counts and the durations of its successes,
// from the actual send (sent) and, but in a block, from the due time (due).
type tally struct {
	requests, failed int64
	sent, due        *hdrhistogram.Histogram
	statuses         map[string]int64
}

func newTally(top time.Duration, withDue bool) *tally {
	t := &tally{sent: newHist(top), statuses: map[string]int64{}}
	if withDue {
		t.due = newHist(top)
	}
	return t
}

func (t *tally) add(o outcome, sent, due time.Duration) {
	t.requests++
	t.statuses[o.key()]++
	if !o.ok() {
		t.failed++
		return
	}
	record(t.sent, sent)
	if t.due != nil {
		record(t.due, due)
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
	dropped int64 // not sent: maxInFlight requests were in flight
	byPath  map[string]*tally
	byBlock map[string][]*blockTally // a measured interleaved stream: per path, per block (nil until used)
	byRoute []map[string]*routeTally // a replay: per route of the plan, per path (nil until used)
	nBlocks int
	top     time.Duration
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
	t.add(o, sent, 0)
	if o.ok() && block >= 0 && block < r.nBlocks {
		t.blockN[block]++
		t.blockSumUS[block] += max(sent.Microseconds(), histLowest)
	}
}

func (r *phaseRecord) add(path string, block int, o outcome, sent, due time.Duration, late bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all.add(o, sent, due)
	if late {
		r.late++
	}
	if t := r.byPath[path]; t != nil {
		t.add(o, sent, due)
	}
	if block >= 0 && block < r.nBlocks {
		bs := r.byBlock[path]
		if bs[block] == nil {
			bs[block] = &blockTally{}
		}
		bs[block].add(o, sent)
	}
}

func (r *phaseRecord) drop() {
	r.mu.Lock()
	r.dropped++
	r.mu.Unlock()
}
