package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const (
	// maxDatagram holds any UDP payload (at most 65507 bytes over IPv4), so a
	// datagram is never truncated.
	maxDatagram = 64 << 10
	// udpReadBuffer is asked for so bursts are queued, not dropped; the kernel
	// caps it at net.core.rmem_max (the startup line shows what was granted).
	// A Unix datagram socket queues by count instead: net.unix.max_dgram_qlen
	// (compose raises it in the exporter's network namespace).
	udpReadBuffer = 4 << 20
	// maxLoggedLine caps the malformed line echoed to stderr.
	maxLoggedLine = 200

	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 120 * time.Second
	shutdownTimeout   = 5 * time.Second
)

// serve receives syslog datagrams and serves /metrics and /healthz until ctx
// is cancelled. It returns nil after a clean stop.
func serve(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	conn, err := listenSyslog(cfg)
	if err != nil {
		return fmt.Errorf("LOG_EXPORTER_SYSLOG_ADDR %s: %w", cfg.SyslogAddr, err)
	}
	if path, ok := socketPath(cfg.SyslogAddr); ok {
		defer os.Remove(path) // after the close below: nginx then drops lines, it does not block
	}
	if err := conn.SetReadBuffer(udpReadBuffer); err != nil {
		fmt.Fprintf(stderr, "nginx-log-exporter: setting the read buffer to %d bytes: %v\n", udpReadBuffer, err)
	}
	ln, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("LOG_EXPORTER_METRICS_ADDR %s: %w", cfg.MetricsAddr, err)
	}

	m := NewMetrics(cfg.Paths)
	srv := &http.Server{
		Handler:           newHandler(m),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          log.New(stderr, "nginx-log-exporter: http: ", 0),
	}

	rcvbuf := "unknown"
	if n, err := socketReadBuffer(conn); err == nil {
		rcvbuf = fmt.Sprint(n)
	}
	fmt.Fprintf(stdout, "nginx-log-exporter: listening syslog=%s:%s metrics=http:%s rcvbuf=%s\n",
		conn.LocalAddr().Network(), conn.LocalAddr(), ln.Addr(), rcvbuf)

	readerDone := make(chan error, 1)
	serveDone := make(chan error, 1)
	go func() { readerDone <- readLoop(conn, m, stderr) }()
	go func() { serveDone <- srv.Serve(ln) }()

	select {
	case <-ctx.Done():
	case err := <-readerDone:
		// The socket died on its own: stop rather than run half-up.
		_ = srv.Close()
		<-serveDone
		return err
	case err := <-serveDone:
		_ = conn.Close()
		<-readerDone
		return fmt.Errorf("metrics server: %w", err)
	}

	fmt.Fprintln(stdout, "nginx-log-exporter: shutting down")
	_ = conn.Close() // unblocks the reader
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	shutdownErr := srv.Shutdown(sctx)
	if shutdownErr != nil {
		_ = srv.Close()
	}
	readErr := <-readerDone
	if err := <-serveDone; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics server: %w", err)
	}
	if readErr != nil {
		return readErr
	}
	if shutdownErr != nil {
		return fmt.Errorf("metrics server shutdown: %w", shutdownErr)
	}
	fmt.Fprintln(stdout, "nginx-log-exporter: shutdown complete")
	return nil
}

func newHandler(m *Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{
		Registry:          m.Registry,
		EnableOpenMetrics: true,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	return mux
}

// syslogConn is what the exporter needs of its socket, UDP or Unix datagram.
type syslogConn interface {
	net.Conn
	SetReadBuffer(int) error
	SyscallConn() (syscall.RawConn, error)
}

// listenSyslog opens the datagram socket nginx logs to. A Unix socket left by
// an earlier run (a crash) is replaced; any other file at its path is an error.
// The socket's mode lets its owner and group (nginx's) send, others nothing:
// connect(2) needs write permission on it.
func listenSyslog(cfg Config) (syslogConn, error) {
	path, ok := socketPath(cfg.SyslogAddr)
	if !ok {
		pc, err := net.ListenPacket("udp", cfg.SyslogAddr)
		if err != nil {
			return nil, err
		}
		return pc.(*net.UDPConn), nil
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket: not removing it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing the stale socket: %w", err)
		}
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, err
	}
	err = os.Chmod(path, 0o660)
	if err == nil && cfg.SocketGID >= 0 {
		err = os.Chown(path, -1, cfg.SocketGID)
	}
	if err != nil {
		_ = conn.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("the socket's mode and group: %w", err)
	}
	return conn, nil
}

// readLoop is the only goroutine that reads the socket and updates the
// metrics. It returns nil once the socket is closed by serve.
func readLoop(conn net.Conn, m *Metrics, stderr io.Writer) error {
	buf := make([]byte, maxDatagram)
	var scratch logLine
	loggedMalformed := false
	for {
		n, err := conn.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("reading syslog datagrams: %w", err)
		}
		rec, err := parseDatagram(buf[:n], &scratch)
		if err != nil {
			m.linesMalformed.Inc()
			// The first one usually means a log_format mismatch; say so once,
			// then only count (a flood must not turn into a log flood).
			if !loggedMalformed {
				loggedMalformed = true
				line := buf[:n]
				if len(line) > maxLoggedLine {
					line = line[:maxLoggedLine]
				}
				fmt.Fprintf(stderr, "nginx-log-exporter: malformed line (%v): %q; further ones are only counted in nginx_log_lines_total{result=\"malformed\"}\n", err, line)
			}
			continue
		}
		m.observe(rec)
	}
}
