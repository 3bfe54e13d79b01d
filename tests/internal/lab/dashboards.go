package lab

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// PanelQuery is one query of one panel of a provisioned dashboard.
type PanelQuery struct {
	Dashboard string // file name, e.g. paths.json
	Panel     string // panel title
	Expr      string // PromQL with Grafana's variables
}

func (q PanelQuery) String() string { return fmt.Sprintf("%s / %q", q.Dashboard, q.Panel) }

// DashboardFiles reads grafana/dashboards/*.json: file name -> contents.
func DashboardFiles(t testing.TB) map[string][]byte {
	t.Helper()
	files, _ := filepath.Glob(Path(t, "grafana", "dashboards", "*.json"))
	if len(files) == 0 {
		t.Fatal("no dashboards in grafana/dashboards")
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

// PanelQueries reads every panel query of grafana/dashboards/*.json.
func PanelQueries(t testing.TB) []PanelQuery {
	t.Helper()
	var out []PanelQuery
	files := DashboardFiles(t)
	for _, f := range slices.Sorted(maps.Keys(files)) {
		b := files[f]
		var d struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
			Annotations struct {
				List []struct {
					Name string `json:"name"`
					Expr string `json:"expr"`
				} `json:"list"`
			} `json:"annotations"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		// Annotation queries are checked like panels'.
		for _, a := range d.Annotations.List {
			out = append(out, PanelQuery{f, "annotation " + a.Name, a.Expr})
		}
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				out = append(out, PanelQuery{f, p.Title, tg.Expr})
			}
		}
	}
	return out
}

// Substitute replaces Grafana's variables in expr; longer names first so that
// $__rate_interval is not read as $__rate.
func Substitute(expr string, vars map[string]string) string {
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	pairs := make([]string, 0, 2*len(names))
	for _, k := range names {
		pairs = append(pairs, "$"+k, vars[k])
	}
	return strings.NewReplacer(pairs...).Replace(expr)
}

// MetricNames parses expr with Prometheus's own PromQL parser and returns the
// metric names it selects.
func MetricNames(expr string) ([]string, error) {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" {
			seen[vs.Name] = true
		}
		return nil
	})
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// CAdvisorMetrics are the cAdvisor metrics the dashboards use, each listed in
// cAdvisor's docs/storage/prometheus.md (v0.60), with the -enable_metrics group
// that must be on for it ("" = always exported). cAdvisor cannot run on the
// test bed, so its panels are checked against this list instead of live data.
var CAdvisorMetrics = map[string]string{
	"container_cpu_usage_seconds_total":         "cpu",
	"container_cpu_cfs_periods_total":           "cpu",
	"container_cpu_cfs_throttled_periods_total": "cpu",
	"container_memory_working_set_bytes":        "memory",
	"container_network_receive_bytes_total":     "network",
	"container_network_transmit_bytes_total":    "network",
	"container_spec_cpu_quota":                  "",
	"container_spec_cpu_period":                 "",
	"container_spec_memory_limit_bytes":         "",
}

// UsesCAdvisor tells whether any metric of expr comes from cAdvisor.
func UsesCAdvisor(names []string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, "container_") {
			return true
		}
	}
	return false
}
