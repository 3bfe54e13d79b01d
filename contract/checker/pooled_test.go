package main

import (
	"context"
	"net"
	"net/http"
	"net/http/fcgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// pitfallBin builds contract/pitfall-app once: the app the pooled rows are
// tested against, told how it misbehaves.
var pitfallBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "pitfall-app")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "pitfall-app")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "pitfall-app")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &exec.ExitError{Stderr: out}
	}
	return bin, nil
})

// startPitfallApp runs contract/pitfall-app on a free port and a socket of
// its own, with its settings (PITFALL_IDLE_TIMEOUT, PITFALL_CLOSE_WAIT, ...),
// and returns the checker's config for it once both listeners answer.
func startPitfallApp(t *testing.T, settings ...string) Config {
	t.Helper()
	bin, err := pitfallBin()
	if err != nil {
		t.Fatalf("building contract/pitfall-app: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "pit")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := testConfig("127.0.0.1:"+strconv.Itoa(port), filepath.Join(dir, "app.sock"))
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), append([]string{"APP_TCP_ADDR=:" + strconv.Itoa(port),
		"APP_UNIX_SOCKET=" + cfg.Socket, "PITFALL_BACKLOG=64"}, settings...)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	a := newApp(cfg)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if a.tcp.get("/ping").status == 200 && a.uds.get("/ping").status == 200 {
			return cfg
		}
		if time.Now().After(deadline) {
			t.Fatalf("pitfall-app %v: not answering on both listeners", settings)
		}
	}
}

// Told to close idle connections after 1 s, the app is measured closing
// them after about 1 s on both listeners: shorter than nginx's 60 s is a
// WARN with the fix; nginx's keepalive_timeout below it passes. It closes
// its side once its client has gone: no CLOSE_WAIT.
func TestPooledRowsOnAnAppWithAShortIdleTimeout(t *testing.T) {
	cfg := startPitfallApp(t, "PITFALL_IDLE_TIMEOUT=1s", "PITFALL_CLOSE_WAIT=false")
	a := newApp(cfg)
	rs := make([]idleResult, 2)
	var wg sync.WaitGroup
	for i, l := range a.both() {
		wg.Go(func() { rs[i] = measureIdle(cfg, l, 5*time.Second) })
	}
	wg.Wait()
	for _, r := range rs {
		if r.err != nil || r.notKept || !r.closed || r.after < 900*time.Millisecond || r.after > 1600*time.Millisecond {
			t.Errorf("%s: %+v, want closed by the app after 0.9 to 1.6 s", r.listener, r)
		}
	}
	status, why, fix := judgeIdle(rs, 60*time.Second, 5*time.Second)
	if status != statusWarn || !strings.Contains(why, "tcp: closed by the app after 1.") ||
		!strings.Contains(why, "unix: closed by the app after 1.") || !strings.Contains(why, "502") ||
		!strings.Contains(fix, "longer than nginx's 60.00 s") {
		t.Errorf("against nginx's 60 s: %s %q %q", status, why, fix)
	}
	if status, _, _ := judgeIdle(rs, 500*time.Millisecond, 5*time.Second); status != statusPass {
		t.Errorf("against nginx's 0.5 s: %s, want pass", status)
	}

	c := closeWaitClause(cfg, a)
	if c.Status != statusPass || !strings.Contains(c.Why, "still held 0 on tcp in CLOSE_WAIT and 0 on unix") ||
		!strings.Contains(c.Why, "tcp: 16 connections, 64 requests answered") || !strings.Contains(c.Why, "unix: 16 connections, 64 requests answered") {
		t.Errorf("an app that closes its side: %+v", c)
	}
}

// Told never to close a connection its client closed first, the app holds
// every connection of the pooled burst: all 16 on TCP in CLOSE_WAIT, all 16
// on the socket with their peer gone, with make contract's defaults for it
// too (a backlog of 1, idle connections closed after 1 s: the burst leaves
// none idle for the app to close first). With no idle timeout, a wait
// shorter than nginx's cannot judge; one longer passes.
func TestPooledRowsOnAnAppThatNeverClosesItsSide(t *testing.T) {
	settle := closeWaitSettle
	closeWaitSettle = 500 * time.Millisecond
	defer func() { closeWaitSettle = settle }()
	defaults := startPitfallApp(t, "PITFALL_BACKLOG=1")
	if c := closeWaitClause(defaults, newApp(defaults)); c.Status != statusWarn || !strings.Contains(c.Why, "still held 16 on tcp in CLOSE_WAIT and 16 on unix") {
		t.Errorf("the pitfall app's defaults: %+v", c)
	}

	cfg := startPitfallApp(t, "PITFALL_IDLE_TIMEOUT=0", "PITFALL_CLOSE_WAIT=true")
	cfg.IdleWait, cfg.NginxKeepalive = 300*time.Millisecond, 60*time.Second
	a := newApp(cfg)
	c := idleClause(cfg, a)
	if c.Status != statusInfo || !strings.Contains(c.Why, "tcp: still open after 0.30 s idle") ||
		!strings.Contains(c.Why, "unix: still open after 0.30 s idle") || !strings.Contains(c.Why, "CONTRACT_IDLE_WAIT=1m5s") {
		t.Errorf("idle, waiting less than nginx: %+v", c)
	}
	cfg.NginxKeepalive = 200 * time.Millisecond
	if c := idleClause(cfg, a); c.Status != statusPass {
		t.Errorf("idle, waiting longer than nginx: %+v", c)
	}

	c = closeWaitClause(cfg, a)
	if c.Status != statusWarn || c.Pass || !strings.Contains(c.Why, "still held 16 on tcp in CLOSE_WAIT and 16 on unix") ||
		!strings.Contains(c.Fix, "end of file") {
		t.Errorf("an app that never closes its side: %+v", c)
	}
}

func TestJudgeIdle(t *testing.T) {
	open := []idleResult{{listener: "tcp"}, {listener: "unix"}}
	if s, why, _ := judgeIdle(open, 0, time.Second); s != statusInfo || !strings.Contains(why, "CONTRACT_NGINX_KEEPALIVE_TIMEOUT") {
		t.Errorf("nginx's timeout not given: %s %s", s, why)
	}
	notKept := []idleResult{{listener: "tcp", notKept: true}, {listener: "unix", notKept: true}}
	if s, why, _ := judgeIdle(notKept, time.Minute, time.Second); s != statusPass || !strings.Contains(why, "keeps no connection") {
		t.Errorf("not kept: %s %s", s, why)
	}
	// A timeout equal to nginx's races as a shorter one does.
	equal := []idleResult{{listener: "tcp", closed: true, after: time.Minute + 50*time.Millisecond}, {listener: "unix", notKept: true}}
	if s, _, _ := judgeIdle(equal, time.Minute, 2*time.Minute); s != statusWarn {
		t.Errorf("equal to nginx's: %s", s)
	}
	longer := []idleResult{{listener: "tcp", closed: true, after: 75 * time.Second}, {listener: "unix", closed: true, after: 75 * time.Second}}
	if s, _, _ := judgeIdle(longer, time.Minute, 2*time.Minute); s != statusPass {
		t.Errorf("longer than nginx's: %s", s)
	}
	failed := []idleResult{{listener: "tcp", err: context.DeadlineExceeded}, {listener: "unix", err: context.DeadlineExceeded}}
	if s, _, _ := judgeIdle(failed, time.Minute, time.Second); s != statusNA {
		t.Errorf("nothing measured: %s", s)
	}
}

// A FastCGI app keeps the connection when asked (FCGI_KEEP_CONN, nginx's
// fastcgi_keep_conn on): three requests on one connection.
func TestKeptConnFastCGI(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted, served atomic.Int32
	go fcgi.Serve(countingListener{l, &accepted}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		_, _ = w.Write([]byte(`{"message":"pong"}`))
	}))
	defer l.Close()
	cfg := testConfig(l.Addr().String(), "/nowhere")
	cfg.Protocol, cfg.Script = "fastcgi", "/app/index.php"
	k, err := dialKept(cfg, newApp(cfg).tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	for i := range 3 {
		if err := k.get("/ping"); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	if accepted.Load() != 1 || served.Load() != 3 {
		t.Errorf("%d connections for %d requests, want 1 for 3", accepted.Load(), served.Load())
	}
}

type countingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

func TestDurationSettings(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	c, err := loadConfig(env(nil))
	if err != nil || c.IdleWait != idleWaitDefault || c.NginxKeepalive != 0 {
		t.Fatalf("defaults: %v %v %v", c.IdleWait, c.NginxKeepalive, err)
	}
	c, err = loadConfig(env(map[string]string{"CONTRACT_IDLE_WAIT": "65s", "CONTRACT_NGINX_KEEPALIVE_TIMEOUT": "60s"}))
	if err != nil || c.IdleWait != 65*time.Second || c.NginxKeepalive != time.Minute {
		t.Errorf("set: %v %v %v", c.IdleWait, c.NginxKeepalive, err)
	}
	for k, v := range map[string]string{"CONTRACT_IDLE_WAIT": "0s", "CONTRACT_NGINX_KEEPALIVE_TIMEOUT": "sixty"} {
		if _, err := loadConfig(env(map[string]string{k: v})); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v, want an error naming it", k, v, err)
		}
	}
	if _, err := loadConfig(env(map[string]string{"CONTRACT_IDLE_WAIT": "11m"})); err == nil {
		t.Error("CONTRACT_IDLE_WAIT=11m accepted: the row must stay bounded")
	}
}
