package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

const healthcheckTimeout = 2 * time.Second

// healthcheck is the container healthcheck (the scratch image has no curl):
// /healthz must answer 200 on the metrics address. The UDP reader needs no
// separate probe: if it fails, serve stops the whole process.
func healthcheck(ctx context.Context, cfg Config, out io.Writer) error {
	target, err := loopbackAddr(cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("healthcheck: LOG_EXPORTER_METRICS_ADDR=%q: %w", cfg.MetricsAddr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+target+"/healthz", nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Fprintf(out, "healthcheck: %s: %v\n", target, err)
		return fmt.Errorf("healthcheck failed: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintf(out, "healthcheck: %s: /healthz answered %d\n", target, resp.StatusCode)
		return fmt.Errorf("healthcheck failed: /healthz answered %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(out, "healthcheck: %s: ok\n", target)
	return nil
}

// loopbackAddr turns a listen address into one to dial from inside the
// container: wildcard hosts become 127.0.0.1.
func loopbackAddr(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", err
	}
	if port == "0" {
		return "", errors.New("port 0 is chosen at random, cannot derive the address to check")
	}
	switch host {
	case "", "0.0.0.0", "::":
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}
