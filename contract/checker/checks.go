package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"

	"uds-lab/contract/panels"
)

// The metrics no comparison can do without; the dashboards' other app
// metrics are optional and only leave their own panels empty.
const (
	requestsMetric = "app_http_requests_total"
	durationMetric = "app_http_request_duration_seconds"
	pingCount      = 10
	probeCount     = 5
	drainSleep     = 4 * time.Second
)

func check(cfg Config, a *app, emit func(Clause)) error {
	uses, err := panels.Load(cfg.Dashboards)
	if err != nil {
		return err
	}
	workloads, err := loadWorkloads(cfg)
	if err != nil {
		return err
	}
	emit(waitReady(a, cfg.Wait, "ready on both listeners"))
	emit(socketMode(cfg, a))
	emit(health(a))
	for _, w := range workloads {
		emit(route(a, w))
	}
	for _, c := range metricClauses(a, uses) {
		emit(c)
	}
	return nil
}

// waitReady polls /readyz on both listeners until both answer 200.
func waitReady(a *app, wait time.Duration, name string) Clause {
	c := Clause{Name: name, Required: true}
	start := time.Now()
	var last []string
	for {
		last = last[:0]
		for _, l := range a.both() {
			if r := l.get("/readyz"); r.err != nil || r.status != 200 {
				last = append(last, fmt.Sprintf("%s /readyz: %s", l.name, r))
			}
		}
		if len(last) == 0 {
			c.Pass, c.Why = true, fmt.Sprintf("/readyz 200 on tcp and unix after %.1f s", time.Since(start).Seconds())
			return c
		}
		if time.Since(start) > wait {
			c.Why = fmt.Sprintf("not ready after %s: %s", wait, strings.Join(last, "; "))
			return c
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// socketMode: the socket nginx's workers (this process's user) can connect
// to, and whose mode gives others nothing.
func socketMode(cfg Config, a *app) Clause {
	c := Clause{Name: "socket: nginx's user can connect, others have no access", Required: true}
	fi, err := os.Stat(cfg.Socket)
	if err != nil {
		c.Why = err.Error()
		return c
	}
	st := fi.Sys().(*syscall.Stat_t)
	desc := fmt.Sprintf("%s %04o owner %d:%d", cfg.Socket, fi.Mode().Perm(), st.Uid, st.Gid)
	dir, derr := os.Stat(cfg.Socket[:strings.LastIndexByte(cfg.Socket, '/')+1])
	conn, cerr := a.uds.dial(context.Background())
	switch {
	case fi.Mode()&os.ModeSocket == 0:
		c.Why = desc + " is not a socket"
	case fi.Mode().Perm()&0o007 != 0:
		c.Why = desc + ": others have access; want 0660 with nginx's group"
	case derr == nil && dir.Mode().Perm()&0o002 != 0:
		c.Why = fmt.Sprintf("its folder is %04o: anyone could replace the socket", dir.Mode().Perm())
	case cerr != nil:
		c.Why = fmt.Sprintf("%s: connect as %d:%d (nginx's user): %v", desc, os.Getuid(), os.Getgid(), cerr)
	default:
		conn.Close()
		c.Pass, c.Why = true, fmt.Sprintf("%s; connected as %d:%d", desc, os.Getuid(), os.Getgid())
	}
	return c
}

func health(a *app) Clause {
	c := Clause{Name: "/healthz and /readyz on both listeners", Required: true, Pass: true}
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
	c := Clause{Name: "route " + w.path, Workload: w.name, Required: w.name == "ping"}
	t, u := a.tcp.get(w.path), a.uds.get(w.path)
	c.Why = fmt.Sprintf("tcp %s; unix %s", t, u)
	c.Pass = t.err == nil && u.err == nil && t.status == 200 && u.status == 200 && t.bytes == u.bytes
	if !c.Pass {
		c.Why += fmt.Sprintf("; SCENARIO=%s cannot run", w.name)
	}
	return c
}

// metricClauses scrape /metrics (over TCP, as Prometheus does) around known
// requests: /ping on each listener must be counted on that listener, and junk
// URLs must add no label values.
func metricClauses(a *app, uses map[string][]panels.Panel) []Clause {
	names := func(m string) []string {
		var s []string
		for _, p := range uses[m] {
			s = append(s, p.String())
		}
		return s
	}
	before, err := scrape(a.tcp)
	if err != nil {
		return []Clause{{Name: "/metrics on the TCP listener", Required: true, Why: err.Error(), Panels: names(requestsMetric)}}
	}
	token := fmt.Sprintf("contract-probe-%d", time.Now().UnixNano())
	for _, l := range a.both() {
		for range pingCount {
			l.get("/ping")
		}
		for i := range probeCount {
			l.get(fmt.Sprintf("/%s/%d", token, i))
		}
	}
	after, err := scrape(a.tcp)
	if err != nil {
		return []Clause{{Name: "/metrics on the TCP listener", Required: true, Why: err.Error(), Panels: names(requestsMetric)}}
	}

	var out []Clause
	counted := Clause{Name: requestsMetric + " counts each listener's requests", Required: true, Panels: names(requestsMetric)}
	if after[requestsMetric] == nil {
		counted.Why = "absent from /metrics"
	} else {
		dt := after.pingRequests("tcp") - before.pingRequests("tcp")
		du := after.pingRequests("unix") - before.pingRequests("unix")
		counted.Pass = dt == pingCount && du == pingCount
		counted.Why = fmt.Sprintf(`after %d /ping on each: listener="tcp" +%g, listener="unix" +%g (routes containing "ping")`, pingCount, dt, du)
	}
	out = append(out, counted)

	bounded := Clause{Name: "labels are route templates, not URLs", Required: true}
	if junk := after.labelValuesContaining(token); len(junk) > 0 {
		sort.Strings(junk)
		bounded.Why = fmt.Sprintf("%d junk URLs became label values, e.g. %s", 2*probeCount, junk[0])
	} else {
		bounded.Pass = true
		bounded.Why = fmt.Sprintf("%d requests to junk URLs added no label value", 2*probeCount)
	}
	out = append(out, bounded)

	hist := Clause{Name: durationMetric + " per listener", Required: true, Panels: names(durationMetric)}
	switch mf := after[durationMetric]; {
	case mf == nil:
		hist.Why = "absent from /metrics"
	case mf.GetType() != dto.MetricType_HISTOGRAM:
		hist.Why = "is a " + strings.ToLower(mf.GetType().String()) + ", want a histogram"
	case !listeners(mf)["tcp"] || !listeners(mf)["unix"]:
		hist.Why = fmt.Sprintf("listener label values %v, want tcp and unix", keys(listeners(mf)))
	default:
		hist.Pass, hist.Why = true, "classic buckets"
		if native(mf) {
			hist.Why = "native and classic buckets"
		}
	}
	out = append(out, hist)

	// Every other app metric the dashboards read: optional, each names its panels.
	var others []string
	for m := range uses {
		if !strings.HasPrefix(m, requestsMetric) && !strings.HasPrefix(m, durationMetric) {
			others = append(others, m)
		}
	}
	sort.Strings(others)
	for _, m := range others {
		c := Clause{Name: "metric " + m, Panels: names(m)}
		switch mf := after.family(m); {
		case mf == nil:
			c.Why = "absent from /metrics"
		case len(listeners(mf)) > 0 && (!listeners(mf)["tcp"] || !listeners(mf)["unix"]):
			c.Why = fmt.Sprintf("listener label values %v, want tcp and unix", keys(listeners(mf)))
		default:
			c.Pass, c.Why = true, fmt.Sprintf("%s, %d series", strings.ToLower(mf.GetType().String()), len(mf.GetMetric()))
		}
		out = append(out, c)
	}
	return out
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
	c := Clause{Name: "socket: refused to other users", Required: true}
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
	c := Clause{Name: "SIGTERM: requests in flight answered, socket removed", Required: true}
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
	for !gone() && time.Since(signalled) < 15*time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	if gone() {
		parts = append(parts, fmt.Sprintf("listeners closed and socket removed %.1f s after the stop began", time.Since(signalled).Seconds()))
	} else {
		ok = false
		parts = append(parts, "15 s after the stop began the socket file or the TCP listener is still there")
	}
	c.Pass, c.Why = ok, strings.Join(parts, "; ")
	return c
}
