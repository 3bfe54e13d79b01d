package main

import (
	"fmt"
	"net"
	"strconv"
)

// Config is the validated runtime configuration, read once at start.
type Config struct {
	SyslogAddr  string // UDP address nginx sends its syslog datagrams to.
	MetricsAddr string // TCP address of /metrics and /healthz.
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

	cfg.SyslogAddr = get("LOG_EXPORTER_SYSLOG_ADDR", ":5514")
	if err := validateAddr(cfg.SyslogAddr); err != nil {
		return cfg, fmt.Errorf("LOG_EXPORTER_SYSLOG_ADDR=%q: %w", cfg.SyslogAddr, err)
	}

	cfg.MetricsAddr = get("LOG_EXPORTER_METRICS_ADDR", ":9114")
	if err := validateAddr(cfg.MetricsAddr); err != nil {
		return cfg, fmt.Errorf("LOG_EXPORTER_METRICS_ADDR=%q: %w", cfg.MetricsAddr, err)
	}
	return cfg, nil
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
