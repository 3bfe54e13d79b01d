package static

import (
	"net/url"
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

// nginx -t on the templates rendered with the values compose gives each nginx
// service (nginx and nginx-lo, catalogue.json's "nginx"), in each protocol
// nginx speaks to the app (APP_PROTOCOL: every stack's in the catalogue);
// only compose service names (not resolvable here) and the run folder (pid,
// temp files) are replaced with local ones.
func TestNginxConfig(t *testing.T) {
	nginx := lab.Tool(t, "nginx")
	p := loadCompose(t)
	for name := range lab.ReadCatalogue(t).Nginx {
		for _, protocol := range protocols(t) {
			t.Run(name+"/"+protocol, func(t *testing.T) {
				dir := t.TempDir()
				renderNginx(t, p, name, dir, map[string]string{"APP_PROTOCOL": protocol})
				if out, err := exec.Command(nginx, "-t", "-c", filepath.Join(dir, "nginx.conf")).CombinedOutput(); err != nil {
					t.Fatalf("nginx -t: %v\n%s", err, out)
				}
			})
		}
	}
}

// protocols lists the protocols of the catalogue's stacks, sorted.
func protocols(t *testing.T) []string {
	seen := map[string]bool{}
	for _, s := range lab.ReadCatalogue(t).Stacks {
		seen[s.Protocol] = true
	}
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// renderNginx renders the templates as compose service svc would (with
// overrides of its settings), with its run folder in dir, and returns the
// main config.
func renderNginx(t *testing.T, p *types.Project, svc, dir string, override map[string]string) string {
	t.Helper()
	s, ok := p.Services[svc]
	if !ok {
		t.Fatalf("catalogue.json names nginx %q: no such compose service", svc)
	}
	vars := map[string]string{}
	for k, v := range s.Environment {
		vars[k] = localHosts(p, *v)
	}
	for k, v := range override {
		vars[k] = v
	}
	vars["NGINX_RUN_DIR"] = dir
	// nginx -t opens the access log: its file in a volume (the exporter's
	// FIFO) is looked for under dir instead, where nginx may create it.
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeVolume && strings.Contains(vars["NGINX_ACCESS_LOG"], v.Target+"/") {
			if err := os.MkdirAll(filepath.Join(dir, v.Target), 0o755); err != nil {
				t.Fatal(err)
			}
			vars["NGINX_ACCESS_LOG"] = strings.ReplaceAll(vars["NGINX_ACCESS_LOG"], v.Target+"/", filepath.Join(dir, v.Target)+"/")
		}
	}
	return lab.RenderNginx(t, vars, dir)
}

// A path's location: /name/ (locations whose name starts with "_" are the
// lab's own, such as the healthcheck's /_tcp/, not paths).
var location = regexp.MustCompile(`(?m)^\s*location\s+/([^/_\s][^/\s]*)/\s*\{`)

// Each nginx's locations are exactly the catalogue's paths for that nginx, so
// k6, wrk, the report, the dashboards and the log exporter know every path
// nginx serves, and nothing else. Its URL in the catalogue is where compose
// makes it listen.
func TestCatalogueMatchesNginx(t *testing.T) {
	p := loadCompose(t)
	c := lab.ReadCatalogue(t)
	if len(c.Paths) == 0 || len(c.Workloads) == 0 {
		t.Fatal("catalogue.json has no paths or no workloads")
	}
	for name, n := range c.Nginx {
		var got []string
		for _, m := range location.FindAllStringSubmatch(renderNginx(t, p, name, t.TempDir(), nil), -1) {
			got = append(got, m[1])
		}
		sort.Strings(got)
		if want := c.PathsOf(name); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s's nginx locations are %v; catalogue.json's paths for it are %v", name, got, want)
		}
		// The URL's host is the service, or the one whose network namespace it shares.
		u, err := url.Parse(n.URL)
		if err != nil {
			t.Fatal(err)
		}
		s := p.Services[name]
		host := name
		if owner, ok := strings.CutPrefix(s.NetworkMode, "service:"); ok {
			host = owner
		}
		if port := *s.Environment["NGINX_LISTEN_PORT"]; u.Hostname() != host || u.Port() != port {
			t.Errorf("catalogue.json: %s at %s; compose makes it listen at %s:%s", name, n.URL, host, port)
		}
	}
	for name, path := range c.Paths {
		if _, ok := c.Nginx[path.Nginx]; !ok {
			t.Errorf("path %s: nginx %q is not in the catalogue", name, path.Nginx)
		}
		if path.Listener != "tcp" && path.Listener != "unix" {
			t.Errorf("path %s: listener %q, want tcp or unix", name, path.Listener)
		}
		if (path.Listener == "unix") != (path.Hop == "socket") {
			t.Errorf("path %s: hop %q and listener %q disagree", name, path.Hop, path.Listener)
		}
		if _, ok := c.Paths[path.Control]; path.Control != "" && !ok {
			t.Errorf("path %s: control of %q, which is no path", name, path.Control)
		}
		if !regexp.MustCompile(`^#[0-9A-F]{6}$`).MatchString(path.Colour) {
			t.Errorf("path %s: colour %q, want #RRGGBB (Grafana and matplotlib both read it)", name, path.Colour)
		}
	}
	for _, term := range c.Breakdown.Terms {
		for _, name := range term.Paths {
			if _, ok := c.Paths[name]; !ok || len(term.Paths) != 2 {
				t.Errorf("breakdown term %s: paths %v, want two of the catalogue's", term.Key, term.Paths)
			}
		}
	}
	// Every path in .env's default selection exists (empty: the catalogue's).
	for _, name := range strings.Split(lab.Env(t)["PATHS"], ",") {
		if name == "" {
			continue
		}
		if _, ok := c.Paths[name]; !ok {
			t.Errorf(".env PATHS names %q: not in catalogue.json", name)
		}
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
