package static

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// grafanaVariable is Grafana's own pattern for a variable reference in a
// string it interpolates (public/app/features/variables/utils.ts,
// variableRegex): $name, [[name]] or [[name:format]], ${name}, ${name.field}
// or ${name:format}.
var grafanaVariable = regexp.MustCompile(`\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]|\$\{(\w+)(?:\.([^:^\}]+))?(?::([^\}]+))?\}`)

// grafanaBuiltins are the variables Grafana defines itself (its docs: "Global
// variables", and the data-link variables ${__field.*}, ${__series.*},
// ${__value.*}, ${__data.*}, ${__url.*}); "__all" is the value of an All
// selection, as the variables' "current" holds it. Any other name a dashboard
// uses must be one of its own variables.
var grafanaBuiltins = map[string]bool{
	"__interval": true, "__interval_ms": true, "__rate_interval": true, "__rate_interval_ms": true,
	"__range": true, "__range_s": true, "__range_ms": true, "__from": true, "__to": true, "__now": true,
	"__name": true, "__dashboard": true, "__org": true, "__user": true, "__timezone": true, "__all": true,
	"__field": true, "__series": true, "__value": true, "__data": true, "__url": true,
	"__url_time_range": true, "__all_variables": true, "__cell": true,
}

// dashboardVariables are the names in a dashboard's templating.list.
func dashboardVariables(t *testing.T, d dashboardFile) map[string]map[string]any {
	t.Helper()
	vars := map[string]map[string]any{}
	templating, _ := d.json["templating"].(map[string]any)
	list, _ := templating["list"].([]any)
	for _, v := range list {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if name == "" {
			t.Errorf("%s: a variable without a name: %v", d.name, v)
			continue
		}
		vars[name] = m
	}
	return vars
}

// variableUses finds every Grafana variable any string of the dashboard uses
// (queries, titles, descriptions, links, annotations, text panels, variable
// queries: Grafana interpolates them all), as name -> where (a JSON path).
func variableUses(v any, at string, uses map[string][]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			variableUses(child, at+"."+k, uses)
		}
	case []any:
		for i, child := range x {
			variableUses(child, fmt.Sprintf("%s[%d]", at, i), uses)
		}
	case string:
		for _, m := range grafanaVariable.FindAllStringSubmatch(x, -1) {
			name := m[1] + m[2] + m[4] // exactly one of the three forms matched
			if !slices.Contains(uses[name], at) {
				uses[name] = append(uses[name], at)
			}
		}
	}
}

// A variable a dashboard uses but does not define is left as it is by Grafana:
// `cpu=~"$cores"` matches no series and the panel is empty, with no error
// anywhere (issue 31: two panels of the paths dashboard were). Every variable
// a dashboard uses is one of its own or one of Grafana's.
func TestDashboardsUseOnlyTheirVariables(t *testing.T) {
	for _, d := range dashboards(t) {
		defined := dashboardVariables(t, d)
		uses := map[string][]string{}
		variableUses(d.json, "", uses)
		for name, where := range uses {
			if defined[name] == nil && !grafanaBuiltins[name] {
				t.Errorf("%s uses $%s, which is not among its variables (%s) nor Grafana's own, at:\n  %s",
					d.name, name, strings.Join(slices.Sorted(maps.Keys(defined)), ", "), strings.Join(where, "\n  "))
			}
		}
	}
}

// grafanaBuiltinSamples give Grafana's own variables a value for parsing.
var grafanaBuiltinSamples = map[string]string{"__rate_interval": "1m", "__interval": "15s", "__range": "15m"}

// dashboardSamples gives the variables one dashboard defines a value, the one
// it starts with (a query variable's All, a textbox's default), and Grafana's
// own a sample: only what the dashboard defines is substituted, so a query
// using a variable it does not define keeps its $name.
func dashboardSamples(t *testing.T) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, d := range dashboards(t) {
		s := map[string]string{}
		for k, v := range grafanaBuiltinSamples {
			s[k] = v
		}
		for name, v := range dashboardVariables(t, d) {
			value := ""
			switch v["type"] {
			case "query", "custom":
				value, _ = v["allValue"].(string)
			case "textbox", "constant":
				value, _ = v["query"].(string)
			}
			if value == "" {
				t.Fatalf("%s: variable %s (type %v) has no value the tests know how to read", d.name, name, v["type"])
			}
			s[name] = value
		}
		out[d.name] = s
	}
	return out
}
