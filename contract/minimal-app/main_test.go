package main

import (
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRoutes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	h := m.instrument("unix", routes(reg))
	cases := []struct {
		target string
		code   int
		length int // body length, -1 for JSON bodies
	}{
		{"/ping", 200, -1},
		{"/bytes/0", 200, 0},
		{"/bytes/1000", 200, 1000},
		{"/bytes/1048576", 200, 1 << 20},
		{"/bytes/1048577", 400, -1},
		{"/bytes/-1", 400, -1},
		{"/bytes/abc", 400, -1},
		{"/sleep/1", 200, -1},
		{"/sleep/60001", 400, -1},
		{"/healthz", 200, -1},
		{"/readyz", 200, -1},
		{"/cpu/100", 404, -1},
		{"/junk/1", 404, -1},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", c.target, nil))
		if rec.Code != c.code {
			t.Errorf("%s: status %d, want %d", c.target, rec.Code, c.code)
		}
		if c.length >= 0 {
			if rec.Body.Len() != c.length {
				t.Errorf("%s: %d bytes, want %d", c.target, rec.Body.Len(), c.length)
			}
			continue
		}
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Errorf("%s: body %q is not JSON: %v", c.target, rec.Body.String(), err)
		}
		if c.code >= 400 && body["error"] == nil {
			t.Errorf("%s: %d without an error message: %s", c.target, c.code, rec.Body.String())
		}
	}
	// Route patterns, never raw URLs: /bytes/0, /bytes/1000... are one series.
	if got := testutil.ToFloat64(m.requests.WithLabelValues("unix", "/bytes/{n}", "200")); got != 3 {
		t.Errorf(`requests{unix,/bytes/{n},200} = %v, want 3`, got)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("unix", "unmatched", "404")); got != 2 {
		t.Errorf(`requests{unix,unmatched,404} = %v, want 2 (/cpu/100 and /junk/1)`, got)
	}
	// Only GET is routed: another method falls through to the JSON 404.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/ping", nil))
	if rec.Code != 404 {
		t.Errorf("POST /ping: %d, want 404", rec.Code)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("unix", "unmatched", "404")); got != 3 {
		t.Errorf(`requests{unix,unmatched,404} = %v, want 3`, got)
	}
}

func TestConfigRefusesBadValues(t *testing.T) {
	for k, v := range map[string]string{
		"APP_TCP_ADDR":    "8080",
		"APP_SOCKET_MODE": "0666",
		"APP_SOCKET_GID":  "nginx",
	} {
		_, err := loadConfig(func(name string) string {
			if name == k {
				return v
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: error %v, want one naming %s", k, v, err, k)
		}
	}
}

func TestListenUnix(t *testing.T) {
	dir := t.TempDir()
	cfg := config{socket: filepath.Join(dir, "app.sock"), mode: 0o660, gid: -1}
	// A stale socket (its listener gone without removing it) is replaced.
	stale, err := net.Listen("unix", cfg.socket)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	l, err := listenUnix(cfg)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	fi, err := os.Stat(cfg.socket)
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode: %v %v, want 0660", fi.Mode(), err)
	}
	// A live one is not taken over.
	if _, err := listenUnix(cfg); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Errorf("over a live socket: %v, want a refusal", err)
	}
	// Closing the listener removes the socket: SIGTERM leaves nothing behind.
	l.Close()
	if _, err := os.Stat(cfg.socket); !os.IsNotExist(err) {
		t.Errorf("after close: %v, want the socket gone", err)
	}
}

// TestSocketModeSharedCases: APP_SOCKET_MODE keeps the lab's one rule, tested
// against the same modes as the lab's app, the checker and tests/static.
func TestSocketModeSharedCases(t *testing.T) {
	b, err := os.ReadFile("../socket-modes.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct{ Keep, Break []string }
	if err := json.Unmarshal(b, &c); err != nil || len(c.Keep) == 0 || len(c.Break) == 0 {
		t.Fatalf("socket-modes.json: %+v, %v", c, err)
	}
	env := func(mode string) func(string) string {
		return func(k string) string {
			if k == "APP_SOCKET_MODE" {
				return mode
			}
			return ""
		}
	}
	for _, s := range c.Keep {
		if _, err := loadConfig(env(s)); err != nil {
			t.Errorf("%s refused: %v", s, err)
		}
	}
	for _, s := range c.Break {
		if _, err := loadConfig(env(s)); err == nil {
			t.Errorf("%s accepted", s)
		}
	}
}
