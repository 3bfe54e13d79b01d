package static

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"

	"uds-lab/contract/panels"
	"uds-lab/tests/internal/lab"
)

func scrapeTargets(t *testing.T) []string {
	t.Helper()
	var cfg struct {
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, lab.Path(t, "prometheus", "prometheus.yml"), &cfg)
	var targets []string
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	return targets
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// datasourceUIDs are the uids provisioned in grafana/provisioning/datasources.
func datasourceUIDs(t *testing.T) map[string]bool {
	t.Helper()
	files, _ := filepath.Glob(lab.Path(t, "grafana", "provisioning", "datasources", "*.yaml"))
	uids := map[string]bool{}
	for _, f := range files {
		var cfg struct {
			Datasources []struct {
				UID string `yaml:"uid"`
				URL string `yaml:"url"`
			} `yaml:"datasources"`
		}
		readYAML(t, f, &cfg)
		for _, ds := range cfg.Datasources {
			if ds.UID == "" {
				t.Errorf("%s: a datasource without a fixed uid", f)
			}
			uids[ds.UID] = true
		}
	}
	if len(uids) == 0 {
		t.Fatal("no datasource provisioned")
	}
	return uids
}

type dashboardFile struct {
	name string
	json map[string]any
}

func dashboards(t *testing.T) []dashboardFile {
	t.Helper()
	var out []dashboardFile
	files := lab.DashboardFiles(t)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		var d map[string]any
		if err := json.Unmarshal(files[name], &d); err != nil {
			t.Fatalf("%s: not JSON: %v", name, err)
		}
		out = append(out, dashboardFile{name, d})
	}
	return out
}

var readableUID = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{2,39}$`)

// Classic dashboard JSON (Grafana 13 file provisioning rejects the v2 schema),
// stable readable uids, no ids, and only datasources that are provisioned.
func TestDashboards(t *testing.T) {
	known := datasourceUIDs(t)
	seen := map[string]string{}
	for _, d := range dashboards(t) {
		name := d.name
		uid, _ := d.json["uid"].(string)
		if !readableUID.MatchString(uid) {
			t.Errorf("%s: uid %q is not a stable readable uid", name, uid)
		}
		if other, dup := seen[uid]; dup {
			t.Errorf("%s and %s share uid %q", name, other, uid)
		}
		seen[uid] = name
		if id, ok := d.json["id"]; !ok || id != nil {
			t.Errorf("%s: \"id\" must be null", name)
		}
		for _, v2 := range []string{"apiVersion", "spec", "kind", "elements"} {
			if _, ok := d.json[v2]; ok {
				t.Errorf("%s: has %q: v2 schema, which file provisioning rejects", name, v2)
			}
		}
		if _, ok := d.json["__inputs"]; ok {
			t.Errorf("%s: __inputs left from a UI export", name)
		}
		if _, ok := d.json["panels"].([]any); !ok {
			t.Errorf("%s: no panels list", name)
		}
		walk(d.json, func(key string, v any) {
			if key != "datasource" {
				return
			}
			ds, ok := v.(map[string]any)
			if !ok {
				t.Errorf("%s: datasource %v is not a {type, uid} reference", name, v)
				return
			}
			if uid, _ := ds["uid"].(string); !known[uid] {
				t.Errorf("%s: datasource uid %q is not provisioned", name, uid)
			}
		})
	}
}

// Every panel query parses with Prometheus's own PromQL parser, and every
// cAdvisor metric it uses is one cAdvisor documents, in a metric group the
// compose file enables (cAdvisor cannot run on the test bed).
func TestDashboardQueries(t *testing.T) {
	enabled := ""
	for _, f := range loadCompose(t).Services["cadvisor"].Command {
		if v, ok := strings.CutPrefix(f, "--enable_metrics="); ok {
			enabled = "," + v + ","
		}
	}
	samples := dashboardSamples(t)
	for _, q := range lab.PanelQueries(t) {
		names, err := lab.MetricNames(lab.Substitute(q.Expr, samples[q.Dashboard]))
		if err != nil {
			t.Errorf("%s: %s\n  %v", q, q.Expr, err)
			continue
		}
		for _, n := range names {
			if !strings.HasPrefix(n, "container_") {
				continue
			}
			group, documented := lab.CAdvisorMetrics[n]
			switch {
			case !documented:
				t.Errorf("%s: %s is not a documented cAdvisor metric", q, n)
			case group != "" && !strings.Contains(enabled, ","+group+","):
				t.Errorf("%s: %s needs --enable_metrics to include %q (compose has %q)", q, n, group, enabled)
			}
		}
	}
}

// Every panel that shows data has a query, each breakdown term of the
// catalogue has its difference on a panel, and every path has the catalogue's
// colour on every time series panel (the report draws it in the same colour).
func TestDashboardPanels(t *testing.T) {
	c := lab.ReadCatalogue(t)
	terms := map[string]bool{} // breakdown terms not yet found
	for _, term := range c.Breakdown.Terms {
		// A Kubernetes stand-in term has nothing to stand in for in compose's dashboards.
		if term.InsteadOf == "" {
			terms[term.Key] = true
		}
	}
	for _, d := range dashboards(t) {
		name := d.name
		var panels []struct {
			Type, Title string
			Targets     []struct{ Expr, LegendFormat string }
			FieldConfig struct {
				Overrides []struct {
					Matcher    struct{ ID, Options string }
					Properties []struct {
						ID    string
						Value struct{ FixedColor string }
					}
				}
			}
		}
		b, _ := json.Marshal(d.json["panels"])
		if err := json.Unmarshal(b, &panels); err != nil || len(panels) == 0 {
			t.Errorf("%s: no panels (%v)", name, err)
		}
		for _, p := range panels {
			if p.Type == "row" || p.Type == "text" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s / %q: no query", name, p.Title)
			}
			for i, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s / %q: query %d is empty", name, p.Title, i)
				}
				for _, term := range c.Breakdown.Terms {
					a, b := term.Paths[0], term.Paths[1]
					if regexp.MustCompile(`path="` + a + `".* - .*path="` + b + `"`).MatchString(tg.Expr) {
						delete(terms, term.Key)
					}
				}
			}
			if p.Type != "timeseries" {
				continue
			}
			colours := map[string]string{}
			for _, o := range p.FieldConfig.Overrides {
				for _, prop := range o.Properties {
					if o.Matcher.ID == "byName" && prop.ID == "color" {
						colours[o.Matcher.Options] = prop.Value.FixedColor
					}
				}
			}
			for _, path := range c.Order {
				if colours[path] != c.Paths[path].Colour {
					t.Errorf("%s / %q: path %s drawn in %q, catalogue.json says %s", name, p.Title, path, colours[path], c.Paths[path].Colour)
				}
			}
		}
	}
	for key := range terms {
		t.Errorf("breakdown term %s: no panel query subtracts its second path's latency from its first's", key)
	}
}

// Grafana's home dashboard and the dashboards folder point at files that exist.
func TestGrafanaWiring(t *testing.T) {
	g := loadCompose(t).Services["grafana"]
	mounts := map[string]string{} // container path -> repo path
	for _, v := range g.Volumes {
		if v.Type == "bind" {
			mounts[v.Target] = v.Source
		}
	}
	home := *g.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
	var provider struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, lab.Path(t, "grafana", "provisioning", "dashboards", "uds-lab.yaml"), &provider)
	for _, p := range append([]string{home}, provider.Providers[0].Options.Path) {
		found := false
		for target, source := range mounts {
			if rel, ok := strings.CutPrefix(p, target); ok {
				if _, err := os.Stat(source + rel); err == nil {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("grafana: %s is not a mounted file or folder of the repository", p)
		}
	}
}

// The dashboard JSON is what grafana/dashboards.py writes.
func TestDashboardsGenerated(t *testing.T) {
	cmd := exec.Command("python3", lab.Path(t, "grafana", "dashboards.py"), "--check")
	cmd.Env = append(os.Environ(), "PYTHONPATH="+lab.Root(t)) // the report package, as make dashboards sets it
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}

// Every dashboard field is one Grafana reads: grafana/schema/check.mjs checks
// the JSON against Grafana's own dashboard types (@grafana/schema) with the
// TypeScript compiler (scripts/test-deps.sh installs both, as make test does).
func TestDashboardsMatchGrafanasTypes(t *testing.T) {
	dir := lab.Path(t, "grafana", "schema")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@grafana", "schema")); err != nil {
		t.Fatalf("%s has no node_modules: run scripts/test-deps.sh (make test does)", dir)
	}
	cmd := exec.Command("node", "check.mjs")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
}

// walk calls fn for every key/value pair in a decoded JSON tree.
func walk(v any, fn func(key string, v any)) {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			fn(k, child)
			walk(child, fn)
		}
	case []any:
		for _, child := range x {
			walk(child, fn)
		}
	}
}

// make contract names the panels an app leaves empty by finding the app's
// metrics in the dashboards with a pattern (contract/checker/panels); it must
// find exactly what Prometheus's parser finds: app_* metrics, and any other
// selected with job="app".
func TestContractFindsAppMetrics(t *testing.T) {
	total := 0
	samples := dashboardSamples(t)
	for _, q := range lab.PanelQueries(t) {
		e, err := parser.ParseExpr(lab.Substitute(q.Expr, samples[q.Dashboard]))
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		want := []string{}
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			vs, ok := n.(*parser.VectorSelector)
			if !ok {
				return nil
			}
			app := strings.HasPrefix(vs.Name, "app_")
			for _, m := range vs.LabelMatchers {
				app = app || (m.Name == "job" && m.Type == labels.MatchEqual && m.Value == "app")
			}
			if app && !slices.Contains(want, vs.Name) {
				want = append(want, vs.Name)
			}
			return nil
		})
		slices.Sort(want)
		total += len(want)
		if got := panels.AppMetrics(q.Expr); !slices.Equal(got, want) {
			t.Errorf("%s: contract finds %v, the parser %v\n  %s", q, got, want, q.Expr)
		}
	}
	if total == 0 {
		t.Error("no app metric in any panel")
	}
}

// An app's metrics are optional (issue 12): every panel that reads one says,
// under its ⓘ, that an app without metrics leaves it empty and why.
func TestAppPanelsSayTheyMayBeEmpty(t *testing.T) {
	n := 0
	for _, d := range dashboards(t) {
		var ps []struct {
			Title, Description string
			Targets            []struct{ Expr string }
		}
		b, _ := json.Marshal(d.json["panels"])
		if err := json.Unmarshal(b, &ps); err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			for _, tg := range p.Targets {
				if len(panels.AppMetrics(tg.Expr)) == 0 {
					continue
				}
				n++
				if !strings.Contains(p.Description, "Empty for an app that exports no metrics") {
					t.Errorf("%s / %q reads the app's metrics but does not say an app without them leaves it empty", d.name, p.Title)
				}
				break
			}
		}
	}
	if n == 0 {
		t.Error("no panel reads the app's metrics")
	}
}
