// Command pitfall-app keeps uds-lab's contract (it serves GET /ping on a TCP
// port and on a Unix socket of the lab's mode, over a stale socket, and
// drains on SIGTERM) and falls into each socket pitfall that make contract
// reports, on purpose, so that tests/e2e can see each row fail:
//
//   - both listeners' backlog is PITFALL_BACKLOG (1): listen(fd, 1), as a
//     server that hard-codes it;
//   - GET /client takes X-Real-IP over TCP only: over the socket it answers
//     the peer, which has no address (the proxy header dropped);
//   - PITFALL_WORKERS (3) worker processes share the listeners, and only the
//     first ever accepts (one worker taking every connection);
//   - kept connections left idle PITFALL_IDLE_TIMEOUT (1s; 0: never) are
//     closed, far sooner than nginx's upstream keepalive_timeout (60 s);
//   - with PITFALL_CLOSE_WAIT (true), a connection whose client closed
//     first is never closed on the app's side (TCP's CLOSE_WAIT; on the
//     socket, an accepted socket whose peer has gone), as a threaded server
//     that never closes its socket on end of file.
//
// The same variables as the lab's app set the listeners (APP_TCP_ADDR,
// APP_UNIX_SOCKET, APP_SOCKET_MODE, APP_SOCKET_GID).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args, os.Getenv); err != nil {
		fmt.Fprintf(os.Stderr, "pitfall-app: %v\n", err)
		os.Exit(1)
	}
}

type config struct {
	port    int           // of APP_TCP_ADDR
	socket  string        // APP_UNIX_SOCKET
	mode    os.FileMode   // APP_SOCKET_MODE
	gid     int           // APP_SOCKET_GID, -1 keeps the process's
	backlog int           // PITFALL_BACKLOG
	workers int           // PITFALL_WORKERS
	idle    time.Duration // PITFALL_IDLE_TIMEOUT, 0: idle connections are kept
	leak    bool          // PITFALL_CLOSE_WAIT
}

func loadConfig(getenv func(string) string) (config, error) {
	c := config{port: 8080, socket: "/sock/app.sock", mode: 0o660, gid: -1, backlog: 1, workers: 3,
		idle: time.Second, leak: true}
	if v := getenv("PITFALL_IDLE_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return c, fmt.Errorf("PITFALL_IDLE_TIMEOUT=%q: want a duration such as 1s, or 0 for none", v)
		}
		c.idle = d
	}
	if v := getenv("PITFALL_CLOSE_WAIT"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("PITFALL_CLOSE_WAIT=%q: want true or false", v)
		}
		c.leak = b
	}
	if v := getenv("APP_TCP_ADDR"); v != "" {
		_, p, err := net.SplitHostPort(v)
		n, perr := strconv.Atoi(p)
		if err != nil || perr != nil || n < 1 || n > 65535 {
			return c, fmt.Errorf("APP_TCP_ADDR=%q: want :port", v)
		}
		c.port = n
	}
	if v := getenv("APP_UNIX_SOCKET"); v != "" {
		c.socket = v
	}
	if v := getenv("APP_SOCKET_MODE"); v != "" {
		m, err := strconv.ParseUint(v, 8, 32)
		if err != nil || m > 0o777 {
			return c, fmt.Errorf("APP_SOCKET_MODE=%q: want octal like 0660", v)
		}
		c.mode = os.FileMode(m)
	}
	for _, s := range []struct {
		name string
		to   *int
		min  int
	}{{"APP_SOCKET_GID", &c.gid, 0}, {"PITFALL_BACKLOG", &c.backlog, 1}, {"PITFALL_WORKERS", &c.workers, 2}} {
		if v := getenv(s.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < s.min {
				return c, fmt.Errorf("%s=%q: want a whole number >= %d", s.name, v, s.min)
			}
			*s.to = n
		}
	}
	return c, nil
}

func run(args []string, getenv func(string) string) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	if v := getenv("PITFALL_WORKER"); v != "" {
		return worker(v == "0", cfg)
	}
	tcp, err := listen(syscall.AF_INET6, &syscall.SockaddrInet6{Port: cfg.port}, cfg.backlog)
	if err != nil {
		return fmt.Errorf("APP_TCP_ADDR :%d: %w", cfg.port, err)
	}
	if err := removeStale(cfg.socket); err != nil {
		return err
	}
	uds, err := listen(syscall.AF_UNIX, &syscall.SockaddrUnix{Name: cfg.socket}, cfg.backlog)
	if err != nil {
		return fmt.Errorf("APP_UNIX_SOCKET=%s: %w", cfg.socket, err)
	}
	defer os.Remove(cfg.socket)
	if err := os.Chown(cfg.socket, -1, cfg.gid); err != nil {
		return fmt.Errorf("APP_SOCKET_GID=%d: %w", cfg.gid, err)
	}
	if err := os.Chmod(cfg.socket, cfg.mode); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var procs []*exec.Cmd
	for i := range cfg.workers {
		cmd := exec.Command("/proc/self/exe")
		cmd.Env = append(os.Environ(), "PITFALL_WORKER="+strconv.Itoa(i))
		cmd.ExtraFiles = []*os.File{tcp, uds} // fds 3 and 4
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			return err
		}
		procs = append(procs, cmd)
	}
	fmt.Printf("pitfall-app: %d workers on tcp :%d and unix %s, backlog %d; only the first accepts; idle timeout %s; never closes after its client: %v\n",
		cfg.workers, cfg.port, cfg.socket, cfg.backlog, cfg.idle, cfg.leak)
	died := make(chan error, len(procs))
	for _, p := range procs {
		go func() { died <- p.Wait() }()
	}
	select {
	case <-ctx.Done():
	case err = <-died:
		err = fmt.Errorf("a worker exited: %v", err)
	}
	for _, p := range procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for range len(procs) - btoi(err != nil) {
		<-died
	}
	return err
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// listen binds and listens with exactly backlog, as a server that hard-codes it.
func listen(family int, sa syscall.Sockaddr, backlog int) (*os.File, error) {
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if family != syscall.AF_UNIX {
		_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	}
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	if err := syscall.Listen(fd, backlog); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "listener"), nil
}

// removeStale removes a socket file nothing answers on (a killed run's).
func removeStale(path string) error {
	if fi, err := os.Stat(path); err != nil || fi.Mode()&os.ModeSocket == 0 {
		return nil
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return fmt.Errorf("%s: another process is listening on it", path)
	}
	return os.Remove(path)
}

// worker serves on the inherited listeners if it is the first; the others
// hold them and never accept.
func worker(first bool, cfg config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if !first {
		<-ctx.Done()
		return nil
	}
	var servers []*http.Server
	for i, fd := range []uintptr{3, 4} {
		l, err := net.FileListener(os.NewFile(fd, "listener"))
		if err != nil {
			return err
		}
		if cfg.leak {
			l = leakyListener{l}
		}
		// IdleTimeout 0 would fall back to ReadTimeout, unset: no timeout.
		srv := &http.Server{Handler: handler(i == 1), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: cfg.idle}
		servers = append(servers, srv)
		go func() { _ = srv.Serve(l) }()
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	return nil
}

// leakyListener's connections are never closed once their client has closed
// first (a read saw end of file): the app's side stays, in CLOSE_WAIT over
// TCP. A connection the app closes first (its idle timeout) closes.
type leakyListener struct{ net.Listener }

func (l leakyListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &leakyConn{Conn: c}, nil
}

type leakyConn struct {
	net.Conn
	clientGone atomic.Bool
}

// leaked holds what the app never closes, so that the garbage collector
// (which closes a lost descriptor) does not close it either.
var leaked struct {
	sync.Mutex
	conns []net.Conn
}

func (c *leakyConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if errors.Is(err, io.EOF) {
		c.clientGone.Store(true)
	}
	return n, err
}

func (c *leakyConn) Close() error {
	if !c.clientGone.Load() {
		return c.Conn.Close()
	}
	leaked.Lock()
	leaked.conns = append(leaked.conns, c.Conn)
	leaked.Unlock()
	return nil
}

func handler(socket bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"message":"pong"}`))
	})
	mux.HandleFunc("GET /client", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"client": client(r, socket)})
	})
	return mux
}

// client: X-Real-IP over TCP; over the socket the header is dropped and the
// peer, which has no address there, is all that is left.
func client(r *http.Request, socket bool) string {
	if v := r.Header.Get("X-Real-IP"); v != "" && !socket {
		return v
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return ""
	}
	return host
}
