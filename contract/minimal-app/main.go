// Command minimal-app is an example app for uds-lab (README, "Swap in your
// app"), in plain net/http: main.go (settings, the two listeners, the socket,
// shutdown), routes.go and metrics.go. What the lab requires is in main.go:
// the same routes on TCP and on a Unix socket whose mode gives nginx's group
// read and write and others nothing, and a start over a stale socket. The
// rest is optional and shown on purpose: /healthz and /readyz with the image's
// HEALTHCHECK, per-listener metrics, and a drain on SIGTERM. Copy it, or read
// it as the checklist for an app in another stack.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

func main() {
	if err := run(os.Args, os.Getenv); err != nil {
		fmt.Fprintf(os.Stderr, "minimal-app: %v\n", err)
		os.Exit(1)
	}
}

// config comes from the same variables as the lab's app; compose sets them.
type config struct {
	tcpAddr string      // APP_TCP_ADDR
	socket  string      // APP_UNIX_SOCKET
	mode    os.FileMode // APP_SOCKET_MODE, octal
	gid     int         // APP_SOCKET_GID, -1 keeps the process's group
}

func loadConfig(getenv func(string) string) (config, error) {
	c := config{tcpAddr: ":8080", socket: "/sock/app.sock", mode: 0o660, gid: -1}
	if v := getenv("APP_TCP_ADDR"); v != "" {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return c, fmt.Errorf("APP_TCP_ADDR=%q: %v", v, err)
		}
		c.tcpAddr = v
	}
	if v := getenv("APP_UNIX_SOCKET"); v != "" {
		c.socket = v
	}
	// The lab's rule (README, "The app and its contract"): read and write for
	// the owner and for nginx's group, nothing for others.
	if v := getenv("APP_SOCKET_MODE"); v != "" {
		m, err := strconv.ParseUint(v, 8, 32)
		if err != nil || m > 0o777 || m&0o007 != 0 || m&0o660 != 0o660 {
			return c, fmt.Errorf("APP_SOCKET_MODE=%q: want octal like 0660: read-write for the owner and the group (nginx's), nothing for others", v)
		}
		c.mode = os.FileMode(m)
	}
	if v := getenv("APP_SOCKET_GID"); v != "" {
		g, err := strconv.Atoi(v)
		if err != nil || g < 0 {
			return c, fmt.Errorf("APP_SOCKET_GID=%q: want a group id (0 or more)", v)
		}
		c.gid = g
	}
	return c, nil
}

func run(args []string, getenv func(string) string) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	if len(args) > 1 && args[1] == "healthcheck" {
		return healthcheck(cfg)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	tcp, err := net.Listen("tcp", cfg.tcpAddr)
	if err != nil {
		return err
	}
	uds, err := listenUnix(cfg)
	if err != nil {
		tcp.Close()
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := newMetrics(reg)
	mux := routes(reg)
	servers := []*http.Server{newServer(m.instrument("tcp", mux)), newServer(m.instrument("unix", mux))}
	errc := make(chan error, 2)
	for i, l := range []net.Listener{tcp, uds} {
		go func() { errc <- servers[i].Serve(l) }()
	}
	fmt.Printf("minimal-app: listening on tcp %s and unix %s\n", cfg.tcpAddr, cfg.socket)

	select {
	case err = <-errc: // a listener failed: stop the other one too
	case <-ctx.Done():
	}
	// Drain: stop accepting, let requests in flight finish. Closing the Unix
	// listener removes the socket file, so no stale socket is left behind.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	for _, s := range servers {
		if serr := s.Shutdown(shutdownCtx); serr != nil && err == nil {
			err = serr
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func newServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      70 * time.Second, // /sleep/ allows up to 60 s
		IdleTimeout:       120 * time.Second,
	}
}

// listenUnix creates the socket with the configured mode and group. A socket
// left by a killed process is removed; one that still answers is not.
func listenUnix(cfg config) (net.Listener, error) {
	if fi, err := os.Stat(cfg.socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
		if c, err := net.Dial("unix", cfg.socket); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another process is listening on it", cfg.socket)
		}
		if err := os.Remove(cfg.socket); err != nil {
			return nil, fmt.Errorf("removing stale socket: %w", err)
		}
		fmt.Printf("minimal-app: removed stale socket %s\n", cfg.socket)
	}
	l, err := net.Listen("unix", cfg.socket)
	if err != nil {
		return nil, err
	}
	if err := os.Chown(cfg.socket, -1, cfg.gid); err != nil {
		l.Close()
		return nil, fmt.Errorf("APP_SOCKET_GID=%d: %w", cfg.gid, err)
	}
	if err := os.Chmod(cfg.socket, cfg.mode); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// healthcheck is the image's HEALTHCHECK (scratch has no curl): /readyz over
// both listeners.
func healthcheck(cfg config) error {
	_, port, _ := net.SplitHostPort(cfg.tcpAddr)
	for _, dial := range []func() (net.Conn, error){
		func() (net.Conn, error) {
			return net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), 2*time.Second)
		},
		func() (net.Conn, error) { return net.DialTimeout("unix", cfg.socket, 2*time.Second) },
	} {
		client := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
			DialContext: func(context.Context, string, string) (net.Conn, error) { return dial() },
		}}
		resp, err := client.Get("http://app/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
	}
	return nil
}
