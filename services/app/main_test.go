package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	os.Exit(m.Run())
}

// syncBuffer is an io.Writer safe for the app goroutine and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func envFunc(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// socketDir returns a short temp dir: t.TempDir paths can exceed the
// 108-byte sun_path limit.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "uds")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func testEnv(dir string) map[string]string {
	return map[string]string{
		"APP_TCP_ADDR":         "127.0.0.1:0",
		"APP_UNIX_SOCKET":      filepath.Join(dir, "app.sock"),
		"APP_DOWNLOAD_FILE":    filepath.Join(dir, "download.bin"),
		"APP_DOWNLOAD_SIZE":    "100000",
		"APP_SHUTDOWN_TIMEOUT": "5s",
	}
}

type testApp struct {
	env     map[string]string
	tcpAddr string
	sock    string
	cancel  context.CancelFunc
	done    chan error
	stdout  *syncBuffer
	clients map[string]*http.Client
	ready   *Readiness // set only by startAppReady
}

func unixClient(path string, keepAlive bool) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		DisableKeepAlives: !keepAlive,
	}}
}

func tcpClient(keepAlive bool) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: !keepAlive}}
}

var tcpAddrRE = regexp.MustCompile(`tcp=(\S+)`)

// startApp runs the real program in a goroutine and waits until both
// listeners answer /healthz.
func startApp(t *testing.T, env map[string]string) *testApp {
	t.Helper()
	return startAppReady(t, env, nil)
}

// startAppReady is startApp, but with ready != nil it calls serve directly
// (run minus config parsing) so the test can watch the readiness flag.
func startAppReady(t *testing.T, env map[string]string, ready *Readiness) *testApp {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &testApp{env: env, sock: env["APP_UNIX_SOCKET"], cancel: cancel, done: make(chan error, 1), stdout: &syncBuffer{}, ready: ready}
	go func() {
		if ready == nil {
			a.done <- run(ctx, []string{"app"}, envFunc(env), a.stdout, io.Discard)
			return
		}
		cfg, err := loadConfig(envFunc(env))
		if err != nil {
			a.done <- err
			return
		}
		a.done <- serve(ctx, cfg, ready, a.stdout, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-a.done:
		case <-time.After(10 * time.Second):
			t.Error("app did not stop")
		}
	})

	deadline := time.Now().Add(10 * time.Second)
	for a.tcpAddr == "" {
		if m := tcpAddrRE.FindStringSubmatch(a.stdout.String()); m != nil {
			a.tcpAddr = m[1]
			break
		}
		select {
		case err := <-a.done:
			a.done <- err // let Cleanup see it
			t.Fatalf("run returned before listening: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("app did not log its listeners")
		}
	}
	a.clients = map[string]*http.Client{"tcp": tcpClient(true), "unix": unixClient(a.sock, true)}
	for _, l := range []string{"tcp", "unix"} {
		for {
			code, _ := a.tryGet(l, "/healthz")
			if code == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s listener never became healthy", l)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return a
}

func (a *testApp) url(path string) string { return "http://" + a.tcpAddr + path }

func (a *testApp) tryGet(listener, path string) (int, string) {
	return doGet(a.clients[listener], a.url(path))
}

func (a *testApp) get(t *testing.T, listener, path string) (int, string) {
	t.Helper()
	code, body := a.tryGet(listener, path)
	if code == 0 {
		t.Fatalf("GET %s over %s: %s", path, listener, body)
	}
	return code, body
}

// stop cancels the context as a signal would and returns run's result.
func (a *testApp) stop(t *testing.T) error {
	t.Helper()
	a.cancel()
	select {
	case err := <-a.done:
		a.done <- err
		return err
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after cancel")
		return nil
	}
}

// doGet returns status 0 and the error text when the request fails.
func doGet(c *http.Client, url string) (int, string) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err.Error()
	}
	return resp.StatusCode, string(b)
}

func TestRunUnknownSubcommand(t *testing.T) {
	err := run(context.Background(), []string{"app", "bogus"}, envFunc(nil), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("err = %v", err)
	}
}
