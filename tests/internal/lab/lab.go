// Package lab holds what the lab's tests share: where the repository is, the
// values in .env, rendering nginx's template the way the official image does,
// and reading the app's metrics.
package lab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/dotenv"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Root is the repository's top folder.
func Root(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// Path joins parts onto the repository's top folder.
func Path(t testing.TB, parts ...string) string {
	return filepath.Join(append([]string{Root(t)}, parts...)...)
}

// Env reads .env: the lab's one source of truth for versions, ports and
// limits, with compose's own parser (compose-go/dotenv, as `docker compose`
// reads it), and no variable from this process's environment.
func Env(t testing.TB) map[string]string {
	t.Helper()
	return EnvFile(t, Path(t, ".env"))
}

// EnvFile reads an env file as compose reads .env.
func EnvFile(t testing.TB, path string) map[string]string {
	t.Helper()
	env, err := dotenv.GetEnvFromFile(map[string]string{}, []string{path})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return env
}

// Tool finds a command on PATH or fails naming the script that installs it.
func Tool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: run scripts/test-deps.sh (make test does) or install it", name)
	}
	return p
}

var placeholder = regexp.MustCompile(`\$\{([A-Z0-9_]+)\}`)

// RenderTemplate substitutes ${VARS} in an nginx template with envsubst, as the
// official nginx image's entrypoint does, and fails if the template names a
// variable that vars does not give (the entrypoint would leave it empty).
func RenderTemplate(t testing.TB, template string, vars map[string]string) string {
	t.Helper()
	src, err := os.ReadFile(template)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	seen := map[string]bool{}
	for _, m := range placeholder.FindAllStringSubmatch(string(src), -1) {
		if _, ok := vars[m[1]]; !ok {
			t.Fatalf("%s uses ${%s}, which the test does not set", template, m[1])
		}
		if !seen[m[1]] {
			seen[m[1]] = true
			names = append(names, "${"+m[1]+"}")
		}
	}
	sort.Strings(names)
	cmd := exec.Command(Tool(t, "envsubst"), strings.Join(names, " "))
	cmd.Stdin = strings.NewReader(string(src))
	cmd.Env = os.Environ()
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("envsubst %s: %v", template, err)
	}
	return string(out)
}

// RenderNginx renders every template of nginx/templates (nginx.conf.template
// and the pass/ snippets it includes) into dir, keeping their folders, as the
// official image's entrypoint does into NGINX_ENVSUBST_OUTPUT_DIR, and returns
// the main config's text; nginx -c dir/nginx.conf finds the includes beside it.
func RenderNginx(t testing.TB, vars map[string]string, dir string) string {
	t.Helper()
	root := Path(t, "nginx", "templates")
	var main string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".template") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		out := filepath.Join(dir, strings.TrimSuffix(rel, ".template"))
		text := RenderTemplate(t, path, vars)
		if rel == "nginx.conf.template" {
			main = text
		}
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, []byte(text), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if main == "" {
		t.Fatalf("%s has no nginx.conf.template", root)
	}
	return main
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ShortTempDir makes a temp folder with a path short enough for a Unix socket
// (108 bytes at most; t.TempDir can be longer).
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "udslab")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Metrics scrapes a Prometheus text endpoint into metric families.
func Metrics(c *http.Client, url string) (map[string]*dto.MetricFamily, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// Value returns the value of the sample of family name whose labels include
// all of want (counter, gauge or untyped), and whether one was found.
func Value(families map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	mf, ok := families[name]
	if !ok {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

// HistogramCount returns the observation count of the histogram sample of
// family name whose labels include all of want (0 if there is none).
func HistogramCount(families map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	mf, ok := families[name]
	if !ok {
		return 0
	}
	for _, m := range mf.GetMetric() {
		if m.Histogram != nil && hasLabels(m, want) {
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return 0
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	labels := map[string]string{}
	for _, lp := range m.GetLabel() {
		labels[lp.GetName()] = lp.GetValue()
	}
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Catalogue is catalogue.json: the lab's paths and workloads.
type Catalogue struct {
	Nginx map[string]struct {
		URL string `json:"url"`
	} `json:"nginx"`
	Paths map[string]struct {
		Nginx    string `json:"nginx"`
		Hop      string `json:"hop"`
		Pooled   bool   `json:"pooled"`
		Listener string `json:"listener"`
		Colour   string `json:"colour"`
		Control  string `json:"control"`
	} `json:"paths"`
	Workloads map[string]struct {
		Route string `json:"route"`
	} `json:"workloads"`
	Stacks    map[string]Stack `json:"-"` // the lab's own app and each stacks/<name>/stack.env
	Breakdown struct {
		Terms []struct {
			Key       string   `json:"key"`
			Paths     []string `json:"paths"`
			InsteadOf string   `json:"instead_of"`
		} `json:"terms"`
	} `json:"breakdown"`
	Order []string `json:"-"` // the paths' names in the file's order
}

// Stack is one of the apps the lab ships: its own (catalogue.json's "app")
// and each reference stack, from its one file stacks/<name>/stack.env.
type Stack struct {
	Dir       string            `json:"dir"`      // its folder in the repository
	Protocol  string            `json:"protocol"` // APP_PROTOCOL: http or fastcgi
	Lacks     []string          `json:"lacks"`    // workloads whose routes it does not serve
	Pools     bool              `json:"pools"`    // whether the -ka paths can reuse its connections
	PoolsWith map[string]string `json:"-"`        // a setting of its own under which they can after all
	Settings  map[string]string `json:"-"`        // what make up STACK=<name> sets (every line but STACK_*)
	Env       map[string]string `json:"-"`        // its stack.env, every line
}

// ReadStacks reads every stacks/<name>/stack.env (as scripts/stack.sh and
// report/lab.py do): its STACK_* facts, and its settings.
func ReadStacks(t testing.TB) map[string]Stack {
	t.Helper()
	files, err := filepath.Glob(Path(t, "stacks", "*", "stack.env"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no stacks/*/stack.env (%v)", err)
	}
	stacks := map[string]Stack{}
	for _, f := range files {
		name := filepath.Base(filepath.Dir(f))
		env := EnvFile(t, f)
		s := Stack{Dir: filepath.Join("stacks", name), Protocol: "http", Pools: env["STACK_POOLS"] == "true",
			PoolsWith: map[string]string{}, Settings: map[string]string{}, Env: env}
		if p := env["APP_PROTOCOL"]; p != "" {
			s.Protocol = p
		}
		if l := env["STACK_LACKS"]; l != "" {
			s.Lacks = strings.Split(l, ",")
		}
		if k, v, ok := strings.Cut(env["STACK_POOLS_WITH"], "="); ok {
			s.PoolsWith[k] = v
		}
		for k, v := range env {
			if !strings.HasPrefix(k, "STACK_") {
				s.Settings[k] = v
			}
		}
		stacks[name] = s
	}
	return stacks
}

// ReadCatalogue reads catalogue.json.
func ReadCatalogue(t testing.TB) Catalogue {
	t.Helper()
	b, err := os.ReadFile(Path(t, "catalogue.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c Catalogue
	var raw struct {
		Paths json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("catalogue.json: %v", err)
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	var app struct {
		App struct {
			Name string `json:"name"`
			Stack
		} `json:"app"`
	}
	if err := json.Unmarshal(b, &app); err != nil {
		t.Fatalf("catalogue.json: app: %v", err)
	}
	c.Stacks = ReadStacks(t)
	c.Stacks[app.App.Name] = app.App.Stack
	dec := json.NewDecoder(bytes.NewReader(raw.Paths))
	if _, err := dec.Token(); err != nil { // {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		c.Order = append(c.Order, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// PathsOf lists the catalogue's paths that an nginx serves, sorted.
func (c Catalogue) PathsOf(nginx string) []string {
	var out []string
	for name, p := range c.Paths {
		if p.Nginx == nginx {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
