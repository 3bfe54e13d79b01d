// Command openloop is uds-lab's load generator: it runs the plan
// loadgen/plan.py wrote (make load, make sweep, the Kubernetes Job), one
// open-loop arrival stream at the plan's rate per phase, and writes
// load.json beside the plan (load.schema.json) for the report, with every
// request timed and its durations kept in mergeable HDR histograms.
// Prometheus scrapes it as it runs (OPENLOOP_METRICS_ADDR).
//
//	openloop          run the plan PLAN names
//	openloop check    read and check the plan, say its phases; no load
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Exit codes: 1, a threshold failed: more than 1% of the run's requests
// failed, or more than 1% of a phase's requests were dropped, not sent (the
// report still reads load.json and says why); 2, a bad setting or plan, or
// a start instant (OPENLOOP_START_AT) already past when it came up (start.go).
// run returns errFailed wrapped, with what failed (verdict).
var errFailed = errors.New("the run failed its thresholds")

type settingError struct{ error }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	errOut := messages(os.Getenv, os.Stdout, os.Stderr)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, errOut)
	stop()
	var se settingError
	switch {
	case err == nil:
	case errors.As(err, &se):
		fmt.Fprintf(errOut, "openloop: %v\n", err)
		os.Exit(2)
	default:
		fmt.Fprintf(errOut, "openloop: %v\n", err)
		os.Exit(1)
	}
}

// messages: where openloop says what went wrong. With OPENLOOP_LOG_LOAD_JSON
// (a Kubernetes pod, whose log scripts/k8s.sh reads load.json from) on
// stdout too: the runtime reads a container's stdout and stderr through two
// pipes, so a line on stderr can land inside load.json in the log (seen: "more
// than 1% of requests failed" between two of its lines); one stream keeps
// the order.
func messages(getenv func(string) string, stdout, stderr io.Writer) io.Writer {
	if on, err := strconv.ParseBool(getenv("OPENLOOP_LOG_LOAD_JSON")); err == nil && on {
		return stdout
	}
	return stderr
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 1 || len(args) == 1 && args[0] != "check" {
		return settingError{fmt.Errorf("arguments %q: none (run the plan) or check (read it, send nothing)", args)}
	}
	cfg, p, err := prepare(getenv)
	if err != nil {
		return err
	}
	if len(args) == 1 {
		fmt.Fprintf(stdout, "%s: %d phases, %d requests: %s\n", cfg.plan, len(p.Phases), p.total(), p.Describe)
		return nil
	}
	m := newMetrics(p.Testid)
	if cfg.metricsAddr != "" {
		stopMetrics, err := m.serve(ctx, cfg.metricsAddr, stderr)
		if err != nil {
			return settingError{err}
		}
		defer stopMetrics()
	}
	seg := ""
	if cfg.segments > 1 {
		seg = fmt.Sprintf(" (segment %d/%d: every request whose index is %d modulo %d)", cfg.segment, cfg.segments, cfg.segment, cfg.segments)
	}
	fmt.Fprintf(stdout, "uds-lab openloop run %s%s: %s\n", p.Testid, seg, p.Describe)
	st, recs, err := send(ctx, cfg, p, m, stdout)
	if err != nil {
		return err
	}
	if cfg.metricsAddr != "" && !m.awaitScrape(ctx, time.Now(), cfg.scrapeWait) {
		fmt.Fprintf(stderr, "openloop: no scrape within OPENLOOP_SCRAPE_WAIT=%v of the last request: Prometheus may lack the run's last seconds (load.json has them all)\n", cfg.scrapeWait)
	}
	doc := loadJSON(p, st, recs)
	if err := output(cfg, p, doc, stdout); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: load.json holds the phases run so far")
	}
	if f := doc["thresholds_failed"].([]string); len(f) > 0 {
		return fmt.Errorf("%w: %s", errFailed, verdict(f))
	}
	return nil
}

// prepare: the settings and the plan, checked (a settingError where one is
// bad); the Go runtime's memory limit set.
func prepare(getenv func(string) string) (config, *plan, error) {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return cfg, nil, settingError{err}
	}
	setMemoryLimit(getenv, os.ReadFile)
	p, err := readPlan(cfg.plan)
	if err != nil {
		return cfg, nil, settingError{err}
	}
	if err := checkURLs(p); err != nil {
		return cfg, nil, settingError{err}
	}
	return cfg, p, nil
}

// send runs the plan from its start (begin): its senders' connections
// opened first, then every phase; the start and each phase's record.
func send(ctx context.Context, cfg config, p *plan, m *metrics, stdout io.Writer) (start, []*phaseRecord, error) {
	f, err := newFleet(ctx, cfg, m)
	if err != nil {
		return start{}, nil, fmt.Errorf("a timer: %w", err)
	}
	defer f.close()
	opened, wanted, err := f.preOpen(p)
	if err != nil {
		return start{}, nil, settingError{err}
	}
	fmt.Fprintf(stdout, "opened %d of %d connections to the paths (at most %d a path, OPENLOOP_CONNECTIONS), senders: %d (OPENLOOP_SENDERS)\n",
		opened, wanted, cfg.connections, len(f.ss))
	st, err := begin(ctx, cfg, f.ss[0].clock, stdout)
	if err != nil {
		return start{}, nil, err
	}
	return st, f.run(ctx, p, st.at, stdout), nil
}

// output: load.json beside the plan, the table on stdout, and, in a
// Kubernetes Job's pod, load.json on stdout between marker lines
// (scripts/k8s.sh reads it from the pod's log).
func output(cfg config, p *plan, doc map[string]any, stdout io.Writer) error {
	if err := writeFile(loadFile(cfg.plan), doc); err != nil {
		return err
	}
	table(stdout, p, doc)
	if !cfg.logLoad {
		return nil
	}
	fmt.Fprintf(stdout, "--- uds-lab load.json %d/%d ---\n", cfg.segment, cfg.segments)
	if err := writeJSON(stdout, doc); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "--- end of load.json ---")
	return nil
}

// checkURLs: every URL the plan names is an http one.
func checkURLs(p *plan) error {
	for _, ph := range p.Phases {
		urls := []string{ph.URL}
		if ph.Path == mix {
			urls = urls[:0]
			for _, path := range ph.Paths {
				urls = append(urls, ph.URLs[path])
			}
		}
		for _, u := range urls {
			if pu, err := url.Parse(u); err != nil || pu.Scheme != "http" || pu.Host == "" {
				return fmt.Errorf("PLAN: phase %s: %q is not an http:// URL", ph.Name, u)
			}
		}
	}
	return nil
}

// sleepUntil: false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// writeFile: v as JSON into name, whole or not at all.
func writeFile(name string, v any) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), ".load-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := writeJSON(tmp, v); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}
