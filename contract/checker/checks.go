package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"

	"uds-lab/contract/panels"
	"uds-lab/contract/socketmode"
)

// The app metrics the contract asks about by name; the dashboards' other app
// metrics are checked as the dashboards use them.
const (
	requestsMetric = "app_http_requests_total"
	durationMetric = "app_http_request_duration_seconds"
	countRequests  = 10 // GET ENDPOINT on each listener, to be counted
	junkRequests   = 5  // junk URLs on each listener, to add no label value
	drainSleep     = 4 * time.Second
)

// The clauses' names: the table's rows, results/contract.json's "clause" and
// what tests/e2e looks for.
const (
	servesName  = "serves on the TCP port and on the socket"
	socketName  = "socket mode: owner and nginx's group rw, others nothing; folder not world-writable"
	othersName  = "socket: refused to other users"
	restartName = "restart over a stale socket"
	healthName  = "/healthz and /readyz on both listeners"
	countedName = requestsMetric + " counts each listener's requests"
	boundedName = "labels are route templates, not URLs"
	histName    = durationMetric + " per listener"
	drainName   = "SIGTERM: requests in flight answered, socket removed"
)

// What a failed optional clause costs the lab (Clause.Effect).
const (
	panelsEmpty   = "panels left empty"
	healthUnused  = "nothing: the lab takes the app as ready when its port and its socket answer; an image HEALTHCHECK may ask these"
	labelsUnbound = "every distinct URL becomes a series in Prometheus (memory grows with junk traffic)"
	drainCost     = "a stop cuts requests in flight; make down waits for SIGKILL"
)

// check runs the clauses of one running app. If the app does not serve
// on both listeners nothing else means anything: it stops there.
func check(cfg Config, a *app, emit func(Clause)) error {
	uses, err := panels.Load(cfg.Dashboards)
	if err != nil {
		return err
	}
	workloads, err := loadWorkloads(cfg)
	if err != nil {
		return err
	}
	s := serves(a, cfg, servesName)
	emit(s)
	if !s.Pass {
		return nil
	}
	emit(socketMode(cfg))
	emit(health(a))
	for _, w := range workloads {
		emit(route(a, w))
	}
	for _, c := range metricClauses(a, cfg.endpoint(), uses) {
		emit(c)
	}
	return nil
}

// serves polls GET ENDPOINT on both listeners until both answer (HTTP, or
// FastCGI with APP_PROTOCOL=fastcgi) with a
// status below 500 (a 404 is an app that serves; a 502 or 503 one that is not
// ready). The socket is reached as this process's user, nginx's.
func serves(a *app, cfg Config, name string) Clause {
	c := Clause{Name: name, Required: true}
	start := time.Now()
	for {
		var got, bad []string
		for _, l := range a.both() {
			r := l.get(cfg.endpoint())
			got = append(got, fmt.Sprintf("%s %s GET %s: %s", l.name, cfg.protocolName(), cfg.endpoint(), r))
			if r.err != nil || r.status >= 500 {
				bad = append(bad, l.name)
			}
		}
		if len(bad) == 0 {
			c.Pass, c.Why = true, fmt.Sprintf("%s, after %.1f s", strings.Join(got, "; "), time.Since(start).Seconds())
			return c
		}
		if time.Since(start) > cfg.Wait {
			c.Why = fmt.Sprintf("not serving after %s (socket reached as %d:%d, nginx's user): %s",
				cfg.Wait, os.Getuid(), os.Getgid(), strings.Join(got, "; "))
			return c
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// socketMode applies the lab's one rule (package socketmode) to the socket
// file, and refuses a folder anyone could replace it in.
func socketMode(cfg Config) Clause {
	c := Clause{Name: socketName, Required: true}
	fi, err := os.Stat(cfg.Socket)
	if err != nil {
		c.Why = err.Error()
		return c
	}
	st := fi.Sys().(*syscall.Stat_t)
	desc := fmt.Sprintf("%s %04o owner %d:%d", cfg.Socket, fi.Mode().Perm(), st.Uid, st.Gid)
	dir, derr := os.Stat(filepath.Dir(cfg.Socket))
	switch {
	case fi.Mode()&os.ModeSocket == 0:
		c.Why = desc + " is not a socket"
	case socketmode.Check(uint64(fi.Mode().Perm())) != nil:
		c.Why = fmt.Sprintf("%s: %v", desc, socketmode.Check(uint64(fi.Mode().Perm())))
	case derr != nil:
		c.Why = fmt.Sprintf("%s; its folder: %v", desc, derr)
	case dir.Mode().Perm()&0o002 != 0:
		c.Why = fmt.Sprintf("%s; its folder is %04o: anyone could replace the socket", desc, dir.Mode().Perm())
	default:
		c.Pass, c.Why = true, fmt.Sprintf("%s; folder %04o", desc, dir.Mode().Perm())
	}
	return c
}

func health(a *app) Clause {
	c := Clause{Name: healthName, Pass: true, Effect: healthUnused}
	var parts []string
	for _, path := range []string{"/healthz", "/readyz"} {
		for _, l := range a.both() {
			r := l.get(path)
			if r.err != nil || r.status != 200 {
				c.Pass = false
			}
			parts = append(parts, fmt.Sprintf("%s %s: %s", l.name, path, r))
		}
	}
	c.Why = strings.Join(parts, "; ")
	return c
}

type workload struct{ name, path string }

// loadWorkloads reads the catalogue's workloads with the parameters make load
// uses; custom is checked only when ENDPOINT names a route of its own.
func loadWorkloads(cfg Config) ([]workload, error) {
	b, err := os.ReadFile(cfg.Workloads)
	if err != nil {
		return nil, err
	}
	var c struct {
		Workloads map[string]struct {
			Route string `json:"route"`
		} `json:"workloads"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Workloads, err)
	}
	m := map[string]string{}
	for name, w := range c.Workloads {
		m[name] = w.Route
	}
	var out []workload
	for name, path := range m {
		for k, v := range cfg.Params {
			path = strings.ReplaceAll(path, "{"+k+"}", v)
		}
		if strings.Contains(path, "{") || !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("workload %s: route %q has a parameter without a value", name, path)
		}
		if name == "custom" && path == m["ping"] {
			continue
		}
		out = append(out, workload{name, path})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// route: the workload's route answers 200 on both listeners, with the same size.
func route(a *app, w workload) Clause {
	c := Clause{Name: "route " + w.path, Workload: w.name, Effect: "SCENARIO=" + w.name + " cannot run"}
	t, u := a.tcp.get(w.path), a.uds.get(w.path)
	c.Why = fmt.Sprintf("tcp %s; unix %s", t, u)
	c.Pass = t.err == nil && u.err == nil && t.status == 200 && u.status == 200 && t.bytes == u.bytes
	if !c.Pass && t.err == nil && u.err == nil && t.status == 200 && u.status == 200 {
		c.Why += ": the listeners answer different sizes"
	}
	return c
}

// metricClauses scrape /metrics over TCP, as Prometheus does, around known
// requests: GET ENDPOINT on each listener must be counted on that listener,
// and junk URLs must add no label value. An app without /metrics fails each
// of them, optionally, naming the panels it leaves empty.
func metricClauses(a *app, endpoint string, uses map[string][]panels.Panel) []Clause {
	names := func(m string) []string {
		var s []string
		for _, p := range uses[m] {
			s = append(s, p.String())
		}
		return s
	}
	sc := scrapeAround(a, endpoint)
	absent := "absent from /metrics"
	if sc.err != nil {
		absent = "no metrics: " + sc.err.Error()
	}
	out := []Clause{
		countedClause(sc, endpoint, absent, names(requestsMetric)),
		boundedClause(sc),
		histClause(sc.last[durationMetric], absent, names(durationMetric)),
	}
	// Every other app metric the dashboards read, each naming its panels.
	var others []string
	for m := range uses {
		if !strings.HasPrefix(m, requestsMetric) && !strings.HasPrefix(m, durationMetric) {
			others = append(others, m)
		}
	}
	sort.Strings(others)
	for _, m := range others {
		out = append(out, otherClause(m, sc.last.family(m), absent, names(m)))
	}
	return out
}

// scraped is the app's /metrics before and after countRequests to endpoint on
// each listener, and last after junkRequests to URLs with token in them.
type scraped struct {
	before, after, last families
	token               string
	err                 error
}

func scrapeAround(a *app, endpoint string) scraped {
	var sc scraped
	sc.before, sc.err = scrape(a.tcp)
	for _, l := range a.both() {
		for range countRequests {
			l.get(endpoint)
		}
	}
	if sc.err == nil {
		sc.after, sc.err = scrape(a.tcp)
	}
	sc.token = fmt.Sprintf("contract-probe-%d", time.Now().UnixNano())
	for _, l := range a.both() {
		for i := range junkRequests {
			l.get(fmt.Sprintf("/%s/%d", sc.token, i))
		}
	}
	if sc.err == nil {
		sc.last, sc.err = scrape(a.tcp)
	}
	if sc.err != nil {
		sc.before, sc.after, sc.last = families{}, families{}, families{}
	}
	return sc
}

func countedClause(sc scraped, endpoint, absent string, panels []string) Clause {
	c := Clause{Name: countedName, Panels: panels, Effect: panelsEmpty}
	if sc.after[requestsMetric] == nil {
		c.Why = absent
	} else {
		c.Pass, c.Why = countedPerListener(sc.before, sc.after, endpoint)
	}
	return c
}

func boundedClause(sc scraped) Clause {
	c := Clause{Name: boundedName, Effect: labelsUnbound}
	switch junk := sc.last.labelValuesContaining(sc.token); {
	case sc.err != nil:
		// No metrics, no labels to grow: nothing the lab's Prometheus could suffer.
		c.Pass, c.Why = true, "no metrics, so no label values to grow"
	case len(junk) > 0:
		sort.Strings(junk)
		c.Why = fmt.Sprintf("%d requests to junk URLs became label values, e.g. %s", 2*junkRequests, junk[0])
	default:
		c.Pass = true
		c.Why = fmt.Sprintf("%d requests to junk URLs added no label value", 2*junkRequests)
	}
	return c
}

func histClause(mf *dto.MetricFamily, absent string, panels []string) Clause {
	c := Clause{Name: histName, Panels: panels, Effect: panelsEmpty}
	switch {
	case mf == nil:
		c.Why = absent
	case mf.GetType() != dto.MetricType_HISTOGRAM:
		c.Why = "is a " + strings.ToLower(mf.GetType().String()) + ", want a histogram"
	case !listeners(mf)["tcp"] || !listeners(mf)["unix"]:
		c.Why = fmt.Sprintf("listener label values %v, want tcp and unix", keys(listeners(mf)))
	default:
		c.Pass, c.Why = true, "classic buckets"
		if native(mf) {
			c.Why = "native and classic buckets"
		}
	}
	return c
}

func otherClause(m string, mf *dto.MetricFamily, absent string, panels []string) Clause {
	c := Clause{Name: "metric " + m, Panels: panels, Effect: panelsEmpty}
	switch {
	case mf == nil:
		c.Why = absent
	case len(listeners(mf)) > 0 && (!listeners(mf)["tcp"] || !listeners(mf)["unix"]):
		c.Why = fmt.Sprintf("listener label values %v, want tcp and unix", keys(listeners(mf)))
	default:
		c.Pass, c.Why = true, fmt.Sprintf("%s, %d series", strings.ToLower(mf.GetType().String()), len(mf.GetMetric()))
	}
	return c
}

// countedPerListener: some route label counted exactly the requests sent to
// ENDPOINT on each listener between the two scrapes.
func countedPerListener(before, after families, endpoint string) (bool, string) {
	dt, du := after.routeDeltas(before, "tcp"), after.routeDeltas(before, "unix")
	var seen []string
	for r, n := range dt {
		if n == countRequests && du[r] == countRequests {
			return true, fmt.Sprintf(`after %d GET %s on each: route=%q +%d on listener="tcp" and on listener="unix"`, countRequests, endpoint, r, countRequests)
		}
		seen = append(seen, fmt.Sprintf("%q tcp +%g unix +%g", r, n, du[r]))
	}
	for r, n := range du {
		if _, ok := dt[r]; !ok {
			seen = append(seen, fmt.Sprintf("%q tcp +0 unix +%g", r, n))
		}
	}
	sort.Strings(seen)
	if len(seen) == 0 {
		seen = []string{"no listener=\"tcp\" or \"unix\" series moved"}
	}
	return false, fmt.Sprintf("after %d GET %s on each listener, want one route +%d on both; got %s",
		countRequests, endpoint, countRequests, strings.Join(seen, ", "))
}

func keys(m map[string]bool) []string {
	s := make([]string, 0, len(m))
	for k := range m {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// others runs as a user outside nginx's group: connecting must be refused.
func others(cfg Config) Clause {
	c := Clause{Name: othersName, Required: true}
	who := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	deadline := time.Now().Add(cfg.Wait)
	for {
		conn, err := net.DialTimeout("unix", cfg.Socket, 2*time.Second)
		switch {
		case err == nil:
			conn.Close()
			c.Why = "connected as " + who + ": the socket or its folder lets anyone in"
			return c
		case errors.Is(err, syscall.EACCES):
			c.Pass, c.Why = true, "connect as "+who+": permission denied"
			return c
		case time.Now().After(deadline):
			c.Why = fmt.Sprintf("connect as %s: %v", who, err)
			return c
		}
		time.Sleep(200 * time.Millisecond) // not there yet: the app may be starting
	}
}

// drain sends a slow request on each listener, says so on out (the driver
// then stops the app), and checks that both are answered and that the
// listeners close and the socket goes away.
func drain(a *app, cfg Config, out io.Writer) Clause {
	c := Clause{Name: drainName, Effect: drainCost}
	sleep := fmt.Sprintf("/sleep/%d", drainSleep.Milliseconds())
	probe := a.tcp.get("/sleep/0")
	inflight := probe.err == nil && probe.status == 200
	type answer struct {
		listener string
		reply
	}
	replies := make(chan answer, 2)
	ok := true
	if inflight {
		for _, l := range a.both() {
			go func() { replies <- answer{l.name, l.get(sleep)} }()
		}
		time.Sleep(500 * time.Millisecond) // both are in the handler by now
	}
	_ = json.NewEncoder(out).Encode(map[string]string{"event": "inflight"})
	signalled := time.Now()

	var parts []string
	if inflight {
		for range 2 {
			r := <-replies
			ok = ok && r.err == nil && r.status == 200
			parts = append(parts, fmt.Sprintf("in flight on %s: %s", r.listener, r.reply))
		}
	} else {
		parts = append(parts, "in-flight requests not checked: /sleep/0 answered "+probe.String())
	}
	gone := func() bool {
		if _, err := os.Stat(cfg.Socket); !errors.Is(err, os.ErrNotExist) {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if conn, err := a.tcp.dial(ctx); err == nil {
			conn.Close()
			return false
		}
		return true
	}
	for !gone() && time.Since(signalled) < cfg.StopWait {
		time.Sleep(100 * time.Millisecond)
	}
	if gone() {
		parts = append(parts, fmt.Sprintf("listeners closed and socket removed %.1f s after the stop began", time.Since(signalled).Seconds()))
	} else {
		ok = false
		parts = append(parts, fmt.Sprintf("%s after the stop began the socket file or the TCP listener is still there", cfg.StopWait))
	}
	c.Pass, c.Why = ok, strings.Join(parts, "; ")
	return c
}
