package main

import (
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := loadConfig(envFunc(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		TCPAddr:          ":8080",
		UnixSocket:       "/sock/app.sock",
		SocketMode:       0o660,
		SocketGID:        -1,
		ShutdownTimeout:  15 * time.Second,
		DownloadFile:     "/tmp/uds-lab-download.bin",
		DownloadSize:     1048576,
		CPUMaxIterations: 1000000,
		CPU:              CPULimits{Concurrency: runtime.GOMAXPROCS(0), Queue: 256, QueueTimeout: 5 * time.Second},
	}
	if cfg != want {
		t.Fatalf("got %+v\nwant %+v", cfg, want)
	}
}

func TestLoadConfigValues(t *testing.T) {
	cfg, err := loadConfig(envFunc(map[string]string{
		"APP_TCP_ADDR":           "127.0.0.1:9000",
		"APP_UNIX_SOCKET":        "/run/x.sock",
		"APP_SOCKET_MODE":        "0770",
		"APP_SOCKET_GID":         "101",
		"APP_SHUTDOWN_TIMEOUT":   "1500ms",
		"APP_DOWNLOAD_FILE":      "/data/f",
		"APP_DOWNLOAD_SIZE":      "0",
		"APP_CPU_MAX_ITERATIONS": "5",
		"APP_CPU_CONCURRENCY":    "3",
		"APP_CPU_QUEUE":          "0",
		"APP_CPU_QUEUE_TIMEOUT":  "250ms",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TCPAddr != "127.0.0.1:9000" || cfg.UnixSocket != "/run/x.sock" || cfg.SocketMode != 0o770 ||
		cfg.SocketGID != 101 || cfg.ShutdownTimeout != 1500*time.Millisecond || cfg.DownloadFile != "/data/f" ||
		cfg.DownloadSize != 0 || cfg.CPUMaxIterations != 5 ||
		cfg.CPU != (CPULimits{Concurrency: 3, Queue: 0, QueueTimeout: 250 * time.Millisecond}) {
		t.Fatalf("unexpected config %+v", cfg)
	}
}

func TestLoadConfigRejectsBadValues(t *testing.T) {
	tests := []struct {
		name, value, wantMsg string
	}{
		{"APP_TCP_ADDR", "8080", ""},
		{"APP_TCP_ADDR", ":http-alt", ""},
		{"APP_TCP_ADDR", ":70000", ""},
		{"APP_UNIX_SOCKET", "/" + strings.Repeat("a", 120), "limit"},
		{"APP_SOCKET_MODE", "0777", "must give others nothing"},
		{"APP_SOCKET_MODE", "0666", "must give others nothing"},
		{"APP_SOCKET_MODE", "0662", "must give others nothing"},
		{"APP_SOCKET_MODE", "0664", "must give others nothing"},
		{"APP_SOCKET_MODE", "0600", "group read and write"},
		{"APP_SOCKET_MODE", "0640", "group read and write"},
		{"APP_SOCKET_MODE", "abc", "octal"},
		{"APP_SOCKET_MODE", "0689", "octal"},
		{"APP_SOCKET_MODE", "01777", "beyond 0777"},
		{"APP_SOCKET_MODE", "02660", "beyond 0777"},
		{"APP_SOCKET_MODE", "0460", "owner"},
		{"APP_SOCKET_MODE", "0260", "owner"},
		{"APP_SOCKET_MODE", "-660", ""},
		{"APP_SOCKET_GID", "nginx", ""},
		{"APP_SOCKET_GID", "-1", ""},
		{"APP_SHUTDOWN_TIMEOUT", "10", "duration"},
		{"APP_SHUTDOWN_TIMEOUT", "0s", "greater than 0"},
		{"APP_SHUTDOWN_TIMEOUT", "-1s", "greater than 0"},
		{"APP_DOWNLOAD_SIZE", "1MiB", ""},
		{"APP_DOWNLOAD_SIZE", "-1", ""},
		{"APP_DOWNLOAD_SIZE", "1073741825", "1073741824"},
		{"APP_DOWNLOAD_SIZE", "99999999999999999999", ""},
		{"APP_CPU_MAX_ITERATIONS", "0", ""},
		{"APP_CPU_MAX_ITERATIONS", "-5", ""},
		{"APP_CPU_MAX_ITERATIONS", "1e6", ""},
		{"APP_CPU_CONCURRENCY", "0", "between 1 and"},
		{"APP_CPU_CONCURRENCY", "two", "between 1 and"},
		{"APP_CPU_QUEUE", "-1", "between 0 and"},
		{"APP_CPU_QUEUE_TIMEOUT", "5", "duration"},
		{"APP_CPU_QUEUE_TIMEOUT", "0s", "greater than 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			_, err := loadConfig(envFunc(map[string]string{tc.name: tc.value}))
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.name) || !strings.Contains(msg, tc.value) || !strings.Contains(msg, tc.wantMsg) {
				t.Fatalf("error %q should name %s, the value %q and say %q", msg, tc.name, tc.value, tc.wantMsg)
			}
		})
	}
}

func TestSocketModeMessageExample(t *testing.T) {
	_, err := loadConfig(envFunc(map[string]string{"APP_SOCKET_MODE": "0777"}))
	if err == nil || !strings.HasPrefix(err.Error(), `APP_SOCKET_MODE="0777": must give others nothing`) {
		t.Fatalf("err = %v", err)
	}
}

func TestLoopbackAddr(t *testing.T) {
	for in, want := range map[string]string{
		":8080":          "127.0.0.1:8080",
		"0.0.0.0:81":     "127.0.0.1:81",
		"[::]:82":        "127.0.0.1:82",
		"10.0.0.5:83":    "10.0.0.5:83",
		"localhost:8084": "localhost:8084",
	} {
		got, err := loopbackAddr(in)
		if err != nil || got != want {
			t.Errorf("loopbackAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := loopbackAddr("127.0.0.1:0"); err == nil {
		t.Error("port 0 accepted")
	}
}

// TestSocketModeSharedCases: APP_SOCKET_MODE keeps the one rule, tested
// against the same modes as the checker, the minimal app and tests/static.
func TestSocketModeSharedCases(t *testing.T) {
	b, err := os.ReadFile("../../contract/socket-modes.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct{ Keep, Break []string }
	if err := json.Unmarshal(b, &c); err != nil || len(c.Keep) == 0 || len(c.Break) == 0 {
		t.Fatalf("socket-modes.json: %+v, %v", c, err)
	}
	for _, s := range c.Keep {
		if _, err := loadConfig(envFunc(map[string]string{"APP_SOCKET_MODE": s})); err != nil {
			t.Errorf("%s refused: %v", s, err)
		}
	}
	for _, s := range c.Break {
		if _, err := loadConfig(envFunc(map[string]string{"APP_SOCKET_MODE": s})); err == nil {
			t.Errorf("%s accepted", s)
		}
	}
}
