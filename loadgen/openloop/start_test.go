package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// arrivals: a reference server that notes when each request arrived.
type arrivals struct {
	mu sync.Mutex
	at []time.Time
}

func (a *arrivals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	a.mu.Lock()
	a.at = append(a.at, now)
	a.mu.Unlock()
	w.Write([]byte("pong"))
}

// shortPlan: one phase of 10 requests to srv's tcp path, 50 a second, from
// the run's start.
func shortPlan(t *testing.T, srv string) string {
	t.Helper()
	u := srv + "/tcp/ping"
	b, _ := json.Marshal(map[string]any{
		"testid": "t", "urls": map[string]string{"tcp": u}, "gap_s": 0, "idle": nil, "describe": "a short run",
		"settings": map[string]any{"mode": "rate", "generator": "openloop", "rate": 50, "seed": 7, "paths": []string{"tcp"}},
		"phases": []any{map[string]any{"name": "ping__tcp__r1", "workload": "ping", "path": "tcp", "round": 1,
			"phase": "measure", "endpoint": "/ping", "start_offset_s": 0, "duration_s": 0.2, "url": u, "progress": "tcp"}},
	})
	name := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

func runAt(plan string, startAt int64) (string, error) {
	getenv := func(k string) string {
		return map[string]string{"PLAN": plan, "OPENLOOP_METRICS_ADDR": "off",
			"OPENLOOP_START_AT": strconv.FormatInt(startAt, 10)}[k]
	}
	var out bytes.Buffer
	err := run(context.Background(), nil, getenv, &out, &out)
	return out.String(), err
}

// A start instant in the near future is waited for: the run's start
// (load.json's start_ms) is the instant, the reference server sees no
// request before it, and load.json says how late after it the run began
// (the timer's wake-up: a fraction of a millisecond on a quiet machine).
func TestTheStartInstantIsWaitedFor(t *testing.T) {
	a := &arrivals{}
	srv := httptest.NewServer(a)
	defer srv.Close()
	plan := shortPlan(t, srv.URL)
	instant := time.Now().Add(500 * time.Millisecond).UnixMilli()
	out, err := runAt(plan, instant)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	b, err := os.ReadFile(loadFile(plan))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		StartMs     int64    `json:"start_ms"`
		StartLateMs *float64 `json:"start_late_ms"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.StartMs != instant {
		t.Errorf("load.json's start_ms %d, want the instant %d", doc.StartMs, instant)
	}
	if doc.StartLateMs == nil || *doc.StartLateMs < 0 {
		t.Errorf("load.json's start_late_ms %v, want how late it began, >= 0", doc.StartLateMs)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.at) != 10 {
		t.Fatalf("the server saw %d requests, want 10", len(a.at))
	}
	first := a.at[0]
	for _, at := range a.at {
		if at.Before(first) {
			first = at
		}
	}
	if first.Before(time.UnixMilli(instant)) {
		t.Errorf("the first request arrived %v before the start instant", time.UnixMilli(instant).Sub(first))
	}
	if !strings.Contains(out, "waiting") || !strings.Contains(out, "OPENLOOP_START_AT="+strconv.FormatInt(instant, 10)) {
		t.Errorf("the run does not say it waits for the instant:\n%s", out)
	}
}

// A generator that comes up more than startLateMax after the instant sends
// nothing and writes nothing: a setting error (exit 2) that says how late it
// is and what to raise. So does an instant too far ahead to be meant.
func TestALateOrFarStartIsRefused(t *testing.T) {
	a := &arrivals{}
	srv := httptest.NewServer(a)
	defer srv.Close()
	plan := shortPlan(t, srv.URL)
	for _, c := range []struct {
		at   time.Duration
		want []string
	}{
		{-time.Second, []string{"OPENLOOP_START_AT=", "came up 1", "ms after the run's start instant, more than the 5ms", "raise K8S_START_LEAD"}},
		{-20 * time.Millisecond, []string{"OPENLOOP_START_AT=", "ms after the run's start instant"}},
		{2 * time.Hour, []string{"OPENLOOP_START_AT=", "more than 1h0m0s ahead"}},
	} {
		out, err := runAt(plan, time.Now().Add(c.at).UnixMilli())
		var se settingError
		if !errors.As(err, &se) {
			t.Errorf("start %v from now: %v, want a setting error\n%s", c.at, err, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("start %v from now: %q lacks %q", c.at, err, w)
			}
		}
	}
	if len(a.at) != 0 {
		t.Errorf("the server saw %d requests from refused runs", len(a.at))
	}
	if _, err := os.Stat(loadFile(plan)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused run wrote load.json (%v)", err)
	}
}

func TestAStartInstantMustBeUnixMilliseconds(t *testing.T) {
	for _, v := range []string{"soon", "-5", "0", "1.7e12"} {
		_, err := loadConfig(func(k string) string {
			return map[string]string{"PLAN": "plan.json", "OPENLOOP_START_AT": v}[k]
		})
		if err == nil || !strings.Contains(err.Error(), "OPENLOOP_START_AT") {
			t.Errorf("OPENLOOP_START_AT=%s: %v, want an error naming it", v, err)
		}
	}
	c, err := loadConfig(func(k string) string {
		return map[string]string{"PLAN": "plan.json", "OPENLOOP_START_AT": "1700000000123"}[k]
	})
	if err != nil || !c.startAt.Equal(time.UnixMilli(1_700_000_000_123)) {
		t.Errorf("OPENLOOP_START_AT=1700000000123: %v (%v)", c.startAt, err)
	}
}

// load.json's start_late_ms is there only where a start instant was given:
// without one (compose's single generator) the run starts when it comes up.
func TestStartLateIsWrittenOnlyWithAnInstant(t *testing.T) {
	p := &plan{}
	if doc := loadJSON(p, start{at: time.UnixMilli(1000)}, nil); doc["start_ms"] != int64(1000) || doc["start_late_ms"] != nil {
		t.Errorf("no instant: start_ms %v, start_late_ms %v; want 1000 and none", doc["start_ms"], doc["start_late_ms"])
	}
	doc := loadJSON(p, start{at: time.UnixMilli(1000), late: 1234567 * time.Nanosecond, instant: true}, nil)
	if doc["start_ms"] != int64(1000) || doc["start_late_ms"] != 1.235 {
		t.Errorf("an instant, 1.234567 ms late: start_ms %v, start_late_ms %v; want 1000 and 1.235", doc["start_ms"], doc["start_late_ms"])
	}
}
