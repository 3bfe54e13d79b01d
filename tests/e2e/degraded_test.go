package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
)

// mkOut runs a Makefile target as a user would and returns its output and
// whether it succeeded; env entries are added to the environment.
func mkOut(t *testing.T, env []string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command("make", args...)
	cmd.Dir = lab.Root(t)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

func contains(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s: want %q in:\n%s", what, w, out)
		}
	}
}

// make doctor on the states this machine can make for real; the states it
// cannot (Docker Desktop, rootless, userns-remap, Docker 29) are tested on
// recorded `docker info` outputs in tests/doctor.
func TestDoctor(t *testing.T) {
	if os.Getenv("UDS_LAB_E2E") == "" {
		t.Skip("needs the stand-in images and environment from tests/e2e/run.sh: run `make e2e`")
	}
	project := os.Getenv("COMPOSE_PROJECT_NAME")

	t.Run("this machine: the lab can start", func(t *testing.T) {
		out, ok := mkOut(t, nil, "doctor")
		t.Logf("make doctor:\n%s", out)
		if !ok {
			t.Fatalf("make doctor failed on the test bed")
		}
		contains(t, "make doctor", out, "ok      Docker engine",
			"/ is a shared mount: node-exporter mounts it read-only, rslave", "The lab can start.")
	})

	t.Run("no engine", func(t *testing.T) {
		out, ok := mkOut(t, []string{"DOCKER_HOST=unix:///nonexistent/docker.sock"}, "doctor")
		if ok {
			t.Errorf("make doctor succeeded with no engine")
		}
		contains(t, "make doctor", out, "FAIL    Docker engine        no engine answers: Cannot connect to the Docker daemon",
			"The lab cannot start")
	})

	t.Run("a port taken: make up stops before starting anything", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		out, ok := mkOut(t, nil, "doctor", fmt.Sprintf("NGINX_PORT=%d", port))
		if ok {
			t.Errorf("make doctor succeeded with NGINX_PORT taken")
		}
		contains(t, "make doctor", out, fmt.Sprintf("127.0.0.1:%d is taken by another process (NGINX_PORT)", port))
		out, ok = mkOut(t, nil, "up", fmt.Sprintf("NGINX_PORT=%d", port))
		if ok {
			t.Errorf("make up succeeded with NGINX_PORT taken")
		}
		contains(t, "make up", out, fmt.Sprintf("doctor: FAIL port %d", port), "the lab cannot start")
		if ids := strings.TrimSpace(run(t, "docker", "ps", "-aq", "--filter", "label=com.docker.compose.project="+project)); ids != "" {
			t.Errorf("make up stopped by the doctor left containers: %s", ids)
		}
	})

	t.Run("a CPU set beyond the cores", func(t *testing.T) {
		cores := strings.TrimSpace(run(t, "docker", "info", "--format", "{{.NCPU}}"))
		out, ok := mkOut(t, nil, "doctor", "NGINX_CPUSET="+cores)
		if ok {
			t.Errorf("make doctor succeeded with NGINX_CPUSET=%s on %s cores", cores, cores)
		}
		contains(t, "make doctor", out, fmt.Sprintf("NGINX_CPUSET=%s names core %s; the engine has %s", cores, cores, cores))
	})
}

// degradedReport is what TestPrivateRoot reads of report.json.
type degradedReport struct {
	Phases []struct {
		Name    string              `json:"name"`
		Figures map[string]*float64 `json:"figures"`
		Missing map[string]string   `json:"missing"`
	} `json:"phases"`
	Warnings []struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"warnings"`
}

// The lab with / a private mount, as on Docker Desktop, rootless Docker and
// WSL2 without systemd: node-exporter's rslave mount is refused there. make
// doctor names it, make up starts the lab with node-exporter on a plain
// read-only mount, and the report names the figures that are missing (here
// cAdvisor's: run.sh leaves it out of this test). run.sh makes / private around
// this test only, and shared again after it.
func TestPrivateRoot(t *testing.T) {
	if os.Getenv("UDS_LAB_E2E_PRIVATE_ROOT") == "" {
		t.Skip("tests/e2e/run.sh runs it with / made a private mount: run `make e2e`")
	}
	if p := strings.TrimSpace(run(t, "findmnt", "-no", "PROPAGATION", "/")); p != "private" {
		t.Fatalf("/ is %q, want private (run.sh makes it so)", p)
	}
	project := os.Getenv("COMPOSE_PROJECT_NAME")
	prom := "http://127.0.0.1:" + os.Getenv("PROMETHEUS_PORT")
	mk(t, "clean")
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "compose", "logs", "--no-color", "--tail=40").CombinedOutput()
			t.Logf("compose logs:\n%s", out)
		}
		mk(t, "clean")
		assertNothingLeft(t, project)
	})

	out, ok := mkOut(t, nil, "doctor")
	t.Logf("make doctor:\n%s", out)
	if !ok {
		t.Fatalf("make doctor says the lab cannot start with / private")
	}
	contains(t, "make doctor", out, "warn    / for node-exporter", "is not a shared mount",
		"node-exporter starts with a plain read-only mount of /", "The lab can start.")

	out, ok = mkOut(t, nil, "up")
	t.Logf("make up:\n%s", out)
	if !ok {
		t.Fatalf("make up failed with / private")
	}
	contains(t, "make up", out, "doctor: warn / for node-exporter")
	// What compose asked for: read-only, no rslave. Compose passes short-syntax
	// bind mounts as Binds. (Docker's inspect reports rslave for the mount all
	// the same: for a source that holds its data root it asks rslave itself,
	// and falls back to private where / is not shared; Moby daemon/volumes.go
	// and oci_linux.go.)
	id := strings.TrimSpace(run(t, "docker", "compose", "ps", "-q", "node-exporter"))
	var bind string
	for _, b := range strings.Fields(run(t, "docker", "inspect", "-f", `{{range .HostConfig.Binds}}{{println .}}{{end}}`, id)) {
		if strings.Contains(b, ":/host:") {
			bind = b
		}
	}
	t.Logf("node-exporter's bind of /: %q", bind)
	if !strings.HasPrefix(bind, "/:/host:ro") || strings.Contains(bind, "slave") {
		t.Errorf("node-exporter's bind of /: %q, want read-only without rslave", bind)
	}
	waitFor(t, "Prometheus scraping the lab and node-exporter", 60*time.Second, func() error {
		for _, job := range []string{"app", "nginx", "node"} {
			if v, ok := scalar(t, prom, fmt.Sprintf(`up{job=%q}`, job)); !ok || v != 1 {
				return fmt.Errorf("up{job=%q} = %v (present %v)", job, v, ok)
			}
		}
		return nil
	})

	testid := "e2e-private-root-" + time.Now().UTC().Format("150405")
	t.Cleanup(func() {
		if !t.Failed() { // a failure leaves its run to read
			os.RemoveAll(lab.Path(t, "results", testid))
		}
	})
	mk(t, "load", "TESTID="+testid, "SCENARIO=ping", "PATHS=tcp,uds", "RATE=50", "DURATION=5", "ROUNDS=1", "WARMUP=0")
	scrapedAfter(t, prom, "node", time.Now()) // the report reads the scrape after the last phase
	mk(t, "report", "RUN="+testid)
	var r degradedReport
	if err := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", testid, "report.json"))), &r); err != nil {
		t.Fatalf("results/%s/report.json: %v", testid, err)
	}
	md := mustRead(t, lab.Path(t, "results", testid, "report.md"))
	t.Logf("report.md:\n%s", md)
	if len(r.Phases) != 2 {
		t.Fatalf("report.json has %d phases, want 2", len(r.Phases))
	}
	for _, ph := range r.Phases {
		// node-exporter, degraded, still counts context switches: the host's
		// figure above the idle baseline is there (at 50 req/s it may be
		// below 0: the background's swings).
		if v := ph.Figures["host_ctx_switches_per_req"]; v == nil {
			t.Errorf("%s: host_ctx_switches_per_req = nil with node-exporter on a plain mount (missing: %q)", ph.Name, ph.Missing["host_ctx_switches_per_req"])
		}
		if v := ph.Figures["nginx_cpu_us_per_req"]; v != nil {
			t.Errorf("%s: nginx_cpu_us_per_req = %v without cAdvisor", ph.Name, *v)
		}
		if why := ph.Missing["nginx_cpu_us_per_req"]; !strings.Contains(why, "cAdvisor not running") {
			t.Errorf("%s: nginx CPU/req missing because %q, want cAdvisor not running", ph.Name, why)
		}
	}
	named := false
	for _, w := range r.Warnings {
		named = named || (w.Kind == "missing_figures" && strings.Contains(w.Message, "nginx CPU/req") && strings.Contains(w.Message, "cAdvisor not running"))
	}
	if !named {
		t.Errorf("no missing_figures warning names nginx CPU/req and cAdvisor: %+v", r.Warnings)
	}
	contains(t, "report.md", md, "n/a (cAdvisor not running)")
}
