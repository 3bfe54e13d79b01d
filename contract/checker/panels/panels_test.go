package panels

import (
	"reflect"
	"testing"
)

func TestAppMetrics(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (listener) (rate(app_connections_accepted_total{job="app"}[1m]))`:                            {"app_connections_accepted_total"},
		`1e6 * sum(rate(process_cpu_seconds_total{job="app"}[1m])) / sum(rate(app_http_requests_total[1m]))`: {"app_http_requests_total", "process_cpu_seconds_total"},
		`rate(go_gc_duration_seconds_count{job="app"}[5m])`:                                                  {"go_gc_duration_seconds_count"},
		`rate(process_cpu_seconds_total{job="nginx"}[1m])`:                                                   {},
		`sum(rate(nginx_location_requests_total{path="uds"}[1m]))`:                                           {},
	} {
		if got := AppMetrics(expr); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", expr, got, want)
		}
	}
}

func TestLoad(t *testing.T) {
	uses, err := Load("../../../grafana/dashboards")
	if err != nil {
		t.Fatal(err)
	}
	if len(uses["app_http_requests_total"]) == 0 || len(uses["app_connections_accepted_total"]) == 0 {
		t.Errorf("no panels for the app's request or connection counters: %v", uses)
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("an empty folder gave no error")
	}
}
