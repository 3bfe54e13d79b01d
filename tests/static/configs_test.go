package static

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"uds-lab/tests/internal/lab"
)

// nginx -t on the template rendered with the values compose gives the nginx
// service; only compose service names (not resolvable here) and the run
// folder (pid, temp files) are replaced with local ones.
func TestNginxConfig(t *testing.T) {
	nginx := lab.Tool(t, "nginx")
	p := loadCompose(t)
	dir := t.TempDir()
	vars := map[string]string{}
	for k, v := range p.Services["nginx"].Environment {
		vars[k] = localHosts(p, *v)
	}
	if vars["APP_TCP_UPSTREAM"] == *p.Services["nginx"].Environment["APP_TCP_UPSTREAM"] {
		t.Fatalf("APP_TCP_UPSTREAM=%q: want the app service by name", vars["APP_TCP_UPSTREAM"])
	}
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

// localHosts replaces "service:port" of any compose service with 127.0.0.1:port.
func localHosts(p *types.Project, value string) string {
	names := p.ServiceNames()
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, name := range names {
		re := regexp.MustCompile(`(^|[=/ ,])` + regexp.QuoteMeta(name) + `:([0-9]+)`)
		value = re.ReplaceAllString(value, "${1}127.0.0.1:${2}")
	}
	return value
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
