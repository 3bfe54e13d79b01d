package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// The default drain budget outlasts the longest request the app serves, with
// room for net/http's Shutdown, which checks for idle connections only every
// 500 ms (issue 14: a /sleep/10000 in flight at SIGTERM made the app exit 1).
func TestDefaultDrainCoversLongestRequest(t *testing.T) {
	cfg, err := loadConfig(envFunc(nil))
	if err != nil {
		t.Fatal(err)
	}
	longest := time.Duration(maxSleepMS) * time.Millisecond
	if cfg.ShutdownTimeout < longest+2*time.Second {
		t.Errorf("default APP_SHUTDOWN_TIMEOUT %v, want at least the longest request (%v) + 2 s", cfg.ShutdownTimeout, longest)
	}
}

// The same through a real drain: the longest /sleep in flight at the signal
// is answered and the app exits cleanly with the default budget.
func TestDrainLongestSleep(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 10 s")
	}
	env := testEnv(socketDir(t))
	delete(env, "APP_SHUTDOWN_TIMEOUT") // the default
	a := startApp(t, env)
	type result struct {
		code int
		body string
	}
	got := make(chan result, 1)
	go func() {
		c := unixClient(a.sock, false)
		c.Timeout = 20 * time.Second
		code, body := doGet(c, a.url("/sleep/10000"))
		got <- result{code, body}
	}()
	a.waitInFlight(t, 1)
	start := time.Now()
	if err := a.stop(t); err != nil {
		t.Fatalf("run: %v, want a clean drain", err)
	}
	if r := <-got; r.code != 200 {
		t.Errorf("/sleep/10000 in flight at the signal: %d %q", r.code, r.body)
	}
	t.Logf("drained a /sleep/10000 in %v", time.Since(start))
}

// A newer instance that replaced the socket keeps it when the old one shuts
// down (issue 14: UnixListener.Close unlinked the path unconditionally).
func TestShutdownKeepsNewerInstancesSocket(t *testing.T) {
	a := startApp(t, testEnv(socketDir(t)))
	// What a second instance does after the first one's socket is gone from
	// the folder (removed by hand, or a stale-socket cleanup race).
	if err := os.Remove(a.sock); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", a.sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	defer l.Close()
	newer, err := os.Lstat(a.sock)
	if err != nil {
		t.Fatal(err)
	}

	if err := a.stop(t); err != nil {
		t.Fatalf("run: %v", err)
	}
	st, err := os.Lstat(a.sock)
	if err != nil {
		t.Fatalf("the newer instance's socket was deleted by the old one's shutdown: %v", err)
	}
	if !os.SameFile(st, newer) {
		t.Fatal("the socket file changed")
	}
}

// A second start that fails (socket in use) leaves the running instance's
// download file alone: it checks the socket before writing anything.
func TestFailedStartKeepsDownloadFile(t *testing.T) {
	env := testEnv(socketDir(t))
	startApp(t, env)
	before, err := os.Lstat(env["APP_DOWNLOAD_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), []string{"app"}, envFunc(env), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "another process is listening") {
		t.Fatalf("second start: %v", err)
	}
	after, err := os.Lstat(env["APP_DOWNLOAD_FILE"])
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("the running instance's download file was replaced by the failed start (%v)", err)
	}
}

// "OPTIONS *" is answered by the app's router as JSON, not by net/http's
// built-in empty 200.
func TestOptionsStarIsJSON(t *testing.T) {
	a := startApp(t, testEnv(socketDir(t)))
	for _, l := range []string{"tcp", "unix"} {
		network, addr := "tcp", a.tcpAddr
		if l == "unix" {
			network, addr = "unix", a.sock
		}
		c, err := net.DialTimeout(network, addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, "OPTIONS * HTTP/1.1\r\nHost: app\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		c.Close()
		var e struct {
			Error string `json:"error"`
		}
		if resp.StatusCode < 400 || json.Unmarshal(body, &e) != nil || e.Error == "" {
			t.Errorf("%s: OPTIONS *: %d %q, want a JSON error", l, resp.StatusCode, body)
		}
	}
}

// A regular file at the socket path is named as such in the error.
func TestRegularFileAtSocketPathNamed(t *testing.T) {
	env := testEnv(socketDir(t))
	if err := os.WriteFile(env["APP_UNIX_SOCKET"], nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(context.Background(), []string{"app"}, envFunc(env), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "a regular file") || strings.Contains(err.Error(), "----") {
		t.Fatalf("err = %v, want it to say the path is a regular file", err)
	}
	if _, err := os.Lstat(env["APP_UNIX_SOCKET"]); err != nil {
		t.Fatalf("the file was removed: %v", err)
	}
}
