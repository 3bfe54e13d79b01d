package main

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// config is the generator's own settings, from the environment; the run's
// settings (paths, rate, phases) are in the plan.
type config struct {
	plan        string        // PLAN: the plan.json to run (loadgen/plan.py writes it)
	metricsAddr string        // OPENLOOP_METRICS_ADDR: where Prometheus scrapes it ("" or "off": nowhere)
	scrapeWait  time.Duration // OPENLOOP_SCRAPE_WAIT: how long to wait for a scrape after the last request
	timeout     time.Duration // OPENLOOP_TIMEOUT: a request's limit, connect to last byte
	connections int           // OPENLOOP_CONNECTIONS: each path's connections at most; a request due with all busy is an overflow
	senders     int           // OPENLOOP_SENDERS: pacers, each with its own timer, its share of the stream and of every path's connections
	segment     int           // OPENLOOP_SEGMENT "i/n": this process sends the stream's
	segments    int           // requests whose index is i modulo n (n pods on Kubernetes)
	logLoad     bool          // OPENLOOP_LOG_LOAD_JSON: load.json on stdout too, between marker lines
	startAt     time.Time     // OPENLOOP_START_AT: the run's start, unix ms, the same for every pod (zero: when it comes up)
}

// defaults: the generator's own settings where the environment gives none
// (README.md's table says the same; the plan has no default).
var defaults = config{
	metricsAddr: ":9465",
	scrapeWait:  10 * time.Second,
	timeout:     60 * time.Second,
	connections: 1000,
	senders:     runtime.GOMAXPROCS(0),
	segment:     0,
	segments:    1,
}

// maxSenders: OPENLOOP_SENDERS at most.
const maxSenders = 1024

// maxConnections: OPENLOOP_CONNECTIONS at most (each a goroutine, a socket
// and 16 KB of buffer).
const maxConnections = 100000

func loadConfig(getenv func(string) string) (config, error) {
	c := defaults
	c.plan = getenv("PLAN")
	if c.plan == "" {
		return c, fmt.Errorf("PLAN: empty; the plan.json to run (make load writes it with loadgen/plan.py)")
	}
	if v, ok := lookup(getenv, "OPENLOOP_METRICS_ADDR"); ok {
		c.metricsAddr = v
		if v == "off" {
			c.metricsAddr = ""
		}
	}
	var err error
	if c.scrapeWait, err = duration(getenv, "OPENLOOP_SCRAPE_WAIT", c.scrapeWait, 0); err != nil {
		return c, err
	}
	if c.timeout, err = duration(getenv, "OPENLOOP_TIMEOUT", c.timeout, time.Millisecond); err != nil {
		return c, err
	}
	if v, ok := lookup(getenv, "OPENLOOP_MAX_IN_FLIGHT"); ok {
		return c, fmt.Errorf("OPENLOOP_MAX_IN_FLIGHT=%q: no longer read: each path has a pool of connections, one request in flight on each; set OPENLOOP_CONNECTIONS (connections per path) instead", v)
	}
	if c.connections, err = whole(getenv, "OPENLOOP_CONNECTIONS", c.connections, maxConnections, "connections per path"); err != nil {
		return c, err
	}
	if c.senders, err = whole(getenv, "OPENLOOP_SENDERS", c.senders, maxSenders,
		"pacers, each with its own timer and share of the stream; default the CPUs Go may use, GOMAXPROCS"); err != nil {
		return c, err
	}
	if v, ok := lookup(getenv, "OPENLOOP_LOG_LOAD_JSON"); ok {
		if c.logLoad, err = strconv.ParseBool(v); err != nil {
			return c, fmt.Errorf("OPENLOOP_LOG_LOAD_JSON=%q: must be true or false", v)
		}
	}
	if v, ok := lookup(getenv, "OPENLOOP_START_AT"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return c, fmt.Errorf("OPENLOOP_START_AT=%q: must be the run's start in unix milliseconds (a whole number above 0), the same for every pod", v)
		}
		c.startAt = time.UnixMilli(n)
	}
	if v, ok := lookup(getenv, "OPENLOOP_SEGMENT"); ok {
		i, n, found := strings.Cut(v, "/")
		c.segment, err = strconv.Atoi(i)
		if err == nil {
			c.segments, err = strconv.Atoi(n)
		}
		if !found || err != nil || c.segments < 1 || c.segment < 0 || c.segment >= c.segments {
			return c, fmt.Errorf("OPENLOOP_SEGMENT=%q: must be i/n with 0 <= i < n (this pod's share of the stream)", v)
		}
	}
	return c, nil
}

// lookup: a setting's value and whether it was given (empty: not given).
func lookup(getenv func(string) string, name string) (string, bool) {
	v := strings.TrimSpace(getenv(name))
	return v, v != ""
}

// whole: a setting that is a whole number from 1 to top (def where not given).
func whole(getenv func(string) string, name string, def, top int, what string) (int, error) {
	v, ok := lookup(getenv, name)
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > top {
		return 0, fmt.Errorf("%s=%q: must be a whole number from 1 to %d (%s)", name, v, top, what)
	}
	return n, nil
}

func duration(getenv func(string) string, name string, def, min time.Duration) (time.Duration, error) {
	v, ok := lookup(getenv, name)
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < min {
		return 0, fmt.Errorf("%s=%q: must be a duration >= %v, e.g. 10s", name, v, min)
	}
	return d, nil
}
