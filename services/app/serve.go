package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"
)

// HTTP server timeouts. WriteTimeout must cover /sleep/10000 plus a large
// download; IdleTimeout must exceed nginx's upstream keepalive_timeout (60s
// by default) so the app never closes a connection nginx is about to reuse.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 60 * time.Second
	idleTimeout       = 120 * time.Second
)

// serve runs the HTTP server on both listeners until ctx is cancelled, then
// drains. It returns nil after a clean drain. ready is a parameter so tests
// can observe the drain state.
func serve(ctx context.Context, cfg Config, ready *Readiness, stdout, stderr io.Writer) error {
	tcpL, unixS, err := listen(cfg)
	if err != nil {
		return err
	}
	metrics := NewMetrics()
	srv := newHTTPServer(cfg, ready, metrics, stderr)
	announce(stdout, cfg, tcpL, unixS)

	errc := make(chan error, 2)
	for _, l := range []net.Listener{
		countingListener{Listener: tcpL, loopback: metrics.acceptedLoopback, network: metrics.acceptedNetwork},
		countingListener{Listener: unixS, loopback: metrics.acceptedUnix, network: metrics.acceptedUnix},
	} {
		go func() { errc <- srv.Serve(l) }()
	}

	select {
	case <-ctx.Done():
	case err := <-errc:
		// A listener died on its own: stop everything rather than run half-up.
		_ = srv.Close()
		_ = unixS.remove()
		return fmt.Errorf("serve: %w", err)
	}
	return drain(cfg, srv, unixS, errc, ready, stdout)
}

// listen opens both listeners, then writes the download file. Both listeners
// first: a second start that fails (port or socket in use) must not touch
// what the running instance serves, its download file included. Connections
// queue in the backlog until Serve runs.
func listen(cfg Config) (net.Listener, *unixSocket, error) {
	tcpL, err := net.Listen("tcp", cfg.TCPAddr)
	if err != nil {
		return nil, nil, fmt.Errorf("APP_TCP_ADDR %s: %w", cfg.TCPAddr, err)
	}
	unixS, err := listenUnix(cfg.UnixSocket, cfg.SocketMode, cfg.SocketGID)
	if err != nil {
		_ = tcpL.Close()
		return nil, nil, err
	}
	if err := writeDownloadFile(cfg.DownloadFile, cfg.DownloadSize); err != nil {
		_ = tcpL.Close()
		_ = unixS.Close()
		_ = unixS.remove()
		return nil, nil, err
	}
	return tcpL, unixS, nil
}

// newHTTPServer is the one server both listeners share: the same handler and
// timeouts on each, so the paths differ only in their transport.
func newHTTPServer(cfg Config, ready *Readiness, metrics *Metrics, stderr io.Writer) *http.Server {
	return &http.Server{
		Handler: NewServer(Deps{
			Metrics:          metrics,
			Readiness:        ready,
			DownloadFile:     cfg.DownloadFile,
			CPUMaxIterations: cfg.CPUMaxIterations,
			CPU:              cfg.CPU,
			ErrorLog:         stderr,
		}),
		// "OPTIONS *" goes to the router (a JSON 404) instead of net/http's
		// built-in empty 200: every answer is JSON.
		DisableGeneralOptionsHandler: true,
		ReadHeaderTimeout:            readHeaderTimeout,
		ReadTimeout:                  readTimeout,
		WriteTimeout:                 writeTimeout,
		IdleTimeout:                  idleTimeout,
		// Tag the connection once; the middleware reads it per request.
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, listenerKey{}, listenerOf(c))
		},
		ConnState: metrics.connState,
		ErrorLog:  log.New(stderr, "app: http: ", 0),
	}
}

// announce prints the startup line (and what the start found or doubts).
func announce(stdout io.Writer, cfg Config, tcpL net.Listener, unixS *unixSocket) {
	if unixS.removedStale {
		fmt.Fprintf(stdout, "app: removed stale socket %s (nothing was listening on it)\n", cfg.UnixSocket)
	}
	gid := "unchanged"
	if cfg.SocketGID >= 0 {
		gid = fmt.Sprint(cfg.SocketGID)
	}
	fmt.Fprintf(stdout, "app: listening tcp=%s unix=%s socket_mode=%04o socket_gid=%s download=%s (%d bytes) cpu_concurrency=%d cpu_queue=%d\n",
		tcpL.Addr(), cfg.UnixSocket, cfg.SocketMode, gid, cfg.DownloadFile, cfg.DownloadSize, cfg.CPU.Concurrency, cfg.CPU.Queue)
	if cfg.ShutdownTimeout <= longestRequest {
		fmt.Fprintf(stdout, "app: warning: APP_SHUTDOWN_TIMEOUT=%s does not outlast the longest request (%s): one in flight at SIGTERM may be cut off\n",
			cfg.ShutdownTimeout, longestRequest)
	}
}

// drain stops taking requests, lets those in flight finish within
// APP_SHUTDOWN_TIMEOUT, and removes the socket if it is still ours.
func drain(cfg Config, srv *http.Server, unixS *unixSocket, errc <-chan error, ready *Readiness, stdout io.Writer) error {
	// Note: once Shutdown starts, net/http stops reading new requests even on
	// open connections, so the 503 from /readyz is only visible to requests
	// already read; the flag matters for in-process observers.
	ready.SetDraining()
	fmt.Fprintf(stdout, "app: shutting down, draining for up to %s\n", cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	// Shutdown closes both listeners and waits for in-flight requests; the
	// socket file is removed after, only if it is still ours (see remove).
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
		_ = unixS.remove()
		return fmt.Errorf("drain exceeded APP_SHUTDOWN_TIMEOUT (%s), connections force-closed: %w", cfg.ShutdownTimeout, err)
	}
	if err := unixS.remove(); err != nil {
		return fmt.Errorf("APP_UNIX_SOCKET %s: removing socket: %w", cfg.UnixSocket, err)
	}
	for range 2 {
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve: %w", err)
		}
	}
	fmt.Fprintln(stdout, "app: shutdown complete")
	return nil
}
