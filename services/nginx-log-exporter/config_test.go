package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// labCatalogue is the lab's own catalogue.json: the paths the exporter gets in compose.
const labCatalogue = "../../catalogue.json"

// envFunc is a getenv over env, with the lab's catalogue and compose's FIFO
// unless env names them.
func envFunc(env map[string]string) func(string) string {
	defaults := map[string]string{"LOG_EXPORTER_CATALOGUE": labCatalogue, "LOG_EXPORTER_PIPE": "/log/access.pipe"}
	return func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return defaults[k]
	}
}

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := loadConfig(func(k string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), `LOG_EXPORTER_CATALOGUE="/catalogue.json"`) {
		t.Fatalf("without /catalogue.json: got %v, want an error naming LOG_EXPORTER_CATALOGUE", err)
	}
	cfg, err = loadConfig(envFunc(nil))
	if err != nil {
		t.Fatal(err)
	}
	// No syslog socket unless one is asked for.
	if cfg.SyslogAddr != "" || cfg.MetricsAddr != ":9114" {
		t.Fatalf("got %+v, want no syslog socket and the default metrics address", cfg)
	}
}

// The lab's catalogue gives the path label its values: every path nginx has.
func TestLoadConfigReadsTheLabsPaths(t *testing.T) {
	cfg, err := loadConfig(envFunc(nil))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(cfg.Paths, ",")
	for _, p := range []string{"tcp", "uds", "tcp-ka", "uds-ka", "tcp-lo", "tcp-lo-ka"} {
		if !strings.Contains(","+got+",", ","+p+",") {
			t.Errorf("paths %s lack %s", got, p)
		}
	}
}

func TestLoadConfigRejectsBadCatalogues(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"not json":      `paths: [tcp]`,
		"no paths":      `{"paths": {}}`,
		"bad name":      `{"paths": {"TCP": {}}}`,
		"other":         `{"paths": {"other": {}}}`,
		"name too long": `{"paths": {"` + strings.Repeat("a", 40) + `": {}}}`,
	} {
		file := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := loadConfig(envFunc(map[string]string{"LOG_EXPORTER_CATALOGUE": file}))
		if err == nil || !strings.Contains(err.Error(), "LOG_EXPORTER_CATALOGUE") {
			t.Errorf("%s: got %v, want an error naming LOG_EXPORTER_CATALOGUE", name, err)
		}
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
