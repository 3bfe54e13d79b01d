package static

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"

	"uds-lab/tests/internal/lab"
)

// labelSet is the label names a series may carry.
type labelSet map[string]bool

func setOf(names ...string) labelSet {
	s := labelSet{}
	for _, n := range names {
		s[n] = true
	}
	return s
}

func (s labelSet) String() string { return strings.Join(slices.Sorted(maps.Keys(s)), ", ") }

// scraped are the labels Prometheus puts on every series it scrapes.
var scraped = []string{"job", "instance"}

// describeMetrics is a test added (by go test -overlay, the repository's tree
// untouched) to a service's own package: it prints every metric its registry
// describes, as the service registers it, in prometheus.Desc's String form.
const describeMetrics = `package main

import (
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestLabDescribeMetrics(t *testing.T) {
	ch := make(chan *prometheus.Desc)
	go func() { %s.Describe(ch); close(ch) }()
	var out strings.Builder
	for d := range ch {
		out.WriteString(d.String() + "\n")
	}
	if err := os.WriteFile(os.Getenv("LAB_DESCRIBE_OUT"), []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
`

var descString = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", help: .*, constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}\}$`)

// registeredMetrics builds a service's registry (registry: the Go expression
// that makes it, in the service's package main) and returns each metric it
// registers with its labels, plus the labels Prometheus adds when it scrapes.
func registeredMetrics(t *testing.T, service, registry string) map[string]labelSet {
	t.Helper()
	dir := lab.Path(t, strings.Split(service, "/")...)
	tmp := t.TempDir()
	src, out, overlay := filepath.Join(tmp, "describe_test.go"), filepath.Join(tmp, "descs"), filepath.Join(tmp, "overlay.json")
	must(t, os.WriteFile(src, []byte(strings.Replace(describeMetrics, "%s", registry, 1)), 0o644))
	o, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(dir, "zz_lab_describe_test.go"): src}})
	must(t, err)
	must(t, os.WriteFile(overlay, o, 0o644))
	cmd := exec.Command("go", "test", "-count=1", "-overlay="+overlay, "-run=^TestLabDescribeMetrics$", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LAB_DESCRIBE_OUT="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("describing %s's metrics: %v\n%s", service, err, b)
	}
	b, err := os.ReadFile(out)
	must(t, err)
	metrics := map[string]labelSet{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		m := descString.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%s: cannot read %q", service, line)
		}
		ls := setOf(scraped...)
		for _, c := range strings.Split(m[2], ",") {
			if name, _, ok := strings.Cut(c, "="); ok {
				ls[name] = true
			}
		}
		for _, v := range strings.Split(m[3], ",") {
			if v = strings.TrimSuffix(strings.TrimPrefix(v, "c("), ")"); v != "" {
				ls[v] = true
			}
		}
		metrics[m[1]] = ls
	}
	if len(metrics) == 0 {
		t.Fatalf("%s registers no metric", service)
	}
	return metrics
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The tags k6 puts on what it pushes by remote write (k6 adds no job or
// instance). From loadgen/load.js: options.tags (testid, on every metric),
// each scenario's tags (on everything its iterations emit), the systemTags it
// keeps (scenario on all of a scenario's metrics, the rest on requests and
// checks) and the requests' own tags (name, path and, in a mixed phase,
// block). TestK6TagsAreLoadJs holds these to load.js.
var (
	k6Global       = []string{"testid"}
	k6ScenarioTags = []string{"path", "workload", "round", "phase", "step", "level"}
	k6SystemTags   = []string{"scenario", "name", "method", "status", "expected_response", "check", "error_code"}
	k6RequestTags  = []string{"name", "path", "block"}
)

// k6Metrics: k6's metrics as its Prometheus remote-write output names them
// (k6_<metric>, counters _total, trends in seconds as native histograms,
// rates _rate), with the tags k6 gives each kind (k6's docs, "Tags and
// Groups": vus and vus_max carry only the run's global tags).
func k6Metrics() map[string]labelSet {
	all := func(groups ...[]string) labelSet { return setOf(slices.Concat(groups...)...) }
	http := all(k6Global, k6ScenarioTags, k6SystemTags, k6RequestTags)
	iteration := all(k6Global, k6ScenarioTags, []string{"scenario"})
	out := map[string]labelSet{
		"k6_vus":              all(k6Global),
		"k6_vus_max":          all(k6Global),
		"k6_iterations_total": iteration, "k6_dropped_iterations_total": iteration,
		"k6_iteration_duration_seconds": iteration,
		"k6_checks_rate":                all(k6Global, k6ScenarioTags, k6SystemTags, k6RequestTags),
	}
	for _, m := range []string{"reqs_total", "req_failed_rate", "req_duration_seconds", "req_blocked_seconds",
		"req_connecting_seconds", "req_tls_handshaking_seconds", "req_sending_seconds", "req_waiting_seconds",
		"req_receiving_seconds"} {
		out["k6_http_"+m] = http
	}
	return out
}

// exporterMetrics are the series of the exporters the lab runs but does not
// build, with the labels each has (with job and instance, as Prometheus
// scrapes them): only the metrics the dashboards read; a new one must be added
// here, from the exporter's source.
func exporterMetrics(t *testing.T) map[string]labelSet {
	t.Helper()
	with := func(names ...string) labelSet { return setOf(append(names, scraped...)...) }
	out := map[string]labelSet{
		// Prometheus's own, on every target it scrapes.
		"up": with(),
		// node-exporter (prometheus/node_exporter, collector/cpu.go, stat_linux.go, loadavg.go).
		"node_cpu_seconds_total":      with("cpu", "mode"),
		"node_context_switches_total": with(),
		"node_intr_total":             with(),
		"node_load1":                  with(),
		// nginx-prometheus-exporter (nginxinc/nginx-prometheus-exporter, collector/nginx.go):
		// stub_status's counters, no labels of their own.
		"nginx_connections_active":   with(),
		"nginx_connections_waiting":  with(),
		"nginx_connections_reading":  with(),
		"nginx_connections_writing":  with(),
		"nginx_connections_accepted": with(),
		"nginx_connections_handled":  with(),
		"nginx_http_requests_total":  with(),
		"nginx_up":                   with(),
	}
	// cAdvisor (google/cadvisor, metrics/prometheus.go): every container series
	// has id, name and image, and container_label_<label> for each label
	// compose's --whitelisted_container_labels keeps (--store_container_labels=false);
	// CPU usage adds cpu, network series interface.
	base := with("id", "name", "image")
	for _, f := range loadCompose(t).Services["cadvisor"].Command {
		if v, ok := strings.CutPrefix(f, "--whitelisted_container_labels="); ok {
			for _, l := range strings.Split(v, ",") {
				base["container_label_"+regexp.MustCompile(`[^a-zA-Z0-9_]`).ReplaceAllString(l, "_")] = true
			}
		}
	}
	for name := range lab.CAdvisorMetrics {
		ls := maps.Clone(base)
		switch {
		case name == "container_cpu_usage_seconds_total":
			ls["cpu"] = true
		case strings.HasPrefix(name, "container_network_"):
			ls["interface"] = true
		}
		out[name] = ls
	}
	return out
}

// labMetrics: every series the dashboards may read, with its labels (worked
// out once per test binary: it builds two services' tests).
func labMetrics(t *testing.T) map[string]labelSet {
	t.Helper()
	if labMetricsOnce == nil {
		labMetricsOnce = readLabMetrics(t)
	}
	return labMetricsOnce
}

var labMetricsOnce map[string]labelSet

func readLabMetrics(t *testing.T) map[string]labelSet {
	t.Helper()
	out := exporterMetrics(t)
	maps.Copy(out, k6Metrics())
	// The lab's Go services and its generator also export go_* and
	// process_*: the same names, the same labels (openloop's carry testid).
	maps.Copy(out, registeredMetrics(t, "services/nginx-log-exporter", `NewMetrics([]string{"tcp"}).Registry`))
	maps.Copy(out, registeredMetrics(t, "services/app", "NewMetrics().Registry"))
	maps.Copy(out, registeredMetrics(t, "loadgen/openloop", `newMetrics("t").reg`))
	return out
}

// labelChecker works out which labels a PromQL expression's series carry and
// reports every matcher, grouping or vector matching on a label they lack.
type labelChecker struct {
	metrics  map[string]labelSet
	problems []string
}

func (c *labelChecker) fail(format string, args ...any) {
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

// metric is a metric's labels; a histogram's or a summary's _bucket (with le),
// _sum and _count series are its own.
func (c *labelChecker) metric(name string) (labelSet, bool) {
	if ls, ok := c.metrics[name]; ok {
		return ls, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && c.metrics[base] != nil {
			ls := maps.Clone(c.metrics[base])
			if suffix == "_bucket" {
				ls["le"] = true
			}
			return ls, true
		}
	}
	return nil, false
}

// labels returns the labels e's series may carry, nil where they cannot be
// known (a metric the lab does not have: reported).
func (c *labelChecker) labels(e parser.Expr) labelSet {
	switch n := e.(type) {
	case *parser.VectorSelector:
		return c.selector(n)
	case *parser.MatrixSelector:
		return c.labels(n.VectorSelector)
	case *parser.SubqueryExpr:
		return c.labels(n.Expr)
	case *parser.ParenExpr:
		return c.labels(n.Expr)
	case *parser.UnaryExpr:
		return c.labels(n.Expr)
	case *parser.StepInvariantExpr:
		return c.labels(n.Expr)
	case *parser.NumberLiteral, *parser.StringLiteral:
		return labelSet{}
	case *parser.Call:
		return c.call(n)
	case *parser.AggregateExpr:
		return c.aggregate(n)
	case *parser.BinaryExpr:
		return c.binary(n)
	}
	c.fail("%T: not understood by the test", e)
	return nil
}

func (c *labelChecker) selector(n *parser.VectorSelector) labelSet {
	ls, ok := c.metric(n.Name)
	if !ok {
		c.fail("%s: no such metric in the lab (the app, nginx-log-exporter, k6, or the exporters' table in this test)", n.Name)
		return nil
	}
	for _, m := range n.LabelMatchers {
		if m.Name != "__name__" && !ls[m.Name] {
			c.fail("%s has no label %q to match (%s); it has: %s", n.Name, m.Name, m, ls)
		}
	}
	return ls
}

func (c *labelChecker) call(n *parser.Call) labelSet {
	args := make([]labelSet, len(n.Args))
	for i, a := range n.Args {
		args[i] = c.labels(a)
	}
	switch n.Func.Name {
	case "vector", "time", "scalar", "absent", "absent_over_time":
		return labelSet{}
	case "histogram_quantile":
		if args[1] == nil {
			return nil
		}
		ls := maps.Clone(args[1])
		delete(ls, "le")
		return ls
	case "label_replace", "label_join":
		if args[0] == nil {
			return nil
		}
		ls := maps.Clone(args[0])
		ls[n.Args[1].(*parser.StringLiteral).Val] = true
		return ls
	}
	for i, a := range n.Args { // rate(v), clamp_min(v, 0), ...: v's labels
		if a.Type() == parser.ValueTypeVector || a.Type() == parser.ValueTypeMatrix {
			return args[i]
		}
	}
	return labelSet{}
}

func (c *labelChecker) aggregate(n *parser.AggregateExpr) labelSet {
	inner := c.labels(n.Expr)
	if n.Param != nil {
		c.labels(n.Param)
	}
	if inner == nil {
		return nil
	}
	for _, l := range n.Grouping {
		if !inner[l] {
			c.fail("%s %s (%s): the series it aggregates have no label %q; they have: %s",
				n.Op, map[bool]string{true: "without", false: "by"}[n.Without], strings.Join(n.Grouping, ", "), l, inner)
		}
	}
	switch {
	case n.Op == parser.TOPK || n.Op == parser.BOTTOMK || n.Op == parser.LIMITK || n.Op == parser.LIMIT_RATIO:
		return inner
	case n.Without:
		ls := maps.Clone(inner)
		for _, l := range n.Grouping {
			delete(ls, l)
		}
		return ls
	}
	ls := setOf(n.Grouping...)
	if n.Op == parser.COUNT_VALUES {
		ls[n.Param.(*parser.StringLiteral).Val] = true
	}
	return ls
}

func (c *labelChecker) binary(n *parser.BinaryExpr) labelSet {
	l, r := c.labels(n.LHS), c.labels(n.RHS)
	switch {
	case n.LHS.Type() == parser.ValueTypeScalar:
		return r
	case n.RHS.Type() == parser.ValueTypeScalar:
		return l
	case l == nil || r == nil:
		return nil
	}
	vm := n.VectorMatching
	if vm != nil && vm.On {
		for _, name := range vm.MatchingLabels {
			for side, ls := range map[string]labelSet{"left": l, "right": r} {
				if !ls[name] {
					c.fail("on(%s): the %s side has no label %q; it has: %s", strings.Join(vm.MatchingLabels, ", "), side, name, ls)
				}
			}
		}
	}
	switch {
	case n.Op == parser.LOR:
		out := maps.Clone(l)
		maps.Copy(out, r)
		return out
	case vm != nil && vm.Card == parser.CardManyToOne:
		return c.include(vm.Include, l, r, "group_left")
	case vm != nil && vm.Card == parser.CardOneToMany:
		return c.include(vm.Include, r, l, "group_right")
	}
	return l
}

// include: a group_left's (group_right's) result, the many side's labels and
// those it copies from the one side, which must have them.
func (c *labelChecker) include(include []string, many, one labelSet, how string) labelSet {
	ls := maps.Clone(many)
	for _, name := range include {
		if !one[name] {
			c.fail("%s(%s): the side it copies from has no label %q; it has: %s", how, strings.Join(include, ", "), name, one)
		}
		ls[name] = true
	}
	return ls
}

// Every label a panel or annotation query matches on (a selector's
// {label=...}, by/without, on/group_left) is one its metric has as the lab
// registers it: the app's and nginx-log-exporter's registries (built from
// their code), k6's tags (load.js) and the exporters' labels. A panel that
// filters nginx_location_* by route (the app's label) instead of path, or
// groups the app's requests by path, matches nothing and stays empty in
// Grafana, while the PromQL parses.
func TestDashboardQueriesMatchRegisteredLabels(t *testing.T) {
	c := &labelChecker{metrics: labMetrics(t)}
	samples := dashboardSamples(t)
	n := 0
	for _, q := range lab.PanelQueries(t) {
		e, err := parser.ParseExpr(lab.Substitute(q.Expr, samples[q.Dashboard]))
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		c.problems = nil
		c.labels(e)
		for _, p := range c.problems {
			t.Errorf("%s: %s\n  in %s", q, p, q.Expr)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no panel query")
	}
	// The variables' own queries: label_values(metric, label).
	for _, d := range dashboards(t) {
		for name, v := range dashboardVariables(t, d) {
			def, _ := v["definition"].(string)
			m := labelValues.FindStringSubmatch(def)
			if m == nil {
				continue
			}
			if ls, ok := c.metric(m[1]); !ok || !ls[m[2]] {
				t.Errorf("%s: variable %s lists label %s of %s, which it does not have (%s)", d.name, name, m[2], m[1], ls)
			}
		}
	}
}

var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*(\w+)\s*\)$`)

// The checker itself: each kind of wrong label it must see.
func TestLabelCheckerCatchesWrongLabels(t *testing.T) {
	c := &labelChecker{metrics: map[string]labelSet{
		"nginx_location_requests_total":           setOf("path", "status", "job", "instance"),
		"nginx_location_upstream_connect_seconds": setOf("path", "job", "instance"),
		"app_http_requests_total":                 setOf("listener", "route", "code", "job", "instance"),
		"k6_http_reqs_total":                      setOf("path", "testid"),
	}}
	for expr, want := range map[string]string{
		`sum(rate(nginx_location_requests_total{route="/ping"}[1m]))`:                                                    `no label "route"`,
		`sum by (route) (rate(nginx_location_requests_total[1m]))`:                                                       `no label "route"`,
		`histogram_quantile(0.5, sum by (path, le) (rate(nginx_location_upstream_connect_seconds_bucket[1m])))`:          ``,
		`histogram_quantile(0.5, sum by (path) (rate(app_http_requests_total[1m])))`:                                     `no label "path"`,
		`sum by (path) (rate(k6_http_reqs_total[1m])) / on(route) sum by (path) (rate(k6_http_reqs_total[1m]))`:          `on(route)`,
		`0 * topk(1, sum by (path) (rate(k6_http_reqs_total[1m]))) + on() group_left(code) sum(app_http_requests_total)`: `group_left(code)`,
		`sum by (path) (sum by (listener) (app_http_requests_total))`:                                                    `no label "path"`,
		`sum(rate(nginx_location_requests_total{path!="other"}[1m])) or sum by (code) (app_http_requests_total)`:         ``,
		`sum(nginx_location_request_seconds)`:                                                                            `no such metric`,
	} {
		e, err := parser.ParseExpr(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		c.problems = nil
		c.labels(e)
		got := strings.Join(c.problems, "; ")
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s: got %q, want a problem with %q", expr, got, want)
		}
	}
}

// k6's tags in this test are load.js's: the system tags it keeps, and every
// other tag named in it.
// loadgen/load.js, which users run on k6's official image (GENERATOR=k6) and
// the lab never runs, is checked against k6's published types (@types/k6)
// with the TypeScript compiler: a misspelt k6 API fails (loadgen/k6).
func TestLoadJsMatchesK6sTypes(t *testing.T) {
	dir := lab.Path(t, "loadgen", "k6")
	tsc := filepath.Join(dir, "node_modules", "typescript", "bin", "tsc")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@types", "k6")); err != nil {
		t.Fatalf("%s has no node_modules: run scripts/test-deps.sh (make test does)", dir)
	}
	cmd := exec.Command("node", tsc, "-p", "tsconfig.json")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tsc on loadgen/load.js: %v\n%s", err, out)
	}
}

func TestK6TagsAreLoadJs(t *testing.T) {
	b, err := os.ReadFile(lab.Path(t, "loadgen", "load.js"))
	must(t, err)
	src := string(b)
	m := regexp.MustCompile(`systemTags:\s*\[([^\]]*)\]`).FindStringSubmatch(src)
	if m == nil {
		t.Fatal("load.js: no systemTags")
	}
	var system []string
	for _, s := range regexp.MustCompile(`'([a-z_]+)'`).FindAllStringSubmatch(m[1], -1) {
		system = append(system, s[1])
	}
	if !slices.Equal(system, k6SystemTags) {
		t.Errorf("load.js keeps the system tags %v; this test has %v", system, k6SystemTags)
	}
	for _, tag := range slices.Concat(k6Global, k6ScenarioTags, k6RequestTags) {
		if !regexp.MustCompile(`(\{|,|\btags\.)\s*` + tag + `\b`).MatchString(src) {
			t.Errorf("load.js sets no tag %s (this test lists it)", tag)
		}
	}
}

// legendLabel is a {{label}} in a legend or an annotation's title.
var legendLabel = regexp.MustCompile(`\{\{\s*([a-zA-Z_]\w*)\s*\}\}`)

// Every {{label}} a panel's legend or an annotation's title shows is a label
// its query's result has: one that the aggregation dropped shows as an empty
// name, and every series of the panel looks alike.
func TestDashboardLegendsShowResultLabels(t *testing.T) {
	c := &labelChecker{metrics: labMetrics(t)}
	samples := dashboardSamples(t)
	n := 0
	for _, d := range dashboards(t) {
		var shown []struct{ where, expr, format string }
		panels, _ := d.json["panels"].([]any)
		for _, p := range panels {
			pm, _ := p.(map[string]any)
			targets, _ := pm["targets"].([]any)
			for _, tg := range targets {
				tm, _ := tg.(map[string]any)
				expr, _ := tm["expr"].(string)
				legend, _ := tm["legendFormat"].(string)
				shown = append(shown, struct{ where, expr, format string }{fmt.Sprintf("%q", pm["title"]), expr, legend})
			}
		}
		annotations, _ := d.json["annotations"].(map[string]any)
		list, _ := annotations["list"].([]any)
		for _, a := range list {
			am, _ := a.(map[string]any)
			expr, _ := am["expr"].(string)
			title, _ := am["titleFormat"].(string)
			tags, _ := am["tagKeys"].(string)
			format := title
			for _, k := range strings.Split(tags, ",") {
				if k = strings.TrimSpace(k); k != "" {
					format += " {{" + k + "}}"
				}
			}
			shown = append(shown, struct{ where, expr, format string }{fmt.Sprintf("annotation %q", am["name"]), expr, format})
		}
		for _, s := range shown {
			e, err := parser.ParseExpr(lab.Substitute(s.expr, samples[d.name]))
			if err != nil {
				t.Errorf("%s / %s: %v", d.name, s.where, err)
				continue
			}
			c.problems = nil
			ls := c.labels(e)
			for _, m := range legendLabel.FindAllStringSubmatch(s.format, -1) {
				n++
				if ls != nil && !ls[m[1]] {
					t.Errorf("%s / %s shows {{%s}}, which its query's result has not (it has: %s)\n  %s", d.name, s.where, m[1], ls, s.expr)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no legend shows a label")
	}
}
