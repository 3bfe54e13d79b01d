// Package panels finds which dashboard panels read which of the app's metrics,
// so that `make contract` can name the panels an app leaves empty.
package panels

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Panel is one panel of a provisioned dashboard.
type Panel struct {
	Dashboard string `json:"dashboard"` // its title
	Title     string `json:"title"`
}

func (p Panel) String() string { return p.Dashboard + " / " + p.Title }

// The app's metrics in the dashboards' queries: every app_* metric, and any
// other selected with job="app" (process_*, go_*). tests/static checks this
// against Prometheus's own PromQL parser.
var (
	appPrefixed = regexp.MustCompile(`\bapp_[a-zA-Z0-9_:]*`)
	appJob      = regexp.MustCompile(`\b([a-zA-Z_:][a-zA-Z0-9_:]*)\{[^}]*\bjob="app"`)
)

// AppMetrics returns the app metric names used by expr.
func AppMetrics(expr string) []string {
	seen := map[string]bool{}
	for _, m := range appPrefixed.FindAllString(expr, -1) {
		seen[m] = true
	}
	for _, m := range appJob.FindAllStringSubmatch(expr, -1) {
		seen[m[1]] = true
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Query is one query of a provisioned dashboard: a panel's target, or an
// annotation's (Panel is then "annotation <name>").
type Query struct {
	File      string // the dashboard's file name, e.g. paths.json
	Dashboard string // its title
	Panel     string
	Expr      string
}

// Queries reads every panel and annotation query of the dashboards (*.json in dir).
func Queries(dir string) ([]Query, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no dashboards in %s", dir)
	}
	var out []Query
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var d struct {
			Title  string `json:"title"`
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
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		file := filepath.Base(f)
		for _, a := range d.Annotations.List {
			out = append(out, Query{file, d.Title, "annotation " + a.Name, a.Expr})
		}
		for _, p := range d.Panels {
			for _, t := range p.Targets {
				out = append(out, Query{file, d.Title, p.Title, t.Expr})
			}
		}
	}
	return out, nil
}

// Load reads the dashboards (*.json in dir) and maps each app metric to the
// panels that query it.
func Load(dir string) (map[string][]Panel, error) {
	queries, err := Queries(dir)
	if err != nil {
		return nil, err
	}
	uses := map[string][]Panel{}
	seen := map[Panel]map[string]bool{}
	for _, q := range queries {
		if strings.HasPrefix(q.Panel, "annotation ") {
			continue // an annotation is no panel left empty
		}
		p := Panel{q.Dashboard, q.Panel}
		if seen[p] == nil {
			seen[p] = map[string]bool{}
		}
		for _, m := range AppMetrics(q.Expr) {
			if !seen[p][m] {
				seen[p][m] = true
				uses[m] = append(uses[m], p)
			}
		}
	}
	return uses, nil
}
