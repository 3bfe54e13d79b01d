package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"time"
)

// The pooled path's pitfalls (make contract's third table, with the socket's):
// what nginx's upstream keepalive pool (the -ka paths) meets in an app, on
// either listener.
//
//   - the app's idle keep-alive timeout, measured: a kept connection left
//     idle until the app closes it (at most Config.IdleWait), against nginx's
//     upstream keepalive_timeout (Config.NginxKeepalive, read by contract.py
//     from the lab's nginx template). Shorter, nginx may send a request on a
//     connection the app is closing: nginx retries it on a new connection if
//     it is idempotent (GET) and answers 502 if not (POST, since nginx 1.9.13).
//   - connections the app leaves on its side once nginx closes them after a
//     pooled burst: TCP's CLOSE_WAIT, and the Unix socket's equivalent (an
//     accepted socket whose peer has gone), read with sock_diag.
const (
	idleName      = "keep-alive: the app's idle timeout against nginx's upstream keepalive_timeout"
	closeWaitName = "CLOSE_WAIT: kept connections the app leaves open after nginx closes them"
)

// pooledConns kept connections on each listener, pooledRequests requests on
// each, make the pooled burst; closeWaitSettle is how long the app has to
// close its side once the checker has closed all of them.
var (
	pooledConns     = 16
	pooledRequests  = 4
	closeWaitSettle = 2 * time.Second
)

// dialTimeout: how long one connect may take (see dialKept).
const dialTimeout = 10 * time.Second

// errNotKept: the app closed the connection with its response (Connection:
// close, or FastCGI without keep_conn): there is nothing for nginx to keep.
var errNotKept = errors.New("the app closed the connection with its response")

// keptConn is one connection the checker keeps, as nginx's pool does: HTTP/1.1
// requests one after another, or FastCGI with FCGI_KEEP_CONN.
type keptConn struct {
	conn   net.Conn
	br     *bufio.Reader
	cfg    Config
	closed bool // the app said it would close after the last response
}

// dialKept opens a connection to l, trying again while its queue is full (a
// small backlog refuses a Unix connect until the app has accepted; over TCP
// the SYN is dropped and sent again after 1 s, then 3 s: dialTimeout waits
// for both).
func dialKept(cfg Config, l listener) (*keptConn, error) {
	var conn net.Conn
	var err error
	for try := 0; try < 50; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
		conn, err = l.dial(ctx)
		cancel()
		if err == nil || !refused(err) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	return &keptConn{conn: conn, br: bufio.NewReader(conn), cfg: cfg}, nil
}

func (k *keptConn) Close() error { return k.conn.Close() }

// get sends GET path on the kept connection and reads the whole response;
// errNotKept if the app closes the connection after it.
func (k *keptConn) get(path string) error {
	if k.closed {
		return errNotKept
	}
	_ = k.conn.SetDeadline(time.Now().Add(10 * time.Second))
	defer k.conn.SetDeadline(time.Time{})
	req, err := http.NewRequest(http.MethodGet, "http://app"+path, nil)
	if err != nil {
		return err
	}
	if k.cfg.Protocol == "fastcgi" {
		if _, err := k.conn.Write(fcgiRequest(req, k.cfg.Script, true)); err != nil {
			return err
		}
		r := bufio.NewReader(&fcgiStdoutReader{r: k.br})
		if _, err := textproto.NewReader(r).ReadMIMEHeader(); err != nil {
			return fmt.Errorf("FastCGI: reading the CGI response's headers: %w", err)
		}
		_, err := io.Copy(io.Discard, r)
		return err
	}
	if err := req.Write(k.conn); err != nil {
		return err
	}
	resp, err := http.ReadResponse(k.br, req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.Close {
		k.closed = true
		return errNotKept
	}
	return nil
}

// idleResult: how long one listener's kept connection lasted idle.
type idleResult struct {
	listener string
	closed   bool          // the app closed it within the wait
	after    time.Duration // from the end of the response to the app's close
	notKept  bool          // the app closed it with its response
	err      error
}

// measureIdle sends one request on a kept connection, then waits (at most
// wait) for the app to close it.
func measureIdle(cfg Config, l listener, wait time.Duration) idleResult {
	r := idleResult{listener: l.name}
	k, err := dialKept(cfg, l)
	if err != nil {
		r.err = err
		return r
	}
	defer k.Close()
	if err := k.get(cfg.endpoint()); err != nil {
		r.notKept, r.err = errors.Is(err, errNotKept), err
		if r.notKept {
			r.err = nil
		}
		return r
	}
	start := time.Now()
	_ = k.conn.SetReadDeadline(start.Add(wait))
	var b [1]byte
	n, err := k.br.Read(b[:])
	var timeout net.Error
	switch {
	case n > 0:
		r.err = fmt.Errorf("the app sent a byte on an idle connection, unasked")
	case errors.As(err, &timeout) && timeout.Timeout():
	default: // EOF, or a reset: the app closed it
		r.closed, r.after = true, time.Since(start)
	}
	return r
}

// idleClause measures both listeners at once, so the row waits IdleWait once.
func idleClause(cfg Config, a *app) Clause {
	c := pitfall(idleName)
	rs := make([]idleResult, 2)
	var wg sync.WaitGroup
	for i, l := range a.both() {
		wg.Go(func() { rs[i] = measureIdle(cfg, l, cfg.IdleWait) })
	}
	wg.Wait()
	c.judge(judgeIdle(rs, cfg.NginxKeepalive, cfg.IdleWait))
	return c
}

// idleSlack: a timeout measured up to this much over nginx's counts as
// equal to it, which races as a shorter one does (the checker's clock starts
// once it has read the response, a little after the app's).
const idleSlack = 100 * time.Millisecond

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func judgeIdle(rs []idleResult, nginx, wait time.Duration) (status, why, fix string) {
	var parts []string
	var shortest time.Duration // the shortest measured timeout, 0 if none closed
	measured, open := 0, 0
	for _, r := range rs {
		switch {
		case r.err != nil:
			parts = append(parts, fmt.Sprintf("%s: %v", r.listener, r.err))
			continue
		case r.notKept:
			parts = append(parts, r.listener+": not kept (the app closes each connection with its response)")
		case r.closed:
			parts = append(parts, fmt.Sprintf("%s: closed by the app after %s idle", r.listener, secs(r.after)))
			if shortest == 0 || r.after < shortest {
				shortest = r.after
			}
		default:
			parts = append(parts, fmt.Sprintf("%s: still open after %s idle", r.listener, secs(wait)))
			open++
		}
		measured++
	}
	why = "one request on a kept connection, then idle until the app closes it (at most CONTRACT_IDLE_WAIT=" + wait.String() + "): " + strings.Join(parts, "; ")
	if measured == 0 {
		return statusNA, why, ""
	}
	if nginx <= 0 {
		return statusInfo, why + "; nginx's upstream keepalive_timeout not given (CONTRACT_NGINX_KEEPALIVE_TIMEOUT): not judged", ""
	}
	why += fmt.Sprintf("; nginx keeps an idle upstream connection %s (keepalive_timeout in the lab's nginx config)", secs(nginx))
	switch {
	case shortest > 0 && shortest <= nginx+idleSlack:
		return statusWarn, why + fmt.Sprintf(". The app's timeout is the shorter: nginx may send a request on a connection just as the app closes it; nginx then retries an idempotent request (GET) on a new connection and answers 502 to any other (POST), since nginx 1.9.13"),
			fmt.Sprintf("make the app's idle keep-alive timeout longer than nginx's %s (e.g. %s: uvicorn --timeout-keep-alive, gunicorn --keep-alive, Node's server.keepAliveTimeout, puma's persistent_timeout, Go's http.Server IdleTimeout), or set nginx's upstream keepalive_timeout below the app's",
				secs(nginx), secs(nginx+5*time.Second))
	case open > 0 && wait <= nginx:
		return statusInfo, why + fmt.Sprintf(". Not judged: the app's timeout is over %s, nginx's %s; CONTRACT_IDLE_WAIT=%s tells which is longer", secs(wait), secs(nginx), (nginx+5*time.Second).String()), ""
	case shortest > 0 || open > 0:
		return statusPass, why + ": the app outlasts nginx, which closes idle connections first", ""
	}
	return statusPass, why + ": nginx keeps no connection of this app idle (its pooled paths open a new one per request)", ""
}

// leftover: the app's side of connections whose client has gone.
type leftover struct{ tcp, unix int }

// appSideLeft counts, in the app's network namespace, TCP connections to the
// app's port in CLOSE_WAIT and accepted Unix connections on its socket whose
// peer has gone (sk_shutdown has RCV_SHUTDOWN): both wait for the app's close.
func appSideLeft(cfg Config) (leftover, error) {
	var n leftover
	ts, err := tcpSockets(tcpCloseWait)
	if err != nil {
		return n, err
	}
	for _, s := range ts {
		if s.Port == listenerPort(cfg) {
			n.tcp++
		}
	}
	us, err := unixSockets(tcpEstablished)
	if err != nil {
		return n, err
	}
	for _, s := range us {
		if s.Path == cfg.Socket && s.Shutdown&rcvShutdown != 0 {
			n.unix++
		}
	}
	return n, nil
}

// burstResult: one listener's pooled burst.
type burstResult struct {
	listener string
	conns    int // connections opened
	answered int // requests answered
	notKept  int // connections the app closed with a response
	err      error
}

// pooledBurst opens pooledConns connections on l at once, sends
// pooledRequests requests on each, then closes each as soon as its last
// answer is in (as nginx closes a kept connection: its keepalive_timeout, a
// reload), so that no connection sits idle long enough for the app's own
// idle timeout to close it first.
func pooledBurst(cfg Config, l listener) burstResult {
	r := burstResult{listener: l.name}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range pooledConns {
		wg.Go(func() {
			k, err := dialKept(cfg, l)
			if err != nil {
				mu.Lock()
				r.err = err
				mu.Unlock()
				return
			}
			answered, notKept := 0, false
			for range pooledRequests {
				if err = k.get(cfg.endpoint()); err != nil {
					break
				}
				answered++
			}
			k.Close()
			if errors.Is(err, errNotKept) { // answered, then closed by the app
				answered, notKept, err = answered+1, true, nil
			}
			mu.Lock()
			defer mu.Unlock()
			r.conns++
			r.answered += answered
			if notKept {
				r.notKept++
			}
			if err != nil && r.err == nil {
				r.err = err
			}
		})
	}
	wg.Wait()
	return r
}

// closeWaitClause: a pooled burst on both listeners, each connection closed
// by the checker after its requests, then counts what the app has not closed
// closeWaitSettle later.
func closeWaitClause(cfg Config, a *app) Clause {
	c := pitfall(closeWaitName)
	before, err := appSideLeft(cfg)
	if err != nil {
		c.judge(statusNA, err.Error(), "")
		return c
	}
	rs := make([]burstResult, 2)
	var wg sync.WaitGroup
	for i, l := range a.both() {
		wg.Go(func() { rs[i] = pooledBurst(cfg, l) })
	}
	wg.Wait()
	var left leftover
	for deadline := time.Now().Add(closeWaitSettle); ; time.Sleep(50 * time.Millisecond) {
		now, err := appSideLeft(cfg)
		if err != nil {
			c.judge(statusNA, err.Error(), "")
			return c
		}
		left = leftover{tcp: max(0, now.tcp-before.tcp), unix: max(0, now.unix-before.unix)}
		if left == (leftover{}) || time.Now().After(deadline) {
			break
		}
	}
	c.judge(judgeCloseWait(rs, left))
	return c
}

func judgeCloseWait(rs []burstResult, left leftover) (status, why, fix string) {
	var parts []string
	opened := 0
	for _, r := range rs {
		p := fmt.Sprintf("%s: %d connections, %d requests answered", r.listener, r.conns, r.answered)
		if r.notKept > 0 {
			p += fmt.Sprintf(", %d closed by the app with a response", r.notKept)
		}
		if r.err != nil {
			p += fmt.Sprintf(" (%v)", r.err)
		}
		parts = append(parts, p)
		opened += r.conns
	}
	why = fmt.Sprintf("%d kept connections on each listener at once, %d requests on each, each then closed by the checker as nginx closes one: %s; %s later the app still held %d on tcp in CLOSE_WAIT and %d on unix whose client had gone",
		pooledConns, pooledRequests, strings.Join(parts, "; "), closeWaitSettle, left.tcp, left.unix)
	switch {
	case opened == 0:
		return statusNA, why, ""
	case left.tcp > 0 || left.unix > 0:
		return statusWarn, why + ": each holds a file descriptor (and, in a threaded app, maybe a thread) until the app runs out of them",
			"close the connection when a read returns end of file (0 bytes) or an error, in every worker and on every path (a finally or defer), and give idle connections a timeout so a stuck worker lets go; `ss -tn state close-wait` (TCP) and `ss -xp` (the socket) show them"
	}
	return statusPass, why, ""
}

// idleWaitDefault: how long the idle row waits by default (CONTRACT_IDLE_WAIT):
// short, so make contract stays quick; it catches the common short defaults
// (gunicorn's 2 s, uvicorn's and Node's 5 s) but cannot tell a timeout of
// 30 s from one over nginx's 60 s.
const idleWaitDefault = 10 * time.Second

// durationSetting reads a positive duration of at most limit from getenv(name).
func durationSetting(getenv func(string) string, name string, def, limit time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > limit {
		return 0, fmt.Errorf("%s=%q: want a positive duration of at most %s, such as 10s", name, v, limit)
	}
	return d, nil
}
