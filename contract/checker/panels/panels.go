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

// Load reads the dashboards (*.json in dir) and maps each app metric to the
// panels that query it.
func Load(dir string) (map[string][]Panel, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no dashboards in %s", dir)
	}
	uses := map[string][]Panel{}
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
		}
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, p := range d.Panels {
			seen := map[string]bool{}
			for _, t := range p.Targets {
				for _, m := range AppMetrics(t.Expr) {
					if !seen[m] {
						seen[m] = true
						uses[m] = append(uses[m], Panel{d.Title, p.Title})
					}
				}
			}
		}
	}
	return uses, nil
}
