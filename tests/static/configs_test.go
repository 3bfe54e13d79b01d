package static

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// nginx -t on the template rendered with the values compose gives the nginx
// service; only the app's host name (not resolvable here) and the run folder
// (pid, temp files) are replaced with local ones.
func TestNginxConfig(t *testing.T) {
	nginx := lab.Tool(t, "nginx")
	vars := map[string]string{}
	for k, v := range loadCompose(t).Services["nginx"].Environment {
		vars[k] = *v
	}
	dir := t.TempDir()
	host, port, _ := strings.Cut(vars["APP_TCP_UPSTREAM"], ":")
	if host != "app" {
		t.Fatalf("APP_TCP_UPSTREAM=%q: want the app service by name", vars["APP_TCP_UPSTREAM"])
	}
	vars["APP_TCP_UPSTREAM"] = "127.0.0.1:" + port
	vars["NGINX_RUN_DIR"] = dir
	conf := lab.RenderTemplate(t, lab.Path(t, "nginx", "templates", "nginx.conf.template"), vars)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(nginx, "-t", "-c", path).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
}

func TestPrometheusConfig(t *testing.T) {
	promtool := lab.Tool(t, "promtool")
	out, err := exec.Command(promtool, "check", "config", lab.Path(t, "prometheus", "prometheus.yml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	// Every service Prometheus scrapes exists in compose.yaml.
	services := loadCompose(t).Services
	for _, target := range scrapeTargets(t) {
		host, _, _ := strings.Cut(target, ":")
		if _, ok := services[host]; !ok && host != "localhost" {
			t.Errorf("prometheus.yml scrapes %s: no such compose service", target)
		}
	}
}

// The promtool that checks the config is the version users run.
func TestPromtoolVersionMatchesImage(t *testing.T) {
	out, err := exec.Command(lab.Tool(t, "promtool"), "--version").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	image := lab.Env(t)["PROMETHEUS_IMAGE"]
	tag := image[strings.LastIndex(image, ":")+2:]
	if !strings.Contains(string(out), "version "+tag+" ") {
		t.Errorf("promtool --version says %q, .env pulls %s", strings.SplitN(string(out), "\n", 2)[0], image)
	}
}
