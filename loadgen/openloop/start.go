package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"
)

// startLateMax: how long after the run's start instant (OPENLOOP_START_AT) a
// generator may come up to it. Each of a Kubernetes run's pods sends its
// share of one schedule counting from the instant, and
// loadgen/merge_segments.py adds their seconds as the same seconds (it
// refuses pods whose start_ms differ by more than this, its
// START_SPREAD_MAX_MS). A pod that comes up later would send the requests
// already due in a burst, or, counting from its own start, a schedule
// shifted from the others': it refuses to run instead.
const startLateMax = 5 * time.Millisecond

// startAheadMax: how far ahead the start instant may be: further is taken
// for a mistake (microseconds, or another clock), not a wait.
const startAheadMax = time.Hour

// start: when the run began. at is its schedule's start (load.json's
// start_ms): the instant OPENLOOP_START_AT gave, or, with none, when this
// process came to it. late is how long after the instant it actually began
// (load.json's start_late_ms, with an instant only): the timer's wake-up lag,
// or how late it came up, within startLateMax; a wake-up later than that
// (a busy node) does not move the schedule: the requests it delays are
// counted late, as anywhere in the run.
type start struct {
	at      time.Time
	late    time.Duration
	instant bool
}

// begin waits for the run's start instant on clk, and refuses (a setting
// error: exit 2) where this process comes up more than startLateMax after
// it. Without an instant the run starts now.
func begin(ctx context.Context, cfg config, clk *clock, stdout io.Writer) (start, error) {
	if cfg.startAt.IsZero() {
		return start{at: time.Now()}, nil
	}
	at := cfg.startAt
	switch ahead := time.Until(at); {
	case ahead > startAheadMax:
		return start{}, settingError{fmt.Errorf("OPENLOOP_START_AT=%d: %v from now, more than %v ahead: unix milliseconds of this run's start, e.g. now + K8S_START_LEAD",
			at.UnixMilli(), ahead.Round(time.Second), startAheadMax)}
	case -ahead > startLateMax:
		return start{}, settingError{fmt.Errorf("OPENLOOP_START_AT=%d: this generator came up %.3f ms after the run's start instant, more than the %v it may: "+
			"it sends nothing (its share of the schedule would go out in a burst or shifted from the other pods'); raise K8S_START_LEAD, the lead scripts/k8s.sh gives the pods before the instant",
			at.UnixMilli(), inMs(-ahead), startLateMax)}
	case ahead > 0:
		fmt.Fprintf(stdout, "waiting %.3f s for the run's start instant, %s (OPENLOOP_START_AT=%d)\n",
			ahead.Seconds(), at.UTC().Format(time.RFC3339Nano), at.UnixMilli())
	}
	if !clk.until(ctx, at) {
		return start{}, fmt.Errorf("interrupted before the run's start instant: nothing sent")
	}
	late := time.Since(at)
	fmt.Fprintf(stdout, "began %.3f ms after the run's start instant\n", inMs(late))
	return start{at: at, late: late, instant: true}, nil
}

// inMs: a duration in milliseconds, to the microsecond.
func inMs(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

// fields: load.json's start_ms, and start_late_ms where an instant was given.
func (s start) fields(doc map[string]any) {
	doc["start_ms"] = s.at.UnixMilli()
	if s.instant {
		doc["start_late_ms"] = inMs(s.late)
	}
}
