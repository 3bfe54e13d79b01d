package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Config is the validated runtime configuration, read once at start.
type Config struct {
	// Pipe (LOG_EXPORTER_PIPE) is the FIFO nginx's buffered access log is
	// written to (access_log <pipe> ... buffer=64k), the lab's default: one
	// write per 64 KiB of lines, and only what can open the file can write.
	Pipe      string
	SocketGID int // LOG_EXPORTER_SOCKET_GID: the pipe's group (-1: the process's)
	// SyslogAddr (LOG_EXPORTER_SYSLOG_ADDR), if set, is a UDP host:port where
	// nginx sends a line per syslog datagram: the per-line alternative. Empty:
	// no socket at all, so nothing on the network can inject lines (syslog
	// has no authentication).
	SyslogAddr  string
	MetricsAddr string // TCP address of /metrics and /healthz.
	Catalogue   string // the lab's catalogue.json, whose paths are the path label's values
	Paths       []string
}

// loadConfig reads every LOG_EXPORTER_* setting through getenv (so tests need
// no real environment), applies defaults and validates. Errors name the
// setting and the offending value so a bad deployment fails at start.
func loadConfig(getenv func(string) string) (Config, error) {
	get := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	var cfg Config

	cfg.SyslogAddr = getenv("LOG_EXPORTER_SYSLOG_ADDR")
	if cfg.SyslogAddr != "" {
		if err := validateAddr(cfg.SyslogAddr); err != nil {
			return cfg, fmt.Errorf("LOG_EXPORTER_SYSLOG_ADDR=%q: %w (UDP)", cfg.SyslogAddr, err)
		}
	}
	cfg.Pipe = getenv("LOG_EXPORTER_PIPE")
	if cfg.Pipe != "" && !strings.HasPrefix(cfg.Pipe, "/") {
		return cfg, fmt.Errorf("LOG_EXPORTER_PIPE=%q: want an absolute path", cfg.Pipe)
	}
	cfg.SocketGID = -1
	if v := getenv("LOG_EXPORTER_SOCKET_GID"); v != "" {
		gid, err := strconv.ParseUint(v, 10, 31)
		if err != nil {
			return cfg, fmt.Errorf("LOG_EXPORTER_SOCKET_GID=%q: want a numeric group id", v)
		}
		cfg.SocketGID = int(gid)
	}

	cfg.MetricsAddr = get("LOG_EXPORTER_METRICS_ADDR", ":9114")
	if err := validateAddr(cfg.MetricsAddr); err != nil {
		return cfg, fmt.Errorf("LOG_EXPORTER_METRICS_ADDR=%q: %w", cfg.MetricsAddr, err)
	}

	cfg.Catalogue = get("LOG_EXPORTER_CATALOGUE", "/catalogue.json")
	paths, err := readPaths(cfg.Catalogue)
	if err != nil {
		return cfg, fmt.Errorf("LOG_EXPORTER_CATALOGUE=%q: %w", cfg.Catalogue, err)
	}
	cfg.Paths = paths
	if cfg.Pipe == "" && cfg.SyslogAddr == "" {
		return cfg, fmt.Errorf("no input: set LOG_EXPORTER_PIPE (nginx's buffered access log, the lab's) or LOG_EXPORTER_SYSLOG_ADDR (syslog over UDP)")
	}
	return cfg, nil
}

var pathName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// readPaths returns the names of the catalogue's paths, sorted: the path
// label's values besides "other".
func readPaths(file string) ([]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var c struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("not a catalogue: %w", err)
	}
	if len(c.Paths) == 0 || len(c.Paths) >= maxPaths {
		return nil, fmt.Errorf("has %d paths: want 1 to %d", len(c.Paths), maxPaths-1)
	}
	names := make([]string, 0, len(c.Paths))
	for n := range c.Paths {
		if !pathName.MatchString(n) || n == "other" {
			return nil, fmt.Errorf("path %q: want lower-case letters, digits and dashes (not \"other\")", n)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// validateAddr accepts host:port or :port with a numeric port (0 picks a free
// port, for tests). Service names are not accepted as ports.
func validateAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port or :port (%v)", err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q must be a number between 0 and 65535", port)
	}
	return nil
}
