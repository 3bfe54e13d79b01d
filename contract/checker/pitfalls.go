package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The socket pitfalls (make contract's third table): what production meets
// over a Unix socket that the lab's figures do not show. contract.py runs
// these steps in the app's network and PID namespaces, as the app's user, so
// that sock_diag and /proc show the app's listeners and processes (what
// `ss -xlp` would). Each row says what was measured and, where it fails, the
// fix in a line. None of them is required: the lab runs either way.
//
//	contract pitfalls   backlog, client address, workers' share, the pooled
//	                    path's keep-alive timeout and CLOSE_WAIT, envelope
//	contract envelope   the envelope alone (contract.py restarts the app
//	                    with a low net.core.somaxconn first, to show it)

// The rows' names: the table's, results/contract.json's and tests/e2e's.
const (
	backlogName  = "listen backlog of each listener"
	clientName   = "client address: the same over both listeners"
	spreadName   = "workers: accepted connections spread over the app's processes"
	envelopeName = "failure envelope: bursts of new connections on each listener"
)

// A pitfall row's status.
const (
	statusPass = "pass"
	statusWarn = "WARN"
	statusInfo = "info" // measured to show, not judged
	statusNA   = "n/a"  // could not be measured; why says why
)

// minBacklog: below it a burst of new connections from nginx (up to
// NGINX_MAX_IN_FLIGHT at once) soon fills a listener's queue. 128 was
// Linux's net.core.somaxconn before 5.4; apps that hard-code a backlog
// (10, 64) are the ones users report 502s from.
const minBacklog = 128

// clientProbe is the client address the checker says it forwards for
// (TEST-NET-3, RFC 5737: never a real peer).
const clientProbe = "203.0.113.7"

// spreadConns connections are opened on each listener and held, idle, while
// the step reads which process accepted each.
const spreadConns = 24

// envelopeLevels: the concurrency of each burst; envelopeBurst: how long
// each one's clients keep opening new connections (requests in flight at
// its end are waited for: a dropped SYN is retried after 1 s, then 3 s).
var envelopeLevels = []int{4, 16, 64, 256}

var envelopeBurst = time.Second

func pitfall(name string) Clause { return Clause{Name: name, Pitfall: true} }

func (c *Clause) judge(status, why, fix string) {
	c.Status, c.Why, c.Fix = status, why, fix
	c.Pass = status == statusPass || status == statusInfo
	if c.Pass {
		c.Fix = ""
	}
}

// pitfalls runs every row, the envelope at the app's own backlog last. The
// pooled rows (pooled.go) come after the workers' share, which counts the
// app's open connections.
func pitfalls(cfg Config, a *app, emit func(Clause)) {
	emit(backlogClause(cfg))
	emit(clientClause(a))
	emit(spreadClause(cfg, a))
	emit(idleClause(cfg, a))
	emit(closeWaitClause(cfg, a))
	emit(envelopeClause(cfg, a, false))
}

// listenerPort is the TCP port the checker reaches the app on.
func listenerPort(cfg Config) int {
	_, p, _ := net.SplitHostPort(cfg.TCP)
	n, _ := strconv.Atoi(p)
	return n
}

// listeners finds the app's listening sockets: TCP on the port, Unix at the path.
func listenersOf(cfg Config) (tcp, uds []diagSocket, err error) {
	ts, err := tcpSockets(tcpListen)
	if err != nil {
		return nil, nil, err
	}
	us, err := unixSockets(tcpListen)
	if err != nil {
		return nil, nil, err
	}
	for _, s := range ts {
		if s.Port == listenerPort(cfg) {
			tcp = append(tcp, s)
		}
	}
	for _, s := range us {
		if s.Path == cfg.Socket {
			uds = append(uds, s)
		}
	}
	return tcp, uds, nil
}

// backlogClause: each listener's effective backlog, against somaxconn.
func backlogClause(cfg Config) Clause {
	c := pitfall(backlogName)
	max, err := somaxconn()
	if err != nil {
		c.judge(statusNA, "net.core.somaxconn: "+err.Error(), "")
		return c
	}
	tcp, uds, err := listenersOf(cfg)
	if err != nil {
		c.judge(statusNA, err.Error(), "")
		return c
	}
	c.judge(judgeBacklog(cfg, tcp, uds, max))
	return c
}

func judgeBacklog(cfg Config, tcp, uds []diagSocket, max int) (status, why, fix string) {
	if len(tcp) == 0 || len(uds) == 0 {
		return statusNA, fmt.Sprintf("in the app's network namespace: %d TCP listener(s) on port %d, %d on %s",
			len(tcp), listenerPort(cfg), len(uds), cfg.Socket), ""
	}
	var parts []string
	low, capped := false, false
	for _, s := range append(append([]diagSocket{}, tcp...), uds...) {
		where := fmt.Sprintf("tcp :%d", s.Port)
		if s.Network == "unix" {
			where = "unix " + s.Path
		}
		parts = append(parts, fmt.Sprintf("%s %d", where, s.Backlog))
		if s.Backlog < minBacklog {
			low = true
			capped = capped || int(s.Backlog) == max
		}
	}
	why = fmt.Sprintf("%s; net.core.somaxconn %d", strings.Join(parts, ", "), max)
	if !low {
		return statusPass, why, ""
	}
	why += fmt.Sprintf(": below %d, a burst of nginx's new connections fills the queue, and a full socket refuses at once (nginx's 502) where TCP makes the client retry its SYN after 1 s", minBacklog)
	if capped {
		return statusWarn, why, fmt.Sprintf("raise net.core.somaxconn in the app's network namespace (APP_SOMAXCONN, compose's sysctls; on Kubernetes an unsafe sysctl the kubelet must allow) to %d or more", minBacklog)
	}
	return statusWarn, why, fmt.Sprintf("raise the backlog the app passes to listen() to %d or more (gunicorn and uvicorn --backlog, puma's backlog=, PHP-FPM's listen.backlog, Node's server.listen backlog)", minBacklog)
}

// clientClause asks each listener what the app takes for the client's
// address, forwarding clientProbe as nginx would (X-Real-IP, X-Forwarded-For).
func clientClause(a *app) Clause {
	c := pitfall(clientName)
	h := http.Header{}
	h.Set("X-Real-IP", clientProbe)
	h.Set("X-Forwarded-For", clientProbe)
	seen := map[string]string{}
	var parts []string
	for _, l := range a.both() {
		r, body := l.fetch("/client", h)
		var v struct {
			Client *string `json:"client"`
		}
		switch {
		case r.err != nil || r.status != http.StatusOK:
			parts = append(parts, fmt.Sprintf("%s GET /client: %s", l.name, r))
		case json.Unmarshal(body, &v) != nil || v.Client == nil:
			parts = append(parts, fmt.Sprintf("%s GET /client: no JSON {\"client\": ...}", l.name))
		default:
			seen[l.name] = *v.Client
			parts = append(parts, fmt.Sprintf("%s %q", l.name, *v.Client))
		}
	}
	c.judge(judgeClient(seen, strings.Join(parts, "; ")))
	return c
}

func judgeClient(seen map[string]string, got string) (status, why, fix string) {
	why = fmt.Sprintf("forwarding X-Real-IP and X-Forwarded-For %s as nginx would: %s", clientProbe, got)
	tcp, okT := seen["tcp"]
	uds, okU := seen["unix"]
	nginx := "and have nginx send them: proxy_set_header X-Real-IP $remote_addr; proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for"
	switch {
	case !okT || !okU:
		return statusNA, why + ": the app does not say what it takes for the client's address (GET /client answering {\"client\": \"<address>\"}, as the lab's app does); read its access log behind nginx on both paths instead", ""
	case tcp == clientProbe && uds == clientProbe:
		return statusPass, why, ""
	case tcp == clientProbe:
		return statusWarn, why + ": over the socket the app drops the proxy headers (the socket's peer has no address), so every client there looks alike to rate limits and logs",
			"trust X-Real-IP/X-Forwarded-For from the socket's peer too (uvicorn and gunicorn --forwarded-allow-ips='*' where only nginx can connect; your framework's trusted-proxy setting), " + nginx
	case uds == clientProbe:
		return statusWarn, why + ": over TCP the app drops the proxy headers", "trust X-Real-IP/X-Forwarded-For from nginx's address on TCP too, " + nginx
	default:
		return statusWarn, why + ": the app ignores X-Real-IP and X-Forwarded-For, so behind nginx every client is nginx (over the socket: no address at all)",
			"take the client's address from X-Real-IP/X-Forwarded-For when the peer is nginx or the socket, " + nginx
	}
}

// spreadClause holds spreadConns idle connections on each listener and reads
// which of the app's processes accepted each (sock_diag's inodes against
// /proc/<pid>/fd, as ss -p does).
func spreadClause(cfg Config, a *app) Clause {
	c := pitfall(spreadName)
	tcp, uds, err := listenersOf(cfg)
	if err != nil || len(tcp) == 0 || len(uds) == 0 {
		c.judge(statusNA, fmt.Sprintf("the app's listeners not found in its network namespace (%v)", err), "")
		return c
	}
	var shares []share
	for _, l := range a.both() {
		ls := tcp
		if l.name == "unix" {
			ls = uds
		}
		s, err := measureShare(cfg, l, ls)
		if err != nil {
			c.judge(statusNA, err.Error(), "")
			return c
		}
		shares = append(shares, s)
	}
	c.judge(judgeSpread(shares))
	return c
}

// share is how a listener's accepted connections sat over the processes.
type share struct {
	listener string
	workers  []proc      // the processes that accept: holders and acceptors, less their parents
	accepted map[int]int // pid -> connections it holds
	total    int
}

// measureShare opens spreadConns connections to the listener and counts, once
// the count stops moving, which of the app's processes accepted them.
func measureShare(cfg Config, l listener, ls []diagSocket) (share, error) {
	s := share{listener: l.name, accepted: map[int]int{}}
	listening := map[uint64]bool{}
	for _, x := range ls {
		listening[x.Inode] = true
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range spreadConns {
		conn, err := dialPatiently(l)
		if err != nil {
			return s, fmt.Errorf("%s: opening connection %d of %d: %v", l.name, len(conns)+1, spreadConns, err)
		}
		conns = append(conns, conn)
	}
	// Until the count stops moving (a worker busy elsewhere accepts later).
	var ps []proc
	last, still := -1, 0
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && still < 3; {
		time.Sleep(100 * time.Millisecond)
		var err error
		if ps, err = countAccepted(cfg, l.name, &s); err != nil {
			return s, err
		}
		if s.total == last {
			still++
		} else {
			last, still = s.total, 0
		}
	}
	s.workers = workers(ps, listening, s.accepted)
	return s, nil
}

// dialPatiently opens a connection to the listener. A full queue (a small
// backlog) refuses a connect: a moment later the app has accepted, so a
// refusal is tried again, up to 50 times. The share row is about who
// accepts, not when.
func dialPatiently(l listener) (net.Conn, error) {
	var conn net.Conn
	var err error
	for try := 0; try < 50; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err = l.dial(ctx)
		cancel()
		if err == nil || !refused(err) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return conn, err
}

// countAccepted sets s.accepted and s.total to the connections of the
// listener each of the app's processes holds now, and returns the processes.
func countAccepted(cfg Config, listener string, s *share) ([]proc, error) {
	accepted, err := acceptedInodes(cfg, listener)
	if err != nil {
		return nil, err
	}
	ps, hidden, err := procs("/proc")
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("none of the app's %d processes let this step read their descriptors (it must run as the app's user in the app's PID namespace)", hidden)
	}
	s.accepted, s.total = map[int]int{}, 0
	for _, p := range ps {
		for n := range p.Sockets {
			if accepted[n] {
				s.accepted[p.PID]++
				s.total++
			}
		}
	}
	return ps, nil
}

// acceptedInodes: the app's side of the connections made to a listener.
func acceptedInodes(cfg Config, listener string) (map[uint64]bool, error) {
	out := map[uint64]bool{}
	var ss []diagSocket
	var err error
	if listener == "unix" {
		ss, err = unixSockets(tcpEstablished)
	} else {
		ss, err = tcpSockets(tcpEstablished)
	}
	if err != nil {
		return nil, err
	}
	for _, x := range ss {
		if x.Inode != 0 && ((listener == "unix" && x.Path == cfg.Socket) || (listener != "unix" && x.Port == listenerPort(cfg))) {
			out[x.Inode] = true
		}
	}
	return out, nil
}

// workers: the processes holding a listener or an accepted connection, less
// any whose child is among them (a master that forks its workers and keeps
// the listener, as gunicorn's arbiter or PHP-FPM's master do).
func workers(ps []proc, listening map[uint64]bool, accepted map[int]int) []proc {
	var in []proc
	for _, p := range ps {
		holds := accepted[p.PID] > 0
		for n := range p.Sockets {
			holds = holds || listening[n]
		}
		if holds {
			in = append(in, p)
		}
	}
	parent := map[int]bool{}
	for _, p := range in {
		parent[p.PPID] = true
	}
	var out []proc
	for _, p := range in {
		if !parent[p.PID] {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

func judgeSpread(shares []share) (status, why, fix string) {
	var parts, hogged []string
	many := false
	for _, s := range shares {
		var counts []string
		top := 0
		for _, w := range s.workers {
			counts = append(counts, strconv.Itoa(s.accepted[w.PID]))
			top = max(top, s.accepted[w.PID])
		}
		if len(s.workers) <= 1 {
			parts = append(parts, fmt.Sprintf("%s: %d of %d held connections accepted by one process", s.listener, s.total, spreadConns))
			continue
		}
		many = true
		parts = append(parts, fmt.Sprintf("%s: %d of %d accepted over %d processes: %s", s.listener, s.total, spreadConns, len(s.workers), strings.Join(counts, ", ")))
		if s.total >= 4 && top*10 > s.total*9 {
			hogged = append(hogged, s.listener)
		}
	}
	why = strings.Join(parts, "; ")
	switch {
	case !many:
		return statusPass, why + " (one process: nothing to spread)", ""
	case len(hogged) == 0:
		return statusPass, why, ""
	}
	return statusWarn, why + fmt.Sprintf(": one process took over 90%% on %s; the others wait while it is busy",
			strings.Join(hogged, " and ")),
		"balance the accepts: workers share one accept queue on a socket (Unix sockets have no SO_REUSEPORT), and the worker that is awake takes every connection; use the server's accept lock or round robin (EPOLLEXCLUSIVE, a master handing connections out), or fewer connections per accept"
}

// level is one burst's outcome on one listener.
type level struct {
	Listener    string  `json:"listener"`
	Concurrency int     `json:"concurrency"`
	Sent        int     `json:"sent"`
	OK          int     `json:"ok"`
	Refused     int     `json:"refused"` // EAGAIN or ECONNREFUSED at connect: nginx's 502
	Failed      int     `json:"failed"`  // any other error or a 5xx
	P99Ms       float64 `json:"p99_ms"`  // of the answered requests
}

// envelopeClause bursts new connections at each level on each listener, as
// nginx's /tcp-lo/ and /uds-lo/ do from the same namespace. low: the app was
// restarted with a low somaxconn to show the envelope (an info row).
func envelopeClause(cfg Config, a *app, low bool) Clause {
	c := pitfall(envelopeName)
	max, err := somaxconn()
	if err != nil {
		c.judge(statusNA, "net.core.somaxconn: "+err.Error(), "")
		return c
	}
	c.Name = fmt.Sprintf("%s (net.core.somaxconn %d)", envelopeName, max)
	for _, n := range envelopeLevels {
		for _, l := range a.both() {
			c.Levels = append(c.Levels, burst(l, cfg.endpoint(), n, envelopeBurst))
		}
	}
	c.judge(judgeEnvelope(c.Levels, cfg.endpoint(), low))
	return c
}

func burst(l listener, endpoint string, n int, d time.Duration) level {
	lv := level{Listener: l.name, Concurrency: n}
	var mu sync.Mutex
	var took []time.Duration
	var wg sync.WaitGroup
	start := make(chan struct{})
	end := time.Now().Add(d)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for time.Now().Before(end) {
				t0 := time.Now()
				r := l.get(endpoint)
				dt := time.Since(t0)
				mu.Lock()
				lv.Sent++
				switch {
				case r.err == nil && r.status < 500:
					lv.OK++
					took = append(took, dt)
				case refused(r.err):
					lv.Refused++
				default:
					lv.Failed++
				}
				mu.Unlock()
				if r.err != nil && !refused(r.err) {
					time.Sleep(10 * time.Millisecond) // no spin on a broken app
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(took) > 0 {
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		lv.P99Ms = float64(took[(len(took)*99)/100].Microseconds()) / 1000
	}
	return lv
}

// refused: the listener's queue was full (a Unix socket answers EAGAIN to a
// non-blocking connect, which nginx turns into 502) or nothing listened.
func refused(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ECONNREFUSED)
}

func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

func judgeEnvelope(levels []level, endpoint string, low bool) (status, why, fix string) {
	byL := map[string][]level{}
	for _, lv := range levels {
		byL[lv.Listener] = append(byL[lv.Listener], lv)
	}
	var parts []string
	first := map[string]int{} // the lowest concurrency where the listener refused
	for _, name := range []string{"tcp", "unix"} {
		var row []string
		for _, lv := range byL[name] {
			row = append(row, fmt.Sprintf("%d: %.0f%% refused at connect, p99 %s", lv.Concurrency, pct(lv.Refused, lv.Sent), ms(lv.P99Ms)))
			if lv.Refused > 0 && first[name] == 0 {
				first[name] = lv.Concurrency
			}
		}
		parts = append(parts, fmt.Sprintf("%s %s", name, strings.Join(row, ", ")))
	}
	top := envelopeLevels[len(envelopeLevels)-1]
	why = fmt.Sprintf("GET %s on a new connection each, %s per level: %s", endpoint, envelopeBurst, strings.Join(parts, "; "))
	switch {
	case first["unix"] > 0 && first["tcp"] == 0:
		why += fmt.Sprintf(". The socket refused from %d in flight (nginx answers 502 at once) while TCP queued every request (its p99 rose instead)", first["unix"])
	case first["unix"] > 0:
		why += fmt.Sprintf(". The socket refused from %d in flight, TCP from %d", first["unix"], first["tcp"])
	default:
		why += fmt.Sprintf(". Neither refused up to %d in flight", top)
	}
	if low {
		return statusInfo, why, ""
	}
	if first["unix"] > 0 || first["tcp"] > 0 {
		return statusWarn, why, fmt.Sprintf("raise the listen backlog (the app's listen() and net.core.somaxconn) above the connections nginx may open at once (NGINX_MAX_IN_FLIGHT), or cap nginx's in flight below it")
	}
	return statusPass, why, ""
}

func ms(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2f s", v/1000)
	}
	return fmt.Sprintf("%.1f ms", v)
}

// fetch requests path with header h and returns the body too.
func (l listener) fetch(path string, h http.Header) (reply, []byte) {
	req, _ := http.NewRequest(http.MethodGet, "http://app"+path, nil)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := l.client.Do(req)
	if err != nil {
		return reply{err: err}, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return reply{status: resp.StatusCode, bytes: int64(len(body)), err: err}, body
}
