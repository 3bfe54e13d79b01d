package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// sender sends the plan's requests on time, open loop: request i of a phase
// goes out at its due time whether or not earlier ones have come back, and
// its duration is taken from that due time (coordinated omission cannot hide
// a stall) as well as from its actual send.
type sender struct {
	client   *http.Client
	slots    chan struct{} // one per request in flight
	inFlight sync.WaitGroup
	m        *metrics
	clock    *clock
	seg, n   int
}

func newSender(cfg config, m *metrics, c *clock) *sender {
	// Connections to nginx are kept and reused, as a browser or k6 does;
	// what differs between the paths is nginx's side. As many idle ones as
	// can be in flight, so that none is closed and reopened under load.
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: cfg.timeout}).DialContext,
		MaxIdleConns:        cfg.maxInFlight,
		MaxIdleConnsPerHost: cfg.maxInFlight,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &sender{
		client: &http.Client{Transport: tr, Timeout: cfg.timeout},
		slots:  make(chan struct{}, cfg.maxInFlight),
		m:      m, clock: c, seg: cfg.segment, n: cfg.segments,
	}
}

// phase sends one phase's stream, from start (its planned start) for its
// duration: the indexes of this process's segment. It returns once the last
// one is sent; those still in flight are waited for by wait.
func (s *sender) phase(ctx context.Context, p *plan, ph *phase, start time.Time, rec *phaseRecord) {
	labels := s.m.phaseLabels(ph)
	total := p.requests(ph)
	for i := s.seg; i < total; i += s.n {
		due := start.Add(p.at(ph, i))
		if !s.clock.until(ctx, due) {
			return
		}
		path, block := p.target(ph, i)
		select {
		case s.slots <- struct{}{}:
		default:
			rec.drop()
			s.m.dropped(labels, path)
			continue
		}
		s.inFlight.Add(1)
		method, url := ph.request(path, i)
		go s.one(ctx, method, url, path, block, ph.route(i), due, rec, labels)
	}
}

// one request: sent now, timed to its last byte, recorded.
func (s *sender) one(ctx context.Context, method, url, path string, block, route int, due time.Time, rec *phaseRecord, labels phaseLabels) {
	s.m.inFlight.Inc()
	defer func() { s.m.inFlight.Dec(); <-s.slots; s.inFlight.Done() }()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return // the plan's URLs are checked before the run starts
	}
	sent := time.Now()
	resp, err := s.client.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			resp = nil
		}
	}
	done := time.Now()
	o := classify(resp, err)
	late := sent.Sub(due) > lateAfter
	rec.add(path, block, o, done.Sub(sent), done.Sub(due), late)
	rec.addRoute(route, path, block, o, done.Sub(sent))
	s.m.observe(labels, path, o, done.Sub(sent), late)
}

// wait: until every request sent has come back or timed out.
func (s *sender) wait() { s.inFlight.Wait() }
