package k8s

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"uds-lab/tests/internal/lab"
)

// The chart reads the lab's own files through symbolic links in
// k8s/uds-lab/files (helm template and helm package follow them), so there is
// no copy to drift: each entry must be a link to the file it stands for.
var sharedFiles = map[string]string{
	"catalogue.json":           "catalogue.json",
	"nginx/templates":          "nginx/templates",
	"nginx/healthcheck.sh":     "nginx/healthcheck.sh",
	"loadgen/plan.py":          "loadgen/plan.py",
	"loadgen/plan_env.py":      "loadgen/plan_env.py",
	"loadgen/plan_floor.py":    "loadgen/plan_floor.py",
	"loadgen/plan_orders.py":   "loadgen/plan_orders.py",
	"loadgen/plan_settings.py": "loadgen/plan_settings.py",
	"loadgen/plan_words.py":    "loadgen/plan_words.py",
	"grafana/dashboards":       "grafana/dashboards",
	// compose's Grafana datasource, for Grafana's sidecar on the cluster.
	"grafana/datasource.yaml": "grafana/provisioning/datasources/prometheus.yaml",
}

func TestSharedFilesAreLinks(t *testing.T) {
	root := lab.Root(t)
	for link, target := range sharedFiles {
		p := filepath.Join(chartDir(t), "files", link)
		fi, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("k8s/uds-lab/files/%s is a copy, not a link to %s: a copy drifts (git checks links out as files where core.symlinks is false)", link, target)
			continue
		}
		to, err := os.Readlink(p)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.IsAbs(to) {
			t.Errorf("k8s/uds-lab/files/%s links to an absolute path %s: relative, so it holds in any checkout", link, to)
		}
		if got, want := filepath.Clean(filepath.Join(filepath.Dir(p), to)), filepath.Join(root, target); got != want {
			t.Errorf("k8s/uds-lab/files/%s links to %s, want %s", link, got, want)
		}
	}
	// Nothing else in files/: what the chart reads is listed above.
	var extra []string
	_ = filepath.WalkDir(filepath.Join(chartDir(t), "files"), func(p string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(filepath.Join(chartDir(t), "files"), p)
		if err == nil && d.Type()&os.ModeSymlink != 0 {
			if _, ok := sharedFiles[rel]; !ok {
				extra = append(extra, rel)
			}
		}
		return err
	})
	if len(extra) > 0 {
		t.Errorf("k8s/uds-lab/files has links the test does not know: %v", extra)
	}
}

// What the chart renders is the repository's files, byte for byte: every
// nginx template (each at its folder), the readiness script, the catalogue,
// and the plan's writer.
func TestChartCarriesTheLabsFiles(t *testing.T) {
	m := parse(t, render(t, []string{"load.enabled=true", "load.testid=t1"}))
	read := func(rel string) string {
		b, err := os.ReadFile(lab.Path(t, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tpl := m.must(t, "ConfigMap", release+"-nginx-templates")
	items := map[string]string{} // path under /etc/nginx/templates -> key
	if v := m.must(t, "Deployment", named("app")).Spec.Template.Spec.Volume("nginx-templates"); v != nil && v.ConfigMap != nil {
		for _, it := range v.ConfigMap.Items {
			items[it.Path] = it.Key
		}
	}
	var templates []string
	root := lab.Path(t, "nginx", "templates")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".template") {
			rel, _ := filepath.Rel(root, p)
			templates = append(templates, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(templates)
	if len(templates) == 0 || len(items) != len(templates) {
		t.Errorf("nginx/templates has %d templates; the chart mounts %d: %v", len(templates), len(items), items)
	}
	for _, rel := range templates {
		key, ok := items[rel]
		if !ok {
			t.Errorf("nginx/templates/%s is not mounted at its place", rel)
			continue
		}
		if tpl.Data[key] != read(filepath.Join("nginx", "templates", rel)) {
			t.Errorf("ConfigMap %s's %s differs from nginx/templates/%s", tpl.Metadata.Name, key, rel)
		}
	}
	if tpl.Data["healthcheck.sh"] != read("nginx/healthcheck.sh") {
		t.Error("the chart's healthcheck.sh differs from nginx/healthcheck.sh")
	}
	// The catalogue's nginx URLs name this release's Services; nothing else differs.
	cat := m.must(t, "ConfigMap", release+"-catalogue").Data["catalogue.json"]
	for _, u := range [][2]string{{"http://nginx:8080", "http://" + named("nginx") + ":8080"}, {"http://app:8090", "http://" + named("app") + ":8090"}} {
		if !strings.Contains(cat, `"url": "`+u[1]+`"`) {
			t.Errorf("the chart's catalogue.json does not reach %s at %s", u[0], u[1])
		}
		cat = strings.ReplaceAll(cat, `"url": "`+u[1]+`"`, `"url": "`+u[0]+`"`)
	}
	if cat != read("catalogue.json") {
		t.Error("the chart's catalogue.json differs from the repository's by more than its nginx URLs")
	}
	lg := m.must(t, "ConfigMap", release+"-loadgen")
	for _, f := range []string{"plan.py", "plan_env.py", "plan_floor.py", "plan_orders.py", "plan_settings.py", "plan_words.py"} {
		if lg.Data[f] != read("loadgen/"+f) {
			t.Errorf("the chart's %s differs from loadgen/%s", f, f)
		}
	}
	// The dashboards and their datasource, each with the label Grafana's sidecar loads.
	dash := m.must(t, "ConfigMap", release+"-dashboards")
	files, _ := filepath.Glob(lab.Path(t, "grafana", "dashboards", "*.json"))
	if len(files) == 0 || len(dash.Data) != len(files) || dash.Metadata.Labels["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap %s: %d dashboards, label %q; want grafana/dashboards' %d, labelled grafana_dashboard=1",
			dash.Metadata.Name, len(dash.Data), dash.Metadata.Labels["grafana_dashboard"], len(files))
	}
	for _, f := range files {
		if dash.Data[filepath.Base(f)] != read(filepath.Join("grafana", "dashboards", filepath.Base(f))) {
			t.Errorf("the chart's %s differs from grafana/dashboards/%s", filepath.Base(f), filepath.Base(f))
		}
	}
	ds := m.must(t, "ConfigMap", release+"-datasource")
	// Its URL is this release's Prometheus by its full name; nothing else differs.
	url := "url: http://" + named("prometheus") + "." + namespace + ".svc:9090\n"
	if got := ds.Data["uds-lab-prometheus.yaml"]; !strings.Contains(got, url) ||
		strings.Replace(got, url, "url: http://prometheus:9090\n", 1) != read("grafana/provisioning/datasources/prometheus.yaml") || ds.Metadata.Labels["grafana_datasource"] != "1" {
		t.Errorf("the chart's datasource is not grafana/provisioning/datasources/prometheus.yaml with %q, or lacks the label grafana_datasource=1", url)
	}
}

// The chart's appVersion is the nginx it runs (values.yaml's images, like
// .env, are written from settings.toml: make settings).
func TestChartAppVersionIsNginx(t *testing.T) {
	cb, err := os.ReadFile(filepath.Join(chartDir(t), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `yaml:"appVersion"`
	}
	if err := yaml.Unmarshal(cb, &chart); err != nil {
		t.Fatal(err)
	}
	image := lab.Env(t)["NGINX_IMAGE"]
	if _, tag, _ := strings.Cut(image, ":"); chart.AppVersion != tag {
		t.Errorf("Chart.yaml appVersion %q; .env's NGINX_IMAGE is %s", chart.AppVersion, image)
	}
}

// Every image the chart runs is one of values.yaml's (no tag written into a template).
func TestImagesComeFromValues(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir(t), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Images map[string]string `yaml:"images"`
		App    struct {
			Image string `yaml:"image"`
		} `yaml:"app"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{values.App.Image: true}
	for k, v := range values.Images {
		if k != "pullPolicy" {
			allowed[v] = true
		}
	}
	m := parse(t, render(t, []string{"load.enabled=true", "load.testid=t1"}))
	for _, o := range m {
		pod := o.Spec.Template.Spec
		for _, c := range append(append([]Container{}, pod.InitContainers...), pod.Containers...) {
			if !allowed[c.Image] {
				t.Errorf("%s %s: container %s runs %q, not an image of values.yaml", o.Kind, o.Metadata.Name, c.Name, c.Image)
			}
		}
	}
}

// Each nginx of the chart gets the environment compose gives the nginx it
// stands for (compose.yaml's nginx and nginx-lo): the same names, and the same
// fixed values (ports, suffix, socket, output folder).
func TestNginxEnvMatchesCompose(t *testing.T) {
	b, err := os.ReadFile(lab.Path(t, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Environment map[string]any `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	m := parse(t, render(t, nil))
	for deploy, svc := range chartNginx {
		want := compose.Services[svc].Environment
		if len(want) == 0 {
			t.Fatalf("compose.yaml's %s has no environment", svc)
		}
		got := m.must(t, "Deployment", named(deploy)).Spec.Template.Spec.Container("nginx").EnvMap()
		for k, v := range want {
			g, ok := got[k]
			s, _ := v.(string)
			switch {
			case !ok:
				t.Errorf("Deployment %s's nginx lacks %s, which compose gives %s", deploy, k, svc)
			case k == "APP_TCP_UPSTREAM" && deploy == "nginx" && g != release+"-"+s:
				t.Errorf("Deployment %s's nginx: %s=%q; compose gives %s %q, which is this release's Service %s-%s", deploy, k, g, svc, s, release, s)
			case k != "APP_TCP_UPSTREAM" && s != "" && !strings.Contains(s, "${") && g != s:
				t.Errorf("Deployment %s's nginx: %s=%q; compose gives %s %q", deploy, k, g, svc, s)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("Deployment %s's nginx has %s, which compose does not give %s", deploy, k, svc)
			}
		}
	}
}

// Where git checks the links out as files holding their target's path
// (core.symlinks false), the chart refuses to render, naming the cause,
// rather than deploying a lab without its config: each link in turn, in a
// copy of the chart whose other shared files are real.
func TestChartRefusesLinksCheckedOutAsFiles(t *testing.T) {
	for link := range sharedFiles {
		t.Run(link, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "uds-lab")
			copyTree(t, chartDir(t), dir, func(rel string) bool { return rel == "files" })
			for l, target := range sharedFiles {
				dst := filepath.Join(dir, "files", l)
				if l == link {
					to, err := os.Readlink(filepath.Join(chartDir(t), "files", l))
					if err != nil {
						t.Fatal(err)
					}
					writeFile(t, dst, to)
					continue
				}
				copyTree(t, lab.Path(t, target), dst, func(string) bool { return false })
			}
			args := []string{"template", release, dir, "--set", "load.enabled=true", "--set", "load.testid=t1"}
			out, err := helm(t, args...)
			if err == nil {
				t.Fatalf("the chart rendered with files/%s a file holding its link's target\n%.200s", link, out)
			}
			if !strings.Contains(err.Error(), "core.symlinks") {
				t.Errorf("helm template: %v; want the cause named (core.symlinks)", err)
			}
		})
	}
	// The copy with every file real renders: the refusals above are the links'.
	dir := filepath.Join(t.TempDir(), "uds-lab")
	copyTree(t, chartDir(t), dir, func(rel string) bool { return rel == "files" })
	for l, target := range sharedFiles {
		copyTree(t, lab.Path(t, target), filepath.Join(dir, "files", l), func(string) bool { return false })
	}
	if _, err := helm(t, "template", release, dir); err != nil {
		t.Fatalf("the chart with real files: %v", err)
	}
}

// copyTree copies a file or a folder (links followed) to dst, leaving out
// what skip says (paths relative to src).
func copyTree(t *testing.T, src, dst string, skip func(rel string) bool) {
	t.Helper()
	fi, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dst, string(b))
		return
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		rel := e.Name()
		if skip(rel) {
			continue
		}
		copyTree(t, filepath.Join(src, rel), filepath.Join(dst, rel), func(r string) bool { return skip(filepath.Join(rel, r)) })
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Whole numbers from a values file (floats to Helm) are written in full, not
// as 1.073741824e+09.
func TestWholeNumbersInFull(t *testing.T) {
	f := filepath.Join(t.TempDir(), "big.yaml")
	writeFile(t, f, "app:\n  downloadSize: 1073741824\nload:\n  enabled: true\n  testid: 20261125\n  seed: 2147483647\n  rate: 1000000\n  startAt: 1795941070750\n")
	out, err := helm(t, "template", release, chartDir(t), "-f", f)
	if err != nil {
		t.Fatal(err)
	}
	m := parse(t, out)
	if got := m.must(t, "Deployment", named("app")).Spec.Template.Spec.Container("app").EnvMap()["APP_DOWNLOAD_SIZE"]; got != "1073741824" {
		t.Errorf("APP_DOWNLOAD_SIZE=%q, want 1073741824", got)
	}
	plan := m.must(t, "Job", named("openloop-20261125")).Spec.Template.Spec.Container("plan").EnvMap()
	for k, want := range map[string]string{"SEED": "2147483647", "RATE": "1000000", "TESTID": "20261125"} {
		if plan[k] != want {
			t.Errorf("%s=%q, want %s", k, plan[k], want)
		}
	}
	gen := m.must(t, "Job", named("openloop-20261125")).Spec.Template.Spec.Container("openloop").EnvMap()
	if got := gen["OPENLOOP_START_AT"]; got != "1795941070750" {
		t.Errorf("OPENLOOP_START_AT=%q, want 1795941070750", got)
	}
}
