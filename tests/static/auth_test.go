package static

import (
	"sort"
	"testing"

	"uds-lab/tests/internal/lab"
)

// Who holds Prometheus's password (compose's secret): what must read or write
// series, and nothing else. The app, nginx and the other generators never do:
// a swapped-in app image runs code the lab does not control.
var passwordHolders = []string{"grafana", "k6", "prometheus", "prometheus-auth", "report"}

func TestOnlyReadersAndK6HoldThePrometheusPassword(t *testing.T) {
	p := loadCompose(t)
	var got []string
	for name, s := range p.Services {
		for _, sec := range s.Secrets {
			if sec.Source == "prometheus_password" {
				got = append(got, name)
			}
		}
	}
	sort.Strings(got)
	if len(got) != len(passwordHolders) {
		t.Fatalf("services given the Prometheus password: %v, want %v", got, passwordHolders)
	}
	for i := range got {
		if got[i] != passwordHolders[i] {
			t.Fatalf("services given the Prometheus password: %v, want %v", got, passwordHolders)
		}
	}
	if cmd := p.Services["prometheus"].Command; !contains(cmd, "--web.config.file=/web/web.yml") {
		t.Errorf("prometheus runs without its web config (basic auth): %v", cmd)
	}
}

// prometheus.yml cannot read the environment: its own scrape names the user
// .env sets, and the datasource Grafana is given takes it from there.
func TestPrometheusUserAgrees(t *testing.T) {
	user := lab.Env(t)["PROMETHEUS_USER"]
	var cfg struct {
		ScrapeConfigs []struct {
			Job       string `yaml:"job_name"`
			BasicAuth struct {
				Username     string `yaml:"username"`
				PasswordFile string `yaml:"password_file"`
			} `yaml:"basic_auth"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, lab.Path(t, "prometheus", "prometheus.yml"), &cfg)
	found := false
	for _, sc := range cfg.ScrapeConfigs {
		if sc.Job == "prometheus" {
			found = true
			if sc.BasicAuth.Username != user || sc.BasicAuth.PasswordFile != "/run/secrets/prometheus_password" {
				t.Errorf("prometheus.yml's own scrape logs in as %+v, want %q with compose's secret", sc.BasicAuth, user)
			}
		}
	}
	if !found {
		t.Error("prometheus.yml does not scrape Prometheus (the report reads its version from it)")
	}
	var ds struct {
		Datasources []struct {
			BasicAuth     bool              `yaml:"basicAuth"`
			BasicAuthUser string            `yaml:"basicAuthUser"`
			Secure        map[string]string `yaml:"secureJsonData"`
		} `yaml:"datasources"`
	}
	readYAML(t, lab.Path(t, "grafana", "provisioning", "datasources", "prometheus.yaml"), &ds)
	for _, d := range ds.Datasources {
		if !d.BasicAuth || d.BasicAuthUser != "${PROMETHEUS_USER}" || d.Secure["basicAuthPassword"] != "$__file{/run/secrets/prometheus_password}" {
			t.Errorf("Grafana's datasource does not log in to Prometheus as the lab's user with its secret: %+v", d)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
