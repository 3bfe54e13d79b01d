package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// A path's connections: a fixed pool, kept alive from request to request
// (as a browser or k6 keeps them; what differs between the paths is
// nginx's side). Each connection is one goroutine that writes a request
// the pacer hands it, reads the answer to its last byte and records it, then
// goes back to the pool's idle ones: no goroutine and no client round trip
// per request. The request's bytes are written here (a GET or HEAD, its
// target and Host); the answer is read by fasthttp's response parser (status
// line, headers, Content-Length, chunked and close-delimited bodies, HEAD's
// none, 1xx skipped).

// endpoint: where a path's requests go: the address to dial and the URL's
// request target, the replay's targets appended to it.
type endpoint struct {
	addr, host, prefix string
}

func endpointOf(raw string) (endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return endpoint{}, err
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	prefix := u.EscapedPath()
	if u.RawQuery != "" {
		prefix += "?" + u.RawQuery
	}
	return endpoint{addr: addr, host: u.Host, prefix: prefix}, nil
}

// job: one request handed to a connection.
type job struct {
	head   bool
	target string // appended to the endpoint's prefix (a replay's), or ""
	due    time.Time
	path   string
	block  int
	route  int
	rec    *phaseRecord
	pm     *pathMetrics

	// Set by the pacer where it wrote the request itself (send).
	written time.Time
	werr    error
}

// pool: one path's connections (one endpoint), at most size of them; the
// idle ones on a stack (the last to come back goes out first).
type pool struct {
	ep     endpoint
	size   int
	dialer *net.Dialer
	s      *sender

	mu    sync.Mutex
	idle  []*conn
	all   []*conn
	ended bool
}

// take: an idle connection, or a new one while the pool has fewer than
// size; nil when every one is busy (an overflow).
func (p *pool) take() *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		return c
	}
	if len(p.all) >= p.size || p.ended {
		return nil
	}
	c := p.newConn()
	return c
}

// newConn: a connection's goroutine, not yet dialed (p.mu held).
func (p *pool) newConn() *conn {
	c := &conn{p: p, jobs: make(chan job, 1)}
	p.all = append(p.all, c)
	p.s.conns.Add(1)
	go c.loop()
	return c
}

// put: c idle again; whether the pool has ended.
func (p *pool) put(c *conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, c)
	return p.ended
}

// drop: c taken out of the idle ones; false where it is not there (the
// pacer took it).
func (p *pool) drop(c *conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.idle {
		if x == c {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			return true
		}
	}
	return false
}

// open dials n connections now (before the run), in parallel; those that
// fail are dialed again by their first request. It returns how many opened.
func (p *pool) open(ctx context.Context, n int) int {
	p.mu.Lock()
	cs := make([]*conn, 0, n)
	for len(p.all) < min(n, p.size) {
		cs = append(cs, p.newConn())
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	var mu sync.Mutex
	opened := 0
	for _, c := range cs {
		wg.Go(func() {
			if c.dial(ctx) == nil {
				mu.Lock()
				opened++
				mu.Unlock()
			}
			p.put(c)
		})
	}
	wg.Wait()
	return opened
}

// end: no more requests; each connection's goroutine ends once its last
// request is back, and closes its connection.
func (p *pool) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	p.ended = true
	for _, c := range p.all {
		close(c.jobs)
	}
	for _, c := range p.idle { // waiting on their sockets (next): woken
		c.mu.Lock()
		if c.nc != nil {
			c.nc.SetReadDeadline(time.Now())
		}
		c.mu.Unlock()
	}
}

// abort: every request in flight given up at once (the run interrupted).
func (p *pool) abort() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.all {
		c.mu.Lock()
		if c.nc != nil {
			c.nc.SetDeadline(time.Now())
		}
		c.mu.Unlock()
	}
}

// conn: one connection of a pool and its goroutine.
type conn struct {
	p    *pool
	jobs chan job

	mu    sync.Mutex // guards nc for abort
	nc    net.Conn
	br    *bufio.Reader
	wbuf  []byte
	resp  fasthttp.Response
	fresh bool // nc was dialed for the request in flight (not kept from before)
}

func (c *conn) loop() {
	defer c.p.s.conns.Done()
	defer c.close()
	ended := false
	for {
		j, ok := c.next(ended)
		if !ok {
			return
		}
		c.do(j)
		ended = c.p.put(c)
	}
}

// next: the next request handed to c (false: the pool ended; ended: it had
// when c last went back to the idle ones). On an open
// connection c waits on the socket first, for the answer to the request
// the pacer will write there: the pacer hands it over without waking c,
// which wakes once a request, when its answer comes (a goroutine woken by
// the hand-over, only to find no answer yet and wait again, was a second
// wake-up a request in the pacer's run queue). Where the socket fails while
// c is idle (the server closed it, or the run was interrupted), c is closed
// and goes back to the idle ones, to dial for its next request, unless the
// pacer has taken it meanwhile: then its request finds the socket's failure
// (do, retry).
func (c *conn) next(ended bool) (job, bool) {
	c.mu.Lock()
	open := c.nc != nil
	c.mu.Unlock()
	for open && !ended {
		_, err := c.br.Peek(1)
		if err == nil || !c.p.drop(c) {
			break
		}
		var to interface{ Timeout() bool }
		if errors.As(err, &to) && to.Timeout() && c.p.s.ctx.Err() == nil {
			// Idle past its last request's deadline (or woken by the
			// pool's end): still open, so it waits again without one.
			c.nc.SetReadDeadline(time.Time{})
			ended = c.p.put(c)
			continue
		}
		c.close()
		c.p.put(c)
		break
	}
	j, ok := <-c.jobs
	return j, ok
}

// dial: a new connection, counted.
func (c *conn) dial(ctx context.Context) error {
	nc, err := c.p.dialer.DialContext(ctx, "tcp", c.p.ep.addr)
	if err != nil {
		return err
	}
	if c.br == nil {
		c.br = bufio.NewReaderSize(nc, 16<<10)
	} else {
		c.br.Reset(nc)
	}
	c.mu.Lock()
	c.nc = nc
	c.mu.Unlock()
	c.p.s.opened.Add(1)
	return nil
}

func (c *conn) close() {
	c.mu.Lock()
	if c.nc != nil {
		c.nc.Close()
		c.nc = nil
	}
	c.mu.Unlock()
}

// send: j handed to c by the pacer. On an open connection the pacer writes
// the request itself, at once (into the socket's empty buffer: it does not
// block), so that no request waits behind the answers being read; c's
// goroutine then reads the answer. Where c has no open connection (new, or
// closed), or the request is long, its goroutine dials and writes.
func (c *conn) send(j job) {
	if c.nc != nil {
		b := c.request(j)
		if len(b) <= inlineMax {
			j.written = time.Now()
			c.nc.SetReadDeadline(j.written.Add(c.p.s.timeout))
			if _, err := c.nc.Write(b); err != nil {
				j.werr = errNothingRead{err}
			}
		}
	}
	c.jobs <- j
}

// inlineMax: the longest request the pacer writes itself.
const inlineMax = 4096

// do: one request: written (unless the pacer did), read to its last byte,
// recorded. A request that finds its kept-alive connection closed by the
// server before any byte of an answer is sent again once on a new one (GET
// and HEAD are idempotent; net/http's Transport does the same).
func (c *conn) do(j job) {
	s := c.p.s
	s.m.inFlight.Inc()
	c.fresh = false
	written, first, status, err := j.written, time.Time{}, 0, j.werr
	if written.IsZero() {
		written, first, status, err = c.try(j)
	} else if err == nil {
		first, status, err = c.read(j)
	}
	if err != nil && c.retry(err) {
		written, first, status, err = c.try(j)
	}
	done := time.Now()
	s.m.inFlight.Dec()
	if written.IsZero() {
		written = done // never written: the dial failed
	}
	if first.IsZero() {
		first = done
	}
	o := outcomeOf(status, err)
	if err != nil || c.resp.ConnectionClose() {
		c.close()
	}
	c.resp.Reset() // its body back to fasthttp's pool: an idle connection holds none
	j.rec.add(j.path, j.block, o, times{sent: done.Sub(written), due: done.Sub(j.due), queue: written.Sub(j.due),
		first: first.Sub(written)})
	j.rec.addRoute(j.route, j.path, j.block, o, done.Sub(written))
	j.pm.observe(o, done.Sub(written), written.Sub(j.due) > lateAfter)
	j.rec.pending.Done()
}

// retry: whether a failed request is sent again on a new connection: the
// one it went out on was open before it (kept alive after earlier answers,
// or opened before the run and idle since) and failed with nothing read
// (the server closed it meanwhile: nginx closes an idle kept connection
// after keepalive_timeout, and one that never sent a request after
// client_header_timeout). One dialed for this request is not retried.
func (c *conn) retry(err error) bool {
	var nothing errNothingRead
	if c.fresh || !errors.As(err, &nothing) {
		return false
	}
	c.close()
	return true
}

// errNothingRead: the connection failed before any byte of an answer.
type errNothingRead struct{ error }

func (e errNothingRead) Unwrap() error { return e.error }

// request: j's bytes, in c's buffer.
func (c *conn) request(j job) []byte {
	method := "GET "
	if j.head {
		method = "HEAD "
	}
	b := append(c.wbuf[:0], method...)
	b = append(b, c.p.ep.prefix...)
	b = append(b, j.target...)
	if len(c.p.ep.prefix)+len(j.target) == 0 {
		b = append(b, '/')
	}
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, c.p.ep.host...)
	b = append(b, "\r\nUser-Agent: uds-lab-openloop\r\n\r\n"...)
	c.wbuf = b
	return b
}

// try: j written on the connection (dialed first where none is open) and
// its answer read; when it was written, when the answer's first byte came,
// and its status (the last byte: when try returns).
func (c *conn) try(j job) (written, first time.Time, status int, err error) {
	if c.nc == nil {
		if err := c.dial(c.p.s.ctx); err != nil {
			return time.Time{}, time.Time{}, 0, err
		}
		c.fresh = true
		j.rec.opened(1)
	}
	b := c.request(j)
	written = time.Now()
	c.nc.SetDeadline(written.Add(c.p.s.timeout))
	if _, err := c.nc.Write(b); err != nil {
		return written, first, 0, errNothingRead{err}
	}
	first, status, err = c.read(j)
	return written, first, status, err
}

// read: j's answer, to its last byte; when its first byte came, its status.
func (c *conn) read(j job) (first time.Time, status int, err error) {
	if _, err := c.br.Peek(1); err != nil {
		return first, 0, errNothingRead{err}
	}
	first = time.Now()
	c.resp.Reset()
	c.resp.SkipBody = j.head
	if err := c.resp.Read(c.br); err != nil {
		return first, 0, err
	}
	return first, c.resp.StatusCode(), nil
}

// outcomeOf: a request's outcome from its answer's status or its error.
func outcomeOf(status int, err error) outcome {
	if err == nil {
		return outcome{status: status}
	}
	var op *net.OpError
	dial := errors.As(err, &op) && op.Op == "dial"
	var to interface{ Timeout() bool }
	var broken fasthttp.ErrBrokenChunk
	switch {
	case errors.As(err, &to) && to.Timeout() && dial:
		return outcome{failure: "connect_timeout"}
	case errors.As(err, &to) && to.Timeout():
		return outcome{failure: "timeout"}
	case errors.Is(err, syscall.ECONNREFUSED):
		return outcome{failure: "refused"}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.EOF), errors.As(err, &broken):
		return outcome{failure: "reset"}
	}
	return outcome{failure: "error"}
}
