package e2e

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
)

// secondDoor: only the load generator can write into Prometheus. From the
// app's network namespace, where a swapped-in image (code the lab does not
// control) runs, a remote-write push of a forged nginx series is refused and
// leaves nothing in Prometheus; the same push with the lab's credentials (what
// k6 holds) is taken, so the refusal is the door's doing, not the address's.
// promtool (the host's, the test tools' build) runs in the app's namespace by
// nsenter, so it has exactly the app's view of the network.
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

	// The control: the password k6 is given, from the same namespace.
	auth := file("http.yml", fmt.Sprintf("basic_auth:\n  username: %s\n  password_file: %s\n", lab.PrometheusUser(t), lab.PasswordFile(t)))
	control := file("control.prom", fmt.Sprintf("uds_lab_e2e_authorized_push{id=%q} 1\n", id))
	if out, err := push(control, "--http.config.file="+auth, "--timeout=10s"); err != nil {
		t.Errorf("a push with the lab's credentials was refused: %v: %s", err, out)
	}
	waitFor(t, "the authorized push in Prometheus", 20*time.Second, func() error {
		if len(promAPI(t, prom, "query", url.Values{"query": {fmt.Sprintf("uds_lab_e2e_authorized_push{id=%q}", id)}})) == 0 {
			return fmt.Errorf("not there yet")
		}
		return nil
	})
	if s := promAPI(t, prom, "query", url.Values{"query": {fmt.Sprintf("nginx_location_requests_total{forged=%q}", id)}}); len(s) > 0 {
		t.Errorf("the forged series is in Prometheus: %v", s)
	}

	// Nothing the app runs can read the password: no mount of its folder.
	mounts := run(t, "docker", "inspect", "-f", "{{range .Mounts}}{{.Source}} {{end}}", app)
	if strings.Contains(mounts, filepath.Dir(lab.PasswordFile(t))) {
		t.Errorf("the app's container mounts the lab's secrets: %s", mounts)
	}
}
