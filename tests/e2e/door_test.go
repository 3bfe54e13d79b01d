package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
)

// secondDoor: nothing can write into Prometheus. From the app's network
// namespace, where a swapped-in image (code the lab does not control) runs, a
// remote-write push of a forged nginx series is refused and leaves nothing in
// Prometheus: without credentials by the door (basic auth, 401), and with the
// lab's own password alike by the receiver, which is off (404) unless make up
// is given PROMETHEUS_REMOTE_WRITE=true (for k6, which the tests never run).
// The 404 shows the push reaches Prometheus and gets past its door from that
// namespace, so the 401 is the door's doing, not the address's; Prometheus's
// flags say the receiver is off. promtool (the host's, the test tools' build)
// runs in the app's namespace by nsenter, so it has exactly the app's view of
// the network.
func secondDoor(t *testing.T, prom string) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool: %v (tests/e2e/run.sh installs it)", err)
	}
	app := strings.TrimSpace(run(t, "docker", "compose", "ps", "-q", "app"))
	pid := strings.TrimSpace(run(t, "docker", "inspect", "-f", "{{.State.Pid}}", app))
	promID := strings.TrimSpace(run(t, "docker", "compose", "ps", "-q", "prometheus"))
	ip := strings.Fields(run(t, "docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", promID))[0]
	write := "http://" + ip + ":9090/api/v1/write"
	id := fmt.Sprintf("e2e%d", time.Now().UnixNano())
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	push := func(metrics string, flags ...string) (string, error) {
		args := append([]string{"-t", pid, "-n", promtool, "push", "metrics"}, flags...)
		out, err := exec.Command("nsenter", append(args, write, metrics)...).CombinedOutput()
		return string(out), err
	}

	forged := file("forged.prom", fmt.Sprintf("nginx_location_requests_total{path=%q,status=\"500\",nginx=\"nginx\",forged=%q} 100\n", "uds-ka", id))
	if out, err := push(forged, "--label=job=nginx-log", "--timeout=10s"); err == nil {
		t.Errorf("a push with no credentials from the app's namespace was taken: %s", out)
	} else if !strings.Contains(out, "401") {
		t.Errorf("a push with no credentials from the app's namespace: want a 401, got %v: %s", err, out)
	}

	// The same push with the lab's password, from the same namespace: past the
	// door, the receiver itself refuses it (off by default).
	auth := file("http.yml", fmt.Sprintf("basic_auth:\n  username: %s\n  password_file: %s\n", lab.PrometheusUser(t), lab.PasswordFile(t)))
	if out, err := push(forged, "--label=job=nginx-log", "--http.config.file="+auth, "--timeout=10s"); err == nil {
		t.Errorf("a push with the lab's credentials from the app's namespace was taken: the remote-write receiver is on: %s", out)
	} else if !strings.Contains(out, "404") {
		t.Errorf("a push with the lab's credentials from the app's namespace: want a 404 (the receiver off), got %v: %s", err, out)
	}
	if on := promFlags(t, prom)["web.enable-remote-write-receiver"]; on != "false" {
		t.Errorf("Prometheus's flag web.enable-remote-write-receiver = %q, want false (make up without PROMETHEUS_REMOTE_WRITE=true)", on)
	}
	// Both pushes were answered with a refusal: nothing of them is pending.
	if s := promAPI(t, prom, "query", url.Values{"query": {fmt.Sprintf("{forged=%q}", id)}}); len(s) > 0 {
		t.Errorf("the forged series is in Prometheus: %v", s)
	}

	// Nothing the app runs can read the password: no mount of its folder.
	mounts := run(t, "docker", "inspect", "-f", "{{range .Mounts}}{{.Source}} {{end}}", app)
	if strings.Contains(mounts, filepath.Dir(lab.PasswordFile(t))) {
		t.Errorf("the app's container mounts the lab's secrets: %s", mounts)
	}
}

// promFlags reads the running Prometheus's command-line flags (/api/v1/status/flags).
func promFlags(t *testing.T, prom string) map[string]string {
	t.Helper()
	resp, err := lab.PrometheusGet(t, prom+"/api/v1/status/flags")
	if err != nil {
		t.Fatalf("status/flags: %v", err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string            `json:"status"`
		Data   map[string]string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("status/flags: %v (status %q)", err, r.Status)
	}
	return r.Data
}

// forgedImage is the minimal app (contract/minimal-app) built with series of
// other sources' names on its /metrics (forgedSource).
const forgedImage = "uds-lab-e2e/forged-app:local"

// forgedID labels every forged series. It is the same in every run, so that
// an unchanged minimal app is rebuilt from the builder's cache (Prometheus
// starts empty in each run: TestLab's make clean).
const forgedID = "e2e-forged"

// forgedSource is added to a copy of the minimal app, whose main.go passes it
// its registry: beside the app's own series, it registers one of each name in
// forgedNames, each labelled forged=forgedID, and the control, of an app's
// own name.
const forgedSource = `package main

import "github.com/prometheus/client_golang/prometheus"

// forgedRegistry: the app's registry, with series of the lab's other sources'
// names (tests/e2e/door_test.go: Prometheus must keep none of them).
func forgedRegistry(reg *prometheus.Registry) *prometheus.Registry {
	for _, f := range []struct {
		name   string
		labels prometheus.Labels
		value  float64
	}{
		{"nginx_location_requests_total", prometheus.Labels{"nginx": "nginx", "path": "uds-ka", "status": "500"}, 1e6},
		{"openloop_requests_total", prometheus.Labels{"testid": %[1]q, "path": "uds-ka", "status": "200"}, 1e6},
		{"node_context_switches_total", nil, 1e6},
		{"container_cpu_usage_seconds_total", prometheus.Labels{"container_label_com_docker_compose_service": "nginx"}, 1e6},
		{"nginx_http_requests_total", prometheus.Labels{"job": "nginx", "instance": "nginx-exporter:9113"}, 1e6},
		{"app_e2e_forged_control", nil, 1},
	} {
		labels := prometheus.Labels{"forged": %[1]q}
		for k, v := range f.labels {
			labels[k] = v
		}
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: f.name, Help: "Forged by the e2e test.", ConstLabels: labels})
		c.Add(f.value)
		reg.MustRegister(c)
	}
	return reg
}
`

// forgedNames: a figure of each other source the dashboards and the report
// read: nginx's count of uds-ka's 500s (at a million), the generator's
// requests, the host's and cAdvisor's counters, and nginx's exporter's count
// with a job label of its own (job="nginx": Prometheus would rename it
// exported_job).
var forgedNames = []string{"nginx_location_requests_total", "openloop_requests_total", "node_context_switches_total",
	"container_cpu_usage_seconds_total", "nginx_http_requests_total"}

// forgedMetrics: Prometheus's app job keeps only the app's own series (app_*,
// process_*, go_*: prometheus.yml's metric_relabel keep), so an app (code the
// lab does not control) that publishes another source's figures on its
// /metrics reaches none of nginx's, the generator's, the host's or
// cAdvisor's. The lab runs on the minimal app built with forgedSource: the
// forged series are on app:8080/metrics, where Prometheus scrapes the app;
// the control (app_e2e_forged_control) arrives, so the app was scraped, and
// nothing else labelled forged does. The lab runs on forgedImage (TestLab's swap).
func forgedMetrics(t *testing.T, prom string) {
	id := forgedID
	if got := strings.TrimSpace(run(t, "docker", "inspect", "-f", "{{.Config.Image}}", inspectService(t, "app").ID)); got != forgedImage {
		t.Fatalf("app runs %s, want %s", got, forgedImage)
	}
	// Where Prometheus scrapes the app, every forged series is published.
	exposed := run(t, "docker", "compose", "exec", "-T", "nginx", "curl", "-s", "http://app:8080/metrics")
	for _, name := range append(forgedNames, "app_e2e_forged_control") {
		if !regexp.MustCompile(`(?m)^` + name + `\{[^}]*forged="` + regexp.QuoteMeta(id) + `"`).MatchString(exposed) {
			t.Fatalf("app:8080/metrics does not publish the forged %s:\n%s", name, exposed)
		}
	}
	// The control arrives: a scrape of the forged app, which carried every forged series, is stored.
	waitFor(t, "the forged app's control series in Prometheus", 60*time.Second, func() error {
		if _, ok := scalar(t, prom, fmt.Sprintf(`app_e2e_forged_control{job="app", forged=%q}`, id)); !ok {
			return fmt.Errorf("app_e2e_forged_control not scraped yet")
		}
		return nil
	})
	// Nothing else of that scrape: no forged series under any name or job, ...
	for _, s := range promAPI(t, prom, "query", url.Values{"query": {fmt.Sprintf(`{forged=%q}`, id)}}) {
		if s.Metric["__name__"] != "app_e2e_forged_control" {
			t.Errorf("a forged series reached Prometheus: %v", s.Metric)
		}
	}
	// ... no series of another source's name under the app's job, ...
	if s := promAPI(t, prom, "query", url.Values{"query": {`{__name__=~"nginx_.+|openloop_.+|node_.+|container_.+", job="app"}`}}); len(s) > 0 {
		t.Errorf("the app's job has series of other sources' names: %v", s)
	}
	// ... nginx's per-location figures from nginx-log-exporter's job alone, ...
	jobs := vector(t, prom, `count by (job) ({__name__=~"nginx_location_.+"})`, "job")
	for job := range jobs {
		if job != "nginx-log" {
			t.Errorf("nginx_location_* series of job %q: want nginx-log's alone", job)
		}
	}
	// ... and not the forged million in uds-ka's 500s, even for a query that leaves the job out.
	if v, _ := scalar(t, prom, `sum(nginx_location_requests_total{path="uds-ka", status="500"})`); v >= 1e6 {
		t.Errorf("nginx's uds-ka 500s in Prometheus: %v, the forged million among them", v)
	}
	t.Logf("the forged app published %s on app:8080/metrics; Prometheus kept its control alone (nginx_location_* jobs: %v)",
		strings.Join(forgedNames, ", "), jobs)
}

// buildForged builds forgedImage: a copy of contract/minimal-app whose main.go
// passes its registry to forgedSource's forgedRegistry.
func buildForged(t *testing.T) {
	dir := t.TempDir()
	run(t, "cp", "-a", lab.Path(t, "contract", "minimal-app")+"/.", dir)
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const registry = "reg := prometheus.NewRegistry()"
	src := mustRead(t, filepath.Join(dir, "main.go"))
	if strings.Count(src, registry) != 1 {
		t.Fatalf("contract/minimal-app/main.go: want one %q to replace with the forged registry", registry)
	}
	write("main.go", strings.Replace(src, registry, "reg := forgedRegistry(prometheus.NewRegistry())", 1))
	write("forged.go", fmt.Sprintf(forgedSource, forgedID))
	step(t, "build "+forgedImage, func() {
		run(t, "docker", "build", "-q", "--build-arg", "GO_IMAGE="+os.Getenv("GO_IMAGE"), "-t", forgedImage, dir)
	})
}
