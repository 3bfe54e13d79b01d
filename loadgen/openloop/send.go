package main

import (
	"context"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// sender sends the plan's requests on time, open loop: request i of a phase
// goes out at its due time whether or not earlier ones have come back, and
// its duration is taken from that due time (coordinated omission cannot hide
// a stall) as well as from its actual send. One pacer (phase) waits on the
// clock and, at each wake-up, hands every request already due to an idle
// connection of its path's pool (conn.go); a request that finds none is an
// overflow, counted (dropped_iterations), never sent late.
type sender struct {
	ctx     context.Context
	m       *metrics
	clock   *clock
	seg, n  int // this sender sends the requests whose index is seg modulo n
	of      int // senders in this process (fleet): the pools before the run are split among them
	size    int // connections per path at most (this sender's share of OPENLOOP_CONNECTIONS)
	timeout time.Duration
	dialer  *net.Dialer
	pools   map[string]*pool // by path and endpoint
	conns   sync.WaitGroup   // one per connection's goroutine
	opened  atomic.Int64     // connections dialed, ever
	stop    func() bool
}

func newSender(ctx context.Context, cfg config, m *metrics, c *clock) *sender {
	s := &sender{ctx: ctx, m: m, clock: c, seg: cfg.segment, n: cfg.segments, of: 1, size: cfg.connections,
		timeout: cfg.timeout, dialer: &net.Dialer{Timeout: cfg.timeout, KeepAlive: -1}, pools: map[string]*pool{}}
	s.stop = context.AfterFunc(ctx, func() {
		for _, p := range s.pools {
			p.abort()
		}
	})
	return s
}

// poolFor: the pool of a path's endpoint (made once, kept for the run).
func (s *sender) poolFor(path, rawURL string) (*pool, error) {
	ep, err := endpointOf(rawURL)
	if err != nil {
		return nil, err
	}
	key := path + " " + ep.addr + " " + ep.host
	p := s.pools[key]
	if p == nil {
		p = &pool{ep: ep, size: s.size, dialer: s.dialer, s: s}
		s.pools[key] = p
	}
	return p, nil
}

// preOpen: before the run, each path's connections its peak rate needs at
// preOpenLatency each (Little's law; at least 2 a path, split among the
// senders; at most this sender's share of OPENLOOP_CONNECTIONS), dialed;
// more are dialed while it runs where a path's answers take longer. It
// returns how many were opened and wanted.
func (s *sender) preOpen(p *plan) (opened, wanted int, err error) {
	peak := map[*pool]float64{}
	for i := range p.Phases {
		ph := &p.Phases[i]
		paths := []string{ph.Path}
		if ph.Path == mix {
			paths = ph.Paths
		}
		rate := float64(p.requests(ph)) / ph.DurationS / float64(s.n) / float64(len(paths))
		for _, path := range paths {
			pl, err := s.poolFor(path, ph.url(path))
			if err != nil {
				return 0, 0, fmt.Errorf("PLAN: phase %s: %w", ph.Name, err)
			}
			peak[pl] = max(peak[pl], rate)
		}
	}
	ctx, cancel := context.WithTimeout(s.ctx, min(s.timeout, preOpenWait))
	defer cancel()
	var wg sync.WaitGroup
	var total atomic.Int64
	for pl, rate := range peak {
		n := min(max((2+s.of-1)/s.of, int(math.Ceil(rate*preOpenLatency.Seconds()))), pl.size)
		wanted += n
		wg.Go(func() { total.Add(int64(pl.open(ctx, n))) })
	}
	wg.Wait()
	return int(total.Load()), wanted, nil
}

// preOpenLatency: the answer time the connections opened before the run
// are counted for (a path's peak rate x this many in flight).
const preOpenLatency = 5 * time.Millisecond

// preOpenWait: how long the dials before the run may take (a path that
// does not answer them is dialed again by its requests).
const preOpenWait = 5 * time.Second

// phase sends one phase's stream, from start (its planned start) for its
// duration: the indexes of this process's segment. It returns once the last
// one is handed out; those still in flight are waited for by wait.
func (s *sender) phase(ctx context.Context, p *plan, ph *phase, start time.Time, rec *phaseRecord) {
	labels := s.m.phaseLabels(ph)
	type target struct {
		pool *pool
		pm   *pathMetrics
	}
	targets := map[string]target{}
	paths := []string{ph.Path}
	if ph.Path == mix {
		paths = ph.Paths
	}
	for _, path := range paths {
		pl, err := s.poolFor(path, ph.url(path))
		if err != nil {
			return // the plan's URLs are checked before the run starts
		}
		targets[path] = target{pl, s.m.forPath(labels, path)}
	}
	total := p.requests(ph)
	var now time.Time
	for i := s.seg; i < total; i += s.n {
		due := start.Add(p.at(ph, i))
		if due.After(now) { // else due by the last look at the clock: sent in this wake-up's batch
			if !s.clock.until(ctx, due) {
				return
			}
			now = time.Now()
		}
		path, block := p.target(ph, i)
		t := targets[path]
		c := t.pool.take()
		if c == nil {
			rec.drop()
			t.pm.overflow()
			continue
		}
		head, suffix := ph.request(i)
		rec.pending.Add(1)
		c.send(job{head: head, target: suffix, due: due, path: path, block: block, route: ph.route(i), rec: rec, pm: t.pm})
	}
}

// wait: until every request sent has come back or timed out; then the
// connections are closed.
func (s *sender) wait() {
	for _, p := range s.pools {
		p.end()
	}
	s.conns.Wait()
	s.stop()
}
