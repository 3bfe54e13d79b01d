package main

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync/atomic"
	"time"
)

// CPULimits bound the CPU-bound work (/cpu) the app takes on at once. Go
// shares a core evenly between runnable goroutines, so without a bound a
// burst of /cpu requests makes every one of them slow (400 of them all ran
// past nginx's 30 s timeout in issue 14) and pushes /ping to the back of the
// run queue. Beyond Concurrency running, up to Queue requests wait for a slot
// for at most QueueTimeout; the rest get a 503 at once.
type CPULimits struct {
	Concurrency  int           // APP_CPU_CONCURRENCY: /cpu requests running at once
	Queue        int           // APP_CPU_QUEUE: /cpu requests waiting for a slot
	QueueTimeout time.Duration // APP_CPU_QUEUE_TIMEOUT: how long one waits
}

// defaultCPULimits: one running request per core Go uses (GOMAXPROCS follows
// the container's CPU limit); a queue deeper than what the lab keeps in
// flight on one path while the app keeps up (openloop: rate x latency, a few
// at the default RATE; make max: CONNECTIONS=64); a wait
// well inside nginx's 30 s proxy_read_timeout, so a request that cannot run
// gets the app's 503 and not nginx's 504.
func defaultCPULimits() CPULimits {
	return CPULimits{Concurrency: runtime.GOMAXPROCS(0), Queue: 256, QueueTimeout: 5 * time.Second}
}

type cpuLimiter struct {
	limits  CPULimits
	slots   chan struct{}
	waiting atomic.Int64
}

func newCPULimiter(l CPULimits) *cpuLimiter {
	return &cpuLimiter{limits: l, slots: make(chan struct{}, l.Concurrency)}
}

// acquire takes a slot, waiting if allowed. On failure it returns the status
// and message to answer with; on success the caller must release.
func (l *cpuLimiter) acquire(ctx context.Context) (int, string) {
	select {
	case l.slots <- struct{}{}:
		return 0, ""
	default:
	}
	if l.waiting.Add(1) > int64(l.limits.Queue) {
		l.waiting.Add(-1)
		return http.StatusServiceUnavailable, fmt.Sprintf(
			"too many /cpu requests: %d running (APP_CPU_CONCURRENCY) and %d waiting (APP_CPU_QUEUE); try again later",
			l.limits.Concurrency, l.limits.Queue)
	}
	defer l.waiting.Add(-1)
	t := time.NewTimer(l.limits.QueueTimeout)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return 0, ""
	case <-t.C:
		return http.StatusServiceUnavailable, fmt.Sprintf(
			"no /cpu slot free within %s (APP_CPU_QUEUE_TIMEOUT), %d running (APP_CPU_CONCURRENCY); try again later",
			l.limits.QueueTimeout, l.limits.Concurrency)
	case <-ctx.Done():
		return statusClientClosed, "request cancelled"
	}
}

func (l *cpuLimiter) release() { <-l.slots }
