package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"

	"uds-lab/contract/panels"
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

// PanelQueries reads every panel and annotation query of
// grafana/dashboards/*.json (as the contract checker reads them).
func PanelQueries(t testing.TB) []PanelQuery {
	t.Helper()
	qs, err := panels.Queries(Path(t, "grafana", "dashboards"))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]PanelQuery, len(qs))
	for i, q := range qs {
		out[i] = PanelQuery{q.File, q.Panel, q.Expr}
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
// that must be on for it ("" = always exported). The static tests check the
// panels against this list; e2e runs them against cAdvisor's library on the
// test bed (tests/e2e/standins/cadvisor), where each must return data.
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

// UsesCAdvisor tells whether any metric of expr comes from cAdvisor (e2e
// names those panels among the ones proven with live data).
func UsesCAdvisor(names []string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, "container_") {
			return true
		}
	}
	return false
}

// ZeroFallback tells whether expr is `A or <zero>` at its top, where the zero
// side (`vector(0)`, or anything multiplied by 0) always has data: such a
// query returns data whether A has any or not, so "it returns data" proves
// nothing about A. Their panels are proven by an event that makes A non-zero.
func ZeroFallback(expr string) (bool, error) {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return false, err
	}
	return zeroFallback(e), nil
}

func zeroFallback(e parser.Expr) bool {
	switch n := e.(type) {
	case *parser.ParenExpr:
		return zeroFallback(n.Expr)
	case *parser.BinaryExpr:
		if n.Op == parser.LOR {
			return isZero(n.RHS) || isZero(n.LHS) || zeroFallback(n.LHS) || zeroFallback(n.RHS)
		}
	}
	return false
}

// isZero: vector(0), or an expression times the number 0.
func isZero(e parser.Expr) bool {
	switch n := e.(type) {
	case *parser.ParenExpr:
		return isZero(n.Expr)
	case *parser.Call:
		if n.Func.Name == "vector" && len(n.Args) == 1 {
			if num, ok := n.Args[0].(*parser.NumberLiteral); ok && num.Val == 0 {
				return true
			}
		}
	case *parser.BinaryExpr:
		if n.Op == parser.MUL {
			for _, side := range []parser.Expr{n.LHS, n.RHS} {
				if num, ok := side.(*parser.NumberLiteral); ok && num.Val == 0 {
					return true
				}
			}
		}
	}
	return false
}
