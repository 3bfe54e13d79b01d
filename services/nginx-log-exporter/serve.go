package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"sync"
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
	udpReadBuffer = 4 << 20
	// pipeSize is asked for the pipe: nginx's 64 KiB writes queue there while
	// lines are parsed (an exporter that stalls longer blocks nginx's writes).
	pipeSize = 1 << 20
	// maxLoggedLine caps the malformed line echoed to stderr.
	maxLoggedLine = 200

	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 120 * time.Second
	shutdownTimeout   = 5 * time.Second
)

// serve reads nginx's access log from the inputs cfg sets (the pipe, the
// syslog socket, or both) and serves /metrics and /healthz until ctx is
// cancelled. It returns nil after a clean stop.
func serve(ctx context.Context, cfg Config, stdout, stderr io.Writer) error {
	in, err := openInputs(cfg, stderr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		in.Close()
		return fmt.Errorf("LOG_EXPORTER_METRICS_ADDR %s: %w", cfg.MetricsAddr, err)
	}
	m := NewMetrics(cfg.Paths)
	srv := newServer(m, stderr)
	syslog, piped := in.describe(cfg, stderr)
	fmt.Fprintf(stdout, "nginx-log-exporter: listening metrics=http:%s syslog=%s pipe=%s\n", ln.Addr(), syslog, piped)

	readerDone := make(chan error, 2)
	readers := in.start(&lines{m: m, stderr: stderr}, readerDone)
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	// waitReaders closes the inputs and collects every reader's end.
	waitReaders := func(first error) error {
		in.Close()
		for i := 0; i < readers; i++ {
			if err := <-readerDone; first == nil {
				first = err
			}
		}
		return first
	}

	select {
	case <-ctx.Done():
	case err := <-readerDone:
		// An input died on its own: stop rather than run half-up.
		readers--
		_ = srv.Close()
		<-serveDone
		if err == nil {
			err = errors.New("an access log input closed")
		}
		return waitReaders(err)
	case err := <-serveDone:
		_ = waitReaders(nil)
		return fmt.Errorf("metrics server: %w", err)
	}

	fmt.Fprintln(stdout, "nginx-log-exporter: shutting down")
	readErr := waitReaders(nil) // unblocks the readers
	if err := shutdown(srv, serveDone); err != nil {
		return err
	}
	if readErr != nil {
		return readErr
	}
	fmt.Fprintln(stdout, "nginx-log-exporter: shutdown complete")
	return nil
}

// inputs are the access log's open inputs: the pipe, the syslog socket, or both.
type inputs struct {
	pipe *os.File
	conn *net.UDPConn
}

func openInputs(cfg Config, stderr io.Writer) (inputs, error) {
	var in inputs
	var err error
	if cfg.Pipe != "" {
		if in.pipe, err = openPipe(cfg); err != nil {
			return inputs{}, fmt.Errorf("LOG_EXPORTER_PIPE %s: %w", cfg.Pipe, err)
		}
	}
	if cfg.SyslogAddr != "" {
		if in.conn, err = listenSyslog(cfg.SyslogAddr); err != nil {
			in.Close()
			return inputs{}, fmt.Errorf("LOG_EXPORTER_SYSLOG_ADDR %s: %w", cfg.SyslogAddr, err)
		}
		if err := in.conn.SetReadBuffer(udpReadBuffer); err != nil {
			fmt.Fprintf(stderr, "nginx-log-exporter: setting the read buffer to %d bytes: %v\n", udpReadBuffer, err)
		}
	}
	return in, nil
}

func (in inputs) Close() {
	if in.pipe != nil {
		_ = in.pipe.Close()
	}
	if in.conn != nil {
		_ = in.conn.Close()
	}
}

// describe grows the pipe and says what each input got, for the startup line.
func (in inputs) describe(cfg Config, stderr io.Writer) (syslog, piped string) {
	syslog, piped = "off", "off"
	if in.conn != nil {
		syslog = fmt.Sprintf("udp:%s rcvbuf=unknown", in.conn.LocalAddr())
		if n, err := socketReadBuffer(in.conn); err == nil {
			syslog = fmt.Sprintf("udp:%s rcvbuf=%d", in.conn.LocalAddr(), n)
		}
	}
	if in.pipe != nil {
		piped = cfg.Pipe
		if n, err := growPipe(in.pipe, pipeSize); err == nil {
			piped += fmt.Sprintf(" pipe_size=%d", n)
		} else {
			fmt.Fprintf(stderr, "nginx-log-exporter: growing the pipe to %d bytes: %v\n", pipeSize, err)
		}
	}
	return syslog, piped
}

// start runs a reader per input, each sending its end to done; it returns how many.
func (in inputs) start(ls *lines, done chan<- error) int {
	n := 0
	if in.conn != nil {
		n++
		go func() { done <- readLoop(in.conn, ls) }()
	}
	if in.pipe != nil {
		n++
		go func() { done <- readPipe(in.pipe, ls) }()
	}
	return n
}

func newServer(m *Metrics, stderr io.Writer) *http.Server {
	return &http.Server{
		Handler:           newHandler(m),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          log.New(stderr, "nginx-log-exporter: http: ", 0),
	}
}

// shutdown lets requests in flight finish (up to shutdownTimeout), then waits
// for Serve to return.
func shutdown(srv *http.Server, serveDone <-chan error) error {
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	shutdownErr := srv.Shutdown(sctx)
	if shutdownErr != nil {
		_ = srv.Close()
	}
	if err := <-serveDone; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics server: %w", err)
	}
	if shutdownErr != nil {
		return fmt.Errorf("metrics server shutdown: %w", shutdownErr)
	}
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

// listenSyslog opens the UDP socket nginx sends its syslog lines to.
func listenSyslog(addr string) (*net.UDPConn, error) {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

// lines turns each access-log line into metrics. Both inputs (the pipe and
// the syslog socket) share it, one line at a time: the lock keeps the parse
// buffer and the malformed-line flag to one reader.
type lines struct {
	mu              sync.Mutex
	m               *Metrics
	stderr          io.Writer
	scratch         logLine
	loggedMalformed bool
}

func (l *lines) add(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec, err := parseDatagram(b, &l.scratch)
	if err != nil {
		l.m.linesMalformed.Inc()
		// The first one usually means a log_format mismatch; say so once,
		// then only count (a flood must not turn into a log flood).
		if !l.loggedMalformed {
			l.loggedMalformed = true
			if len(b) > maxLoggedLine {
				b = b[:maxLoggedLine]
			}
			fmt.Fprintf(l.stderr, "nginx-log-exporter: malformed line (%v): %q; further ones are only counted in nginx_log_lines_total{result=\"malformed\"}\n", err, b)
		}
		return
	}
	l.m.observe(rec)
}

// readLoop reads the syslog socket, a line per datagram. It returns nil once
// the socket is closed by serve.
func readLoop(conn net.Conn, in *lines) error {
	buf := make([]byte, maxDatagram)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("reading syslog datagrams: %w", err)
		}
		in.add(buf[:n])
	}
}

// readPipe reads nginx's buffered access log from the pipe: JSON lines, many
// per write. It returns nil once the pipe is closed by serve.
func readPipe(f *os.File, in *lines) error {
	r := bufio.NewReaderSize(f, maxDatagram)
	for {
		b, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			in.add(b) // a line over 64 KiB is cut, so malformed: counted as such
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n') // and the rest of it skipped
			}
			if err == nil {
				continue
			}
		}
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return nil
			}
			return fmt.Errorf("reading the access log pipe: %w", err)
		}
		in.add(b[:len(b)-1])
	}
}

// openPipe opens the FIFO nginx writes its buffered access log to (created if
// absent; any other file there is an error). It stays when the exporter stops:
// nginx keeps it open, and a restarted exporter reads the same one. O_RDWR: the
// exporter holds a writer too, so it sees no end when nginx restarts, and
// nginx's open never waits for a reader. Its mode lets the owner and group
// (nginx's) write, others nothing.
func openPipe(cfg Config) (*os.File, error) {
	fi, err := os.Lstat(cfg.Pipe)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := syscall.Mkfifo(cfg.Pipe, 0o600); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	case fi.Mode()&os.ModeNamedPipe == 0:
		return nil, fmt.Errorf("%s exists and is not a FIFO: not replacing it", cfg.Pipe)
	}
	err = os.Chmod(cfg.Pipe, 0o660)
	if err == nil && cfg.SocketGID >= 0 {
		err = os.Chown(cfg.Pipe, -1, cfg.SocketGID)
	}
	if err != nil {
		return nil, fmt.Errorf("the pipe's mode and group: %w", err)
	}
	return os.OpenFile(cfg.Pipe, os.O_RDWR, 0)
}
