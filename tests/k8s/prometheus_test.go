package k8s

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"uds-lab/tests/internal/lab"
)

type scrapeConfig struct {
	ScrapeConfigs []struct {
		JobName        string `yaml:"job_name"`
		ScrapeInterval string `yaml:"scrape_interval"`
		BasicAuth      *struct {
			Username     string `yaml:"username"`
			PasswordFile string `yaml:"password_file"`
		} `yaml:"basic_auth"`
	} `yaml:"scrape_configs"`
}

// Prometheus on the cluster: promtool accepts its config; its jobs are
// compose's (names and intervals, so the dashboards and the report read the
// same series), those that exist there (node-exporter and cAdvisor do not
// yet); it runs with compose's flags (the remote-write receiver, native
// histograms, the web config with basic auth), which prometheus-auth writes
// from the Secret; pod discovery may only read pods.
func TestPrometheusOnTheCluster(t *testing.T) {
	m := parse(t, render(t, nil))
	cm := m.must(t, "ConfigMap", release+"-prometheus")
	dir := t.TempDir()
	f := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(f, []byte(cm.Data["prometheus.yml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(lab.Tool(t, "promtool"), "check", "config", "--syntax-only", f).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	var chart, compose scrapeConfig
	if err := yaml.Unmarshal([]byte(cm.Data["prometheus.yml"]), &chart); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(lab.Path(t, "prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	composeJobs := map[string]string{}
	for _, j := range compose.ScrapeConfigs {
		composeJobs[j.JobName] = j.ScrapeInterval
	}
	seen := map[string]bool{}
	for _, j := range chart.ScrapeConfigs {
		seen[j.JobName] = true
		want, ok := composeJobs[j.JobName]
		if !ok {
			t.Errorf("the chart's Prometheus has job %s, which prometheus/prometheus.yml does not (the dashboards would not read it)", j.JobName)
		} else if j.ScrapeInterval != want {
			t.Errorf("job %s: every %q on the cluster, %q in compose", j.JobName, j.ScrapeInterval, want)
		}
		if j.JobName == "prometheus" && (j.BasicAuth == nil || j.BasicAuth.PasswordFile != "/run/secrets/prometheus_password") {
			t.Error("Prometheus's scrape of itself does not log in with the password file")
		}
	}
	for _, j := range []string{"app", "nginx", "nginx-log", "openloop", "prometheus"} {
		if !seen[j] {
			t.Errorf("the chart's Prometheus has no job %s", j)
		}
	}

	var composeFile struct {
		Services map[string]struct {
			Command []string `yaml:"command"`
		} `yaml:"services"`
	}
	cb, err := os.ReadFile(lab.Path(t, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(cb, &composeFile); err != nil {
		t.Fatal(err)
	}
	pod := &m.must(t, "Deployment", named("prometheus")).Spec.Template.Spec
	prom := pod.Container("prometheus")
	// compose's flags with their defaults (${VAR:-default}: make sets the
	// remote-write flag from PROMETHEUS_REMOTE_WRITE, off by default).
	withDefaults := regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`).ReplaceAllString(strings.Join(composeFile.Services["prometheus"].Command, " "), "$1")
	if got, want := strings.Join(prom.Args, " "), withDefaults; got != want {
		t.Errorf("Prometheus runs with %s; compose runs it with %s", got, want)
	}
	auth := pod.Container("prometheus-auth")
	if auth == nil || auth.RestartPolicy == "Always" {
		t.Fatal("no prometheus-auth init container writing the web config before Prometheus starts")
	}
	web := auth.Mount("web")
	if web == nil || prom.Mount("web") == nil || web.MountPath+"/web.yml" != auth.EnvMap()["WEB_CONFIG"] ||
		!strings.Contains(strings.Join(prom.Args, " "), "--web.config.file="+prom.Mount("web").MountPath+"/web.yml") {
		t.Error("prometheus-auth does not write the web config where Prometheus reads it")
	}
	for _, c := range []*Container{auth, prom} {
		pw := c.Mount("password")
		if pw == nil || pw.MountPath != "/run/secrets/prometheus_password" || pw.SubPath != "prometheus_password" {
			t.Errorf("%s does not read the password at /run/secrets/prometheus_password", c.Name)
		}
	}
	if v := pod.Volume("password"); v == nil || v.Secret == nil || v.Secret.SecretName != release+"-prometheus-auth" {
		t.Error("the password volume is not the chart's Secret")
	}
	role := m.must(t, "Role", release+"-prometheus")
	var rules struct {
		Rules []struct {
			Resources []string `yaml:"resources"`
			Verbs     []string `yaml:"verbs"`
		} `yaml:"rules"`
	}
	text := render(t, nil)
	for _, doc := range strings.Split(text, "\n---") {
		if strings.Contains(doc, "kind: Role\n") {
			if err := yaml.Unmarshal([]byte(doc), &rules); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(rules.Rules) != 1 || strings.Join(rules.Rules[0].Resources, ",") != "pods" ||
		strings.Join(rules.Rules[0].Verbs, ",") != "get,list,watch" {
		t.Errorf("Role %s grants %+v; pod discovery needs get, list and watch on pods only", role.Metadata.Name, rules.Rules)
	}
}

// The kubelet mounts a pod's service-account token at
// /var/run/secrets/kubernetes.io/serviceaccount; where /var/run is /run (in
// Debian's images), a volume mounted read-only at /run/secrets or above hides
// that mount point, and runc fails the container ("make mountpoint ...:
// read-only file system": what the test bed's node showed Prometheus doing).
func TestNoMountHidesTheServiceAccountToken(t *testing.T) {
	tokens := []string{"/var/run/secrets/kubernetes.io/serviceaccount", "/run/secrets/kubernetes.io/serviceaccount"}
	for _, v := range variants {
		for _, o := range parse(t, render(t, v.sets)) {
			spec := &o.Spec.Template.Spec
			for _, c := range append(append([]Container{}, spec.InitContainers...), spec.Containers...) {
				for _, mt := range c.VolumeMounts {
					for _, tok := range tokens {
						if p := path.Clean(mt.MountPath); p == tok || strings.HasPrefix(tok, p+"/") {
							t.Errorf("%s: %s %s's container %s mounts %s at %s, over the service account's token",
								v.name, o.Kind, o.Metadata.Name, c.Name, mt.Name, mt.MountPath)
						}
					}
				}
			}
		}
	}
}
