// Command contract checks a running app against uds-lab's app contract (README,
// "The app and its contract"). It runs in the lab's network as nginx's user,
// with the socket volume mounted as nginx has it, so what it can reach nginx
// can too. contract/contract.py starts the app and runs it once per step; each
// step prints its clauses as JSON lines.
//
//	contract check    required: serves on both listeners (HTTP, or FastCGI
//	                  with APP_PROTOCOL=fastcgi, as nginx asks), the socket's
//	                  mode; optional: health, each workload's route, metrics
//	contract others   required: the socket refuses a user outside nginx's group
//	contract wait     required: serves again on both (after a SIGKILL)
//	contract drain    optional: requests in flight when SIGTERM comes are
//	                  answered, then the listeners close and the socket goes
//	contract pitfalls the socket pitfalls (pitfalls.go), run in the app's
//	                  network and PID namespaces as the app's user
//	contract envelope the failure envelope alone (after a low somaxconn)
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "contract: %v\n", err)
		os.Exit(2)
	}
}

// Config: where the app is, and what the lab will ask of it.
type Config struct {
	TCP        string            // CONTRACT_TCP, host:port of the app's TCP listener
	Socket     string            // CONTRACT_SOCKET, the app's Unix socket
	Dashboards string            // CONTRACT_DASHBOARDS, folder of grafana/dashboards
	Workloads  string            // CONTRACT_WORKLOADS, the lab's catalogue.json
	Wait       time.Duration     // CONTRACT_WAIT, how long the app may take to serve
	StopWait   time.Duration     // how long a stopped app may take to close its listeners
	Protocol   string            // APP_PROTOCOL: http, or fastcgi (PHP-FPM), as nginx speaks to the app
	Script     string            // APP_FASTCGI_SCRIPT: the front controller a FastCGI request names
	Params     map[string]string // CPU_ITERATIONS, SLEEP_MS, ENDPOINT as make load has them
	// The pooled path's pitfalls (pooled.go): how long the idle row waits for
	// the app to close a kept connection (CONTRACT_IDLE_WAIT), and nginx's
	// upstream keepalive_timeout it is judged against
	// (CONTRACT_NGINX_KEEPALIVE_TIMEOUT, which contract.py reads from the
	// lab's nginx template; 0: not given, the row is not judged).
	IdleWait       time.Duration
	NginxKeepalive time.Duration
}

// endpoint is the route the lab asks whether the app serves: ENDPOINT, the
// custom workload's (make contract ENDPOINT=/a/route/of/yours).
func (c Config) endpoint() string { return c.Params["ENDPOINT"] }

func loadConfig(getenv func(string) string) (c Config, err error) {
	c = Config{
		TCP:        or(getenv("CONTRACT_TCP"), "app:8080"),
		Socket:     or(getenv("CONTRACT_SOCKET"), "/sock/app.sock"),
		Dashboards: or(getenv("CONTRACT_DASHBOARDS"), "/dashboards"),
		Workloads:  or(getenv("CONTRACT_WORKLOADS"), "/catalogue.json"),
		Wait:       30 * time.Second,
		StopWait:   15 * time.Second,
		Params:     map[string]string{},
		Protocol:   or(getenv("APP_PROTOCOL"), "http"),
		Script:     getenv("APP_FASTCGI_SCRIPT"),
	}
	switch c.Protocol {
	case "http":
	case "fastcgi":
		if !strings.HasPrefix(c.Script, "/") {
			return c, fmt.Errorf("APP_FASTCGI_SCRIPT=%q: APP_PROTOCOL=fastcgi needs the front controller's absolute path, such as /app/index.php", c.Script)
		}
	default:
		return c, fmt.Errorf("APP_PROTOCOL=%q: want http or fastcgi", c.Protocol)
	}
	if v := getenv("CONTRACT_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("CONTRACT_WAIT=%q: want a positive duration such as 30s", v)
		}
		c.Wait = d
	}
	if c.IdleWait, err = durationSetting(getenv, "CONTRACT_IDLE_WAIT", idleWaitDefault, 10*time.Minute); err != nil {
		return c, err
	}
	if c.NginxKeepalive, err = durationSetting(getenv, "CONTRACT_NGINX_KEEPALIVE_TIMEOUT", 0, 24*time.Hour); err != nil {
		return c, err
	}
	// The workloads' parameters, as make load's plan (loadgen/plan.py) reads them.
	for _, k := range []string{"CPU_ITERATIONS", "SLEEP_MS", "ENDPOINT"} {
		c.Params[k] = getenv(k)
	}
	for _, k := range []string{"CPU_ITERATIONS", "SLEEP_MS"} {
		if v := c.Params[k]; v != "" {
			if _, err := strconv.ParseUint(v, 10, 32); err != nil {
				return c, fmt.Errorf("%s=%q: want a whole number", k, v)
			}
		}
	}
	c.Params["ENDPOINT"] = or(c.Params["ENDPOINT"], "/ping")
	if v := c.Params["ENDPOINT"]; !strings.HasPrefix(v, "/") || strings.ContainsAny(v, " \t\r\n") {
		return c, fmt.Errorf("ENDPOINT=%q: want a path such as /ping", v)
	}
	return c, nil
}

// protocolName is the protocol as the clauses name it.
func (c Config) protocolName() string {
	if c.Protocol == "fastcgi" {
		return "FastCGI"
	}
	return "HTTP"
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Clause is one line of the contract's table.
type Clause struct {
	Name     string   `json:"clause"`
	Required bool     `json:"required"`
	Pass     bool     `json:"pass"`
	Why      string   `json:"why"`
	Panels   []string `json:"panels,omitempty"` // left empty if this fails
	Workload string   `json:"workload,omitempty"`
	Effect   string   `json:"effect,omitempty"` // what a failed optional clause costs the lab
	// A socket pitfall's row (pitfalls.go): never required; its status
	// (pass, WARN, info, n/a), the fix where it fails, a burst's figures.
	Pitfall bool    `json:"pitfall,omitempty"`
	Status  string  `json:"status,omitempty"`
	Fix     string  `json:"fix,omitempty"`
	Levels  []level `json:"levels,omitempty"`
}

func run(args []string, getenv func(string) string, out io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	if len(args) != 2 {
		return fmt.Errorf("usage: contract check|others|wait|drain|pitfalls|envelope")
	}
	app := newApp(cfg)
	enc := json.NewEncoder(out)
	emit := func(c Clause) { _ = enc.Encode(c) }
	switch args[1] {
	case "check":
		return check(cfg, app, emit)
	case "others":
		emit(others(cfg))
	case "wait":
		emit(serves(app, cfg, restartName))
	case "drain":
		emit(drain(app, cfg, out))
	case "pitfalls":
		pitfalls(cfg, app, emit)
	case "envelope":
		emit(envelopeClause(cfg, app, true))
	default:
		return fmt.Errorf("unknown step %q: want check, others, wait, drain, pitfalls or envelope", args[1])
	}
	return nil
}
