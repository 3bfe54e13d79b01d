package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Plan is what loadgen/plan.py writes for MODE=floor (the fields read here).
type Plan struct {
	TestID   string          `json:"testid"`
	Settings json.RawMessage `json:"settings"`
	Describe string          `json:"describe"`
	Phases   []Phase         `json:"phases"`
}

// Phase: one measure of one transport in one round.
type Phase struct {
	Name      string  `json:"name"`
	Transport string  `json:"transport"`
	Measure   string  `json:"measure"` // "rtt" (round trips on one connection) or "connect"
	Size      int     `json:"size"`    // the message's bytes (connect: 1)
	Round     int     `json:"round"`
	Phase     string  `json:"phase"`
	Duration  float64 `json:"duration_s"`
	Address   string  `json:"address"`           // unix:/path or tcp:host:port
	MaxOps    int     `json:"max_ops,omitempty"` // stop after this many (0: the duration only)
	Progress  string  `json:"progress,omitempty"`
}

// Result: a phase as floor.json holds it.
type Result struct {
	Phase
	StartOffset float64  `json:"start_offset_s"`
	Seconds     float64  `json:"seconds"`
	Ops         int      `json:"ops"`
	Errors      int      `json:"errors"`
	OpsPerS     float64  `json:"ops_per_s"`
	P50us       *float64 `json:"p50_us"`
	P99us       *float64 `json:"p99_us"`
	MeanUs      *float64 `json:"mean_us"`
}

func bench(ctx context.Context, cfg BenchConfig, stdout io.Writer) error {
	raw, err := os.ReadFile(cfg.Plan)
	if err != nil {
		return fmt.Errorf("FLOOR_PLAN: %w", err)
	}
	var plan Plan
	if err := json.Unmarshal(raw, &plan); err != nil {
		return fmt.Errorf("FLOOR_PLAN %s: %w", cfg.Plan, err)
	}
	if len(plan.Phases) == 0 {
		return fmt.Errorf("FLOOR_PLAN %s: no phases", cfg.Plan)
	}
	for _, ph := range plan.Phases {
		if _, _, err := splitAddress(ph.Address); err != nil {
			return fmt.Errorf("%s: %w", ph.Name, err)
		}
		if ph.Measure != "rtt" && ph.Measure != "connect" {
			return fmt.Errorf("%s: measure %q: want rtt or connect", ph.Name, ph.Measure)
		}
	}
	fmt.Fprintf(stdout, "uds-lab floor run %s: %s\n", plan.TestID, plan.Describe)
	start := time.Now()
	out := make([]Result, 0, len(plan.Phases))
	for _, ph := range plan.Phases {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintln(stdout, ph.Progress)
		res, err := measure(ctx, ph)
		if err != nil {
			return fmt.Errorf("%s: %w", ph.Name, err)
		}
		res.StartOffset = (res.StartOffset - float64(start.UnixMilli())) / 1000 // ms since the run's start, in s
		res.Progress = ""
		fmt.Fprintf(stdout, "%-34s %9d ops %10.0f/s  p50 %8.2f µs  p99 %8.2f µs  errors %d\n",
			ph.Name, res.Ops, res.OpsPerS, deref(res.P50us), deref(res.P99us), res.Errors)
		out = append(out, res)
	}
	doc := map[string]any{"testid": plan.TestID, "settings": plan.Settings, "start_ms": start.UnixMilli(), "phases": out}
	b, _ := json.MarshalIndent(doc, "", " ")
	path := filepath.Join(filepath.Dir(cfg.Plan), "floor.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", path)
	return nil
}

func deref(v *float64) float64 {
	if v == nil {
		return math.NaN()
	}
	return *v
}

func splitAddress(a string) (network, addr string, err error) {
	network, addr, ok := strings.Cut(a, ":")
	if !ok || addr == "" || (network != "unix" && network != "tcp") {
		return "", "", fmt.Errorf("address %q: want unix:/path or tcp:host:port", a)
	}
	return network, addr, nil
}

// measure runs one phase for its duration: round trips of Size bytes on one
// connection (rtt), or new connections each with a 1-byte exchange and a
// close (connect). Each operation is timed on its own.
func measure(ctx context.Context, ph Phase) (Result, error) {
	network, addr, _ := splitAddress(ph.Address)
	msg := frame(ph.Size)
	p := &prober{d: net.Dialer{Timeout: 2 * time.Second}, network: network, addr: addr, msg: msg,
		reply: make([]byte, len(msg))}
	lat := make([]time.Duration, 0, 1<<16)
	errs := 0
	defer func() {
		if p.conn != nil {
			p.conn.Close()
		}
	}()
	// The rtt phase's connection is open before the clock starts.
	if ph.Measure == "rtt" {
		c, err := p.d.DialContext(ctx, network, addr)
		if err != nil {
			return Result{}, fmt.Errorf("%s %s: %w (is the floor server up?)", network, addr, err)
		}
		p.conn = c
	}
	begin := time.Now()
	deadline := begin.Add(time.Duration(ph.Duration * float64(time.Second)))
	for now := begin; now.Before(deadline) && ctx.Err() == nil && (ph.MaxOps == 0 || len(lat) < ph.MaxOps); now = time.Now() {
		t0 := time.Now()
		redial, err := p.once(ctx, ph.Measure)
		if err != nil {
			errs++
			if !redial && errs > 1000 {
				return Result{}, fmt.Errorf("%s %s: more than 1000 errors, the last: %w", network, addr, err)
			}
			continue
		}
		lat = append(lat, time.Since(t0))
	}
	return summarize(ph, begin, lat, errs), nil
}

// prober performs a phase's operations on one address.
type prober struct {
	d             net.Dialer
	network, addr string
	msg, reply    []byte
	conn          net.Conn // rtt: the connection, nil after a failed exchange until redialled
}

// once performs one operation: a round trip on the rtt connection (dialled
// again if the last exchange failed), or a new connection's 1-byte exchange
// and close (connect). redial: the rtt connection could not be dialled
// again, an error that counts but never ends the phase.
func (p *prober) once(ctx context.Context, measure string) (redial bool, err error) {
	if measure == "rtt" {
		if p.conn == nil {
			if p.conn, err = p.d.DialContext(ctx, p.network, p.addr); err != nil {
				return true, err
			}
		}
		if err = exchange(p.conn, p.msg, p.reply); err != nil {
			p.conn.Close()
			p.conn = nil
		}
		return false, err
	}
	var c net.Conn
	if c, err = p.d.DialContext(ctx, p.network, p.addr); err == nil {
		err = exchange(c, p.msg, p.reply)
		c.Close()
	}
	return false, err
}

// summarize is a phase's Result: its operations per second, errors, and the
// operations' p50, p99 and mean where there were any.
func summarize(ph Phase, begin time.Time, lat []time.Duration, errs int) Result {
	secs := time.Since(begin).Seconds()
	res := Result{Phase: ph, StartOffset: float64(begin.UnixMilli()), Seconds: math.Round(secs*1e6) / 1e6,
		Ops: len(lat), Errors: errs, OpsPerS: float64(len(lat)) / secs}
	if len(lat) > 0 {
		slices.Sort(lat)
		p50, p99, mean := quantile(lat, 0.50), quantile(lat, 0.99), meanOf(lat)
		res.P50us, res.P99us, res.MeanUs = &p50, &p99, &mean
	}
	return res
}

// quantile: the nearest-rank q-quantile of sorted durations, in µs.
func quantile(sorted []time.Duration, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return float64(sorted[max(i, 0)].Nanoseconds()) / 1e3
}

func meanOf(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum.Nanoseconds()) / float64(len(ds)) / 1e3
}
