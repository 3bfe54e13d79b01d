package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// fleet: the process's senders, OPENLOOP_SENDERS of them (default the CPUs
// Go may use), so that the load scales with the cores: each paces its share
// of the process's stream on its own timer and sends it from its own share
// of every path's connections. Sender k of N sends the requests of the
// process's segment (i modulo n) whose index is i+k·n modulo N·n: the
// plan's order, paths and blocks untouched, each request sent by one
// sender. Each keeps its own records; they are merged exactly (counts
// added, histograms merged) when the run ends.
type fleet struct {
	ss []*sender
}

// newFleet: cfg.senders senders, at most one per connection a path may have
// (each needs one at least), each with its own timer.
func newFleet(ctx context.Context, cfg config, m *metrics) (*fleet, error) {
	n := min(cfg.senders, cfg.connections)
	f := &fleet{}
	for k := range n {
		clk, err := newClock()
		if err != nil {
			f.close()
			return nil, err
		}
		s := newSender(ctx, shareOf(cfg, k, n), m, clk)
		s.of = n
		f.ss = append(f.ss, s)
	}
	m.countOpened(f.opened)
	return f, nil
}

// shareOf: sender k of n's settings: its indexes of the stream (the
// process's segment, split n ways) and its share of each path's
// connections (together OPENLOOP_CONNECTIONS).
func shareOf(cfg config, k, n int) config {
	c := cfg
	c.segment, c.segments = cfg.segment+k*cfg.segments, cfg.segments*n
	c.connections = cfg.connections / n
	if k < cfg.connections%n {
		c.connections++
	}
	return c
}

// opened: the connections every sender dialed, ever.
func (f *fleet) opened() int64 {
	var n int64
	for _, s := range f.ss {
		n += s.opened.Load()
	}
	return n
}

// preOpen: each sender's connections before the run, dialed at once; how
// many were opened and wanted in all.
func (f *fleet) preOpen(p *plan) (opened, wanted int, err error) {
	var wg sync.WaitGroup
	var o, w atomic.Int64
	errs := make([]error, len(f.ss))
	for k, s := range f.ss {
		wg.Go(func() {
			a, b, err := s.preOpen(p)
			o.Add(int64(a))
			w.Add(int64(b))
			errs[k] = err
		})
	}
	wg.Wait()
	return int(o.Load()), int(w.Load()), errs[0] // the same plan: the same error in each
}

// run sends every phase of the plan from start, each sender its share,
// and returns each phase's record, the senders' merged and finished
// (finish): each phase's as soon as its last request is back, so that a run
// keeps the histograms of the phases in flight only. The first sender says
// each phase's progress on stdout.
func (f *fleet) run(ctx context.Context, p *plan, start time.Time, stdout io.Writer) []*phaseRecord {
	recs := make([][]*phaseRecord, len(f.ss))
	paced := make([]sync.WaitGroup, len(p.Phases)) // phase i handed out by every sender
	for k := range f.ss {
		recs[k] = make([]*phaseRecord, len(p.Phases))
		for i := range paced {
			paced[i].Add(1)
		}
	}
	var senders, finished sync.WaitGroup
	for k, s := range f.ss {
		progress := io.Discard
		if k == 0 {
			progress = stdout
		}
		senders.Go(func() { s.all(ctx, p, start, progress, recs[k], paced) })
	}
	for i := range p.Phases {
		finished.Go(func() {
			paced[i].Wait()
			for k := range recs {
				recs[k][i].pending.Wait()
			}
			for k := 1; k < len(recs); k++ {
				recs[0][i].merge(recs[k][i])
				recs[k][i] = nil
			}
			recs[0][i].finish(p, &p.Phases[i])
		})
	}
	senders.Wait()
	finished.Wait()
	return recs[0]
}

// all: every phase of the plan in turn from its planned start, this
// sender's share, each recorded in recs (an empty record for a phase an
// interrupt kept from starting); paced[i] is told once phase i is handed out.
func (s *sender) all(ctx context.Context, p *plan, start time.Time, progress io.Writer, recs []*phaseRecord, paced []sync.WaitGroup) {
	for i := range p.Phases {
		ph := &p.Phases[i]
		recs[i] = newPhaseRecord(ph, s.timeout)
		at := start.Add(time.Duration(ph.StartOffsetS * float64(time.Second)))
		if ctx.Err() == nil && s.clock.until(ctx, at) {
			fmt.Fprintln(progress, ph.Progress)
			s.phase(ctx, p, ph, at, recs[i])
		}
		paced[i].Done()
	}
}

// wait: every sender's requests back, its connections closed.
func (f *fleet) wait() {
	for _, s := range f.ss {
		s.wait()
	}
}

// close: the senders ended and their timers closed.
func (f *fleet) close() {
	f.wait()
	for _, s := range f.ss {
		s.clock.close()
	}
}
