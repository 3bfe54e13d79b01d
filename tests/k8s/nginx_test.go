package k8s

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// The two nginx of the chart and the catalogue's nginx each one is: the
// sidecar in the app's pod is nginx-lo (loopback), the one in its own pod is
// nginx (across the pod network).
var chartNginx = map[string]string{"app": "nginx-lo", "nginx": "nginx"}

// renderChartNginx renders nginx's config as the official image's entrypoint
// would in the nginx container of Deployment deploy: the ConfigMap's
// templates at the paths the volume's items give them under
// /etc/nginx/templates, envsubst with the container's environment. Only what
// cannot exist here is made local: the run folder, the access log's folder,
// and the upstream's host name (nginx -t resolves it). Returns the config's
// folder and the main config's text.
func renderChartNginx(t *testing.T, m Manifests, deploy string) (string, string) {
	return renderChartNginxWith(t, m, deploy, nil)
}

// renderChartNginxWith renders as renderChartNginx, with some variables
// replaced (ports and the app's addresses, to run it here).
func renderChartNginxWith(t *testing.T, m Manifests, deploy string, override map[string]string) (string, string) {
	t.Helper()
	pod := &m.must(t, "Deployment", named(deploy)).Spec.Template.Spec
	c := pod.Container("nginx")
	if c == nil {
		t.Fatalf("Deployment %s has no nginx container", deploy)
	}
	env := c.EnvMap()
	out := env["NGINX_ENVSUBST_OUTPUT_DIR"]
	if want := []string{"nginx", "-c", out + "/nginx.conf", "-g", "daemon off;"}; strings.Join(c.Args, "\x00") != strings.Join(want, "\x00") || len(c.Command) != 0 {
		t.Errorf("Deployment %s: nginx's command %q args %q; want the image's entrypoint (no command) with args %q, as compose",
			deploy, c.Command, c.Args, want)
	}
	mount := c.Mount("nginx-templates")
	vol := pod.Volume("nginx-templates")
	if mount == nil || mount.MountPath != "/etc/nginx/templates" || vol == nil || vol.ConfigMap == nil {
		t.Fatalf("Deployment %s: nginx does not mount the templates' ConfigMap at /etc/nginx/templates", deploy)
	}
	cm := m.must(t, "ConfigMap", vol.ConfigMap.Name)
	templates := filepath.Join(t.TempDir(), "templates")
	for _, it := range vol.ConfigMap.Items {
		text, ok := cm.Data[it.Key]
		if !ok {
			t.Fatalf("ConfigMap %s has no key %s", cm.Metadata.Name, it.Key)
		}
		f := filepath.Join(templates, it.Path)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	vars := map[string]string{}
	for k, v := range env {
		vars[k] = v
	}
	vars["NGINX_RUN_DIR"] = dir
	if host, port, err := net.SplitHostPort(env["APP_TCP_UPSTREAM"]); err == nil && host != "127.0.0.1" {
		vars["APP_TCP_UPSTREAM"] = "127.0.0.1:" + port
	}
	for k, v := range override {
		vars[k] = v
	}
	if strings.Contains(vars["NGINX_ACCESS_LOG"], "/log/") {
		if err := os.MkdirAll(filepath.Join(dir, "log"), 0o755); err != nil {
			t.Fatal(err)
		}
		vars["NGINX_ACCESS_LOG"] = strings.ReplaceAll(vars["NGINX_ACCESS_LOG"], "/log/", dir+"/log/")
	}
	var main string
	err := filepath.WalkDir(templates, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".template") {
			return err
		}
		rel, _ := filepath.Rel(templates, path)
		text := lab.RenderTemplate(t, path, vars)
		if rel == "nginx.conf.template" {
			main = text
		}
		f := filepath.Join(dir, strings.TrimSuffix(rel, ".template"))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return err
		}
		return os.WriteFile(f, []byte(text), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if main == "" {
		t.Fatalf("Deployment %s: the ConfigMap's items put no nginx.conf.template at the top of /etc/nginx/templates", deploy)
	}
	return dir, main
}

var location = regexp.MustCompile(`(?m)^\s*location\s+/([^/_\s][^/\s]*)/\s*\{`)

// nginx -t on the config each nginx of the chart renders, with the default
// values and each variant (FastCGI among them), and its locations: exactly
// the catalogue's paths for the nginx it stands for.
func TestNginxConfigFromChart(t *testing.T) {
	nginx := lab.Tool(t, "nginx")
	cat := lab.ReadCatalogue(t)
	for _, v := range variants {
		m := parse(t, render(t, v.sets))
		for deploy, name := range chartNginx {
			t.Run(v.name+"/"+deploy, func(t *testing.T) {
				dir, main := renderChartNginx(t, m, deploy)
				if out, err := exec.Command(nginx, "-t", "-c", filepath.Join(dir, "nginx.conf")).CombinedOutput(); err != nil {
					t.Fatalf("nginx -t: %v\n%s", err, out)
				}
				var got []string
				for _, l := range location.FindAllStringSubmatch(main, -1) {
					got = append(got, l[1])
				}
				sort.Strings(got)
				if want := cat.PathsOf(name); strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("Deployment %s's nginx serves %v; catalogue.json's paths of %s are %v", deploy, got, name, want)
				}
			})
		}
	}
}

// Each nginx listens where the chart's catalogue's URL for it points (the
// catalogue the generator's plan reads), through a Service of this release:
// the plan's URLs (lab-nginx:8080, lab-app:8090) reach them.
func TestCatalogueURLsReachChartNginx(t *testing.T) {
	m := parse(t, render(t, nil))
	var cat lab.Catalogue
	if err := json.Unmarshal([]byte(m.must(t, "ConfigMap", release+"-catalogue").Data["catalogue.json"]), &cat); err != nil {
		t.Fatal(err)
	}
	for deploy, name := range chartNginx {
		n, ok := cat.Nginx[name]
		if !ok {
			t.Fatalf("catalogue.json has no nginx %s", name)
		}
		host, port, err := net.SplitHostPort(strings.TrimPrefix(n.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		svc := m.Get("Service", host)
		if svc == nil {
			t.Errorf("catalogue.json reaches %s at %s: the chart has no Service %s", name, n.URL, host)
			continue
		}
		c := m.must(t, "Deployment", named(deploy)).Spec.Template.Spec.Container("nginx")
		found := false
		for _, p := range svc.Spec.Ports {
			if p.Port > 0 && strings.TrimSpace(port) == strconv.Itoa(p.Port) && p.TargetPort == "nginx-http" {
				found = true
			}
		}
		listen := c.EnvMap()["NGINX_LISTEN_PORT"]
		httpPort := ""
		for _, p := range c.Ports {
			if p.Name == "nginx-http" {
				httpPort = strconv.Itoa(p.ContainerPort)
			}
		}
		if !found || listen != httpPort {
			t.Errorf("%s at %s: Service %s's port %s must target nginx-http, which Deployment %s's nginx listens on (NGINX_LISTEN_PORT %s, port %s)",
				name, n.URL, host, port, deploy, listen, httpPort)
		}
		// The Service selects the pod that nginx runs in.
		labels := m.must(t, "Deployment", named(deploy)).Spec.Template.Metadata.Labels
		sel, _ := svc.Spec.Selector.(map[string]any)
		if len(sel) == 0 {
			t.Errorf("Service %s selects nothing", host)
		}
		for k, v := range sel {
			if labels[k] != v {
				t.Errorf("Service %s selects %s=%v; Deployment %s's pods have %q", host, k, v, deploy, labels[k])
			}
		}
	}
}
