package main

import (
	"errors"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func switches(t *testing.T, c prometheus.Collector, kind string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "app_process_context_switches_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == kind {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no app_process_context_switches_total{kind=%q}", kind)
	return 0
}

// A thread that sleeps gives up the CPU: the process's voluntary switches
// must grow by at least that many.
func TestRusageCollectorCountsVoluntarySwitches(t *testing.T) {
	before := switches(t, newRusageCollector(), "voluntary")
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		for i := 0; i < 20; i++ {
			time.Sleep(time.Millisecond)
		}
		close(done)
	}()
	<-done
	after := switches(t, newRusageCollector(), "voluntary")
	if after-before < 20 {
		t.Fatalf("voluntary switches grew by %v over 20 sleeps of a locked thread, want >= 20", after-before)
	}
}

func TestRusageCollectorLabelsEachKind(t *testing.T) {
	c := newRusageCollector()
	c.rusage = func(ru *syscall.Rusage) error { ru.Nvcsw, ru.Nivcsw = 7, 3; return nil }
	if v, i := switches(t, c, "voluntary"), switches(t, c, "involuntary"); v != 7 || i != 3 {
		t.Fatalf("voluntary=%v involuntary=%v, want 7 and 3 (getrusage's nvcsw and nivcsw)", v, i)
	}
}

func TestRusageCollectorEmitsNothingOnError(t *testing.T) {
	c := newRusageCollector()
	c.rusage = func(*syscall.Rusage) error { return errors.New("no rusage") }
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("got %d series from a failing getrusage, want none", n)
	}
}

// The CPU time is user + system from getrusage, in seconds, to the microsecond.
func TestRusageCollectorCPUSeconds(t *testing.T) {
	c := newRusageCollector()
	c.rusage = func(ru *syscall.Rusage) error {
		ru.Utime = syscall.Timeval{Sec: 1, Usec: 500000}
		ru.Stime = syscall.Timeval{Sec: 0, Usec: 250}
		return nil
	}
	const want = `
# HELP app_process_cpu_seconds_total CPU time of the app process (user and system, all threads), from getrusage: microsecond resolution, where process_cpu_seconds_total counts 10 ms clock ticks.
# TYPE app_process_cpu_seconds_total counter
app_process_cpu_seconds_total 1.50025
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "app_process_cpu_seconds_total"); err != nil {
		t.Fatal(err)
	}
}

// The real process: the counter follows the CPU it spends (spinning until it
// shows 20 ms more, within 2 s even on a busy machine).
func TestRusageCollectorCPUSecondsMove(t *testing.T) {
	c := newRusageCollector()
	read := func() float64 {
		return testutil.ToFloat64(prometheus.CollectorFunc(func(ch chan<- prometheus.Metric) {
			inner := make(chan prometheus.Metric, 3)
			c.Collect(inner)
			close(inner)
			for m := range inner {
				if strings.Contains(m.Desc().String(), "app_process_cpu_seconds_total") {
					ch <- m
				}
			}
		}))
	}
	before := read()
	for start := time.Now(); read()-before < 0.02; {
		if time.Since(start) > 2*time.Second {
			t.Fatalf("CPU time grew by %v s over 2 s of spinning, want >= 0.02", read()-before)
		}
	}
}
