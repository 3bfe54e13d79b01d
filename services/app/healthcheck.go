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
// /readyz must answer 200 over both TCP and the Unix socket.
func healthcheck(ctx context.Context, cfg Config, out io.Writer) error {
	tcpTarget, err := loopbackAddr(cfg.TCPAddr)
	if err != nil {
		return fmt.Errorf("healthcheck: APP_TCP_ADDR=%q: %w", cfg.TCPAddr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, healthcheckTimeout)
	defer cancel()

	var dialer net.Dialer
	checks := []struct {
		name string
		dial func(ctx context.Context) (net.Conn, error)
	}{
		{"tcp " + tcpTarget, func(ctx context.Context) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", tcpTarget)
		}},
		{"unix " + cfg.UnixSocket, func(ctx context.Context) (net.Conn, error) {
			return dialer.DialContext(ctx, "unix", cfg.UnixSocket)
		}},
	}
	var errs []error
	for _, ch := range checks {
		if err := checkReady(ctx, ch.dial); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ch.name, err))
			fmt.Fprintf(out, "healthcheck: %s: %v\n", ch.name, err)
			continue
		}
		fmt.Fprintf(out, "healthcheck: %s: ready\n", ch.name)
	}
	if len(errs) > 0 {
		return fmt.Errorf("healthcheck failed: %w", errors.Join(errs...))
	}
	return nil
}

func checkReady(ctx context.Context, dial func(context.Context) (net.Conn, error)) error {
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial(ctx)
		},
		DisableKeepAlives: true,
	}}
	// The host is ignored by the custom dialer; it only fills the Host header.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://localhost/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz answered %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
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
