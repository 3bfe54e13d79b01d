package main

import (
	"strings"
	"testing"
)

func envFunc(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := loadConfig(envFunc(nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Config{SyslogAddr: ":5514", MetricsAddr: ":9114"}); cfg != want {
		t.Fatalf("got %+v, want %+v", cfg, want)
	}
}

func TestLoadConfigValues(t *testing.T) {
	cfg, err := loadConfig(envFunc(map[string]string{
		"LOG_EXPORTER_SYSLOG_ADDR":  "127.0.0.1:514",
		"LOG_EXPORTER_METRICS_ADDR": "[::1]:9200",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SyslogAddr != "127.0.0.1:514" || cfg.MetricsAddr != "[::1]:9200" {
		t.Fatalf("unexpected config %+v", cfg)
	}
}

func TestLoadConfigRejectsBadValues(t *testing.T) {
	tests := []struct{ name, value, wantMsg string }{
		{"LOG_EXPORTER_SYSLOG_ADDR", "5514", "host:port"},
		{"LOG_EXPORTER_SYSLOG_ADDR", ":syslog", "number"},
		{"LOG_EXPORTER_SYSLOG_ADDR", ":70000", "65535"},
		{"LOG_EXPORTER_SYSLOG_ADDR", ":-1", "number"},
		{"LOG_EXPORTER_METRICS_ADDR", "localhost", "host:port"},
		{"LOG_EXPORTER_METRICS_ADDR", ":http", "number"},
		{"LOG_EXPORTER_METRICS_ADDR", "::1:9114", "host:port"},
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

func TestLoopbackAddr(t *testing.T) {
	for in, want := range map[string]string{
		":9114":         "127.0.0.1:9114",
		"0.0.0.0:81":    "127.0.0.1:81",
		"[::]:82":       "127.0.0.1:82",
		"10.0.0.5:83":   "10.0.0.5:83",
		"[::1]:84":      "[::1]:84",
		"localhost:885": "localhost:885",
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
