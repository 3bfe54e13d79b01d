package static

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// A stack's base image: an official image at an exact version and variant,
// e.g. php:8.4.24-fpm-bookworm.
var exactVariantTag = regexp.MustCompile(`^[a-z0-9./-]+:[0-9]+\.[0-9]+\.[0-9]+-[a-z0-9.-]+$`)

// readLines reads a file's lines, or fails.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}

// dockerfileArgs returns a Dockerfile's ARG lines: NAME and its default ("" for none).
func dockerfileArgs(t *testing.T, path string) map[string]string {
	args := map[string]string{}
	for _, line := range readLines(t, path) {
		if rest, ok := strings.CutPrefix(line, "ARG "); ok {
			k, v, _ := strings.Cut(rest, "=")
			args[k] = v
		}
	}
	return args
}

// The facts every stack.env gives (scripts/stack.sh, report/lab.py and
// lab.ReadStacks read them); STACK_POOLS_WITH is the one a stack may leave out.
var stackFacts = []string{"STACK_ABOUT", "STACK_LACKS", "STACK_POOLS", "STACK_BASE_IMAGE", "STACK_TEST_PACKAGES"}

// Each stack of stacks/ is a folder users copy, and the lab's one place for
// it: a Dockerfile whose base stack.env pins, as the lab's user and nginx's
// group, a README, a stand-in recipe for the test bed, and stack.env with its
// facts and the settings make up STACK=<name> applies.
func TestStacksFolders(t *testing.T) {
	env := lab.Env(t)
	stacks := lab.ReadStacks(t)
	for _, want := range []string{"php-fpm", "gunicorn", "node", "uvicorn", "puma"} {
		if _, ok := stacks[want]; !ok {
			t.Errorf("stacks/%s: no stack.env; the reference stacks are PHP-FPM, gunicorn, Node, uvicorn and puma at least", want)
		}
	}
	index, err := os.ReadFile(lab.Path(t, "stacks", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	workloads := lab.ReadCatalogue(t).Workloads
	for name, s := range stacks {
		t.Run(name, func(t *testing.T) {
			dir := lab.Path(t, s.Dir)
			// stacks/README.md's table has a row for it, linking its folder.
			if !strings.Contains(string(index), "| [`"+name+"`]("+name+") |") {
				t.Errorf("stacks/README.md: no row for %s in its table (| [`%s`](%s) | ...)", name, name, name)
			}
			for _, f := range []string{"Dockerfile", "README.md", "stack.env", "standin.Dockerfile"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Error(err)
				}
			}
			for _, k := range stackFacts {
				if s.Env[k] == "" {
					t.Errorf("%s/stack.env: no %s", s.Dir, k)
				}
			}
			for k := range s.Env {
				if strings.HasPrefix(k, "STACK_") && !slices.Contains(stackFacts, k) && k != "STACK_POOLS_WITH" {
					t.Errorf("%s/stack.env: %s is no fact the lab reads (%v, STACK_POOLS_WITH)", s.Dir, k, stackFacts)
				}
			}
			if p := s.Env["STACK_POOLS"]; p != "true" && p != "false" {
				t.Errorf("%s/stack.env: STACK_POOLS=%q, want true or false", s.Dir, p)
			}
			for k := range s.PoolsWith {
				if _, ok := s.Settings[k]; !ok {
					t.Errorf("%s/stack.env: STACK_POOLS_WITH names %s, not one of its settings", s.Dir, k)
				}
			}
			for _, w := range s.Lacks {
				if _, ok := workloads[w]; !ok {
					t.Errorf("%s/stack.env: STACK_LACKS names %q, not a workload of catalogue.json", s.Dir, w)
				}
			}
			args := dockerfileArgs(t, filepath.Join(dir, "Dockerfile"))
			if base, ok := args["BASE_IMAGE"]; !ok || base != "" {
				t.Errorf("%s/Dockerfile: ARG BASE_IMAGE=%q, want it without a default (stack.env pins it)", s.Dir, base)
			}
			if b := s.Env["STACK_BASE_IMAGE"]; !exactVariantTag.MatchString(b) {
				t.Errorf("%s/stack.env: STACK_BASE_IMAGE=%s: want an exact version and variant tag", s.Dir, b)
			}
			for _, k := range []string{"APP_UID", "APP_GID"} {
				if args[k] != env[k] {
					t.Errorf("%s/Dockerfile: ARG %s=%s, .env %s", s.Dir, k, args[k], env[k])
				}
			}
			if want := "uds-lab/stack-" + name + ":local"; s.Settings["APP_IMAGE"] != want {
				t.Errorf("%s/stack.env: APP_IMAGE=%s, want %s", s.Dir, s.Settings["APP_IMAGE"], want)
			}
			if p := s.Protocol; p != "http" && p != "fastcgi" {
				t.Errorf("%s/stack.env: APP_PROTOCOL=%s, want http or fastcgi", s.Dir, p)
			}
			// nginx keeps idle pooled connections; a stack that gives each a
			// process of its own needs more of them than nginx keeps.
			if _, ok := s.Settings["PHP_FPM_CHILDREN"]; ok {
				checkFPMChildren(t, env, s.Settings)
			}
		})
	}
}

// PHP-FPM gives each connection nginx keeps idle a child of its own: the idle
// connections of both nginx (per worker, per pool) must stay fewer than the
// children, or requests on new connections wait for a child that never frees.
func checkFPMChildren(t *testing.T, env, settings map[string]string) {
	get := func(k string) int {
		v := settings[k]
		if v == "" {
			v = env[k]
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("%s=%q: not a number", k, v)
		}
		return n
	}
	idle := 2 * get("NGINX_WORKER_PROCESSES") * get("NGINX_UPSTREAM_KEEPALIVE")
	if children := get("PHP_FPM_CHILDREN"); idle >= children {
		t.Errorf("php-fpm: nginx and nginx-lo keep up to %d idle connections per pool, PHP_FPM_CHILDREN=%d: want fewer", idle, children)
	}
}

// A stand-in (stacks/<name>/standin.Dockerfile) runs the stack's own
// code and config as its Dockerfile does: the same files, user, settings,
// ports, stop signal and command; only the base and the packages differ.
func TestStackStandinsMatchStacks(t *testing.T) {
	same := regexp.MustCompile(`^(COPY|USER|ENV|EXPOSE|STOPSIGNAL|ENTRYPOINT|CMD|    )`)
	pick := func(path string) string {
		var out []string
		for _, line := range readLines(t, path) {
			if same.MatchString(line) {
				out = append(out, line)
			}
		}
		return strings.Join(out, "\n")
	}
	for _, s := range lab.ReadStacks(t) {
		standin := lab.Path(t, s.Dir, "standin.Dockerfile")
		if got, want := pick(standin), pick(lab.Path(t, s.Dir, "Dockerfile")); got != want {
			t.Errorf("%s runs otherwise than %s/Dockerfile:\n%s\nwant:\n%s", standin, s.Dir, got, want)
		}
	}
}

// nginx decides when the app is ready, so an image without a HEALTHCHECK
// starts the lab: both nginx depend on the app being started (and restart
// with it), and their healthchecks ask the app on both listeners through
// nginx (nginx/healthcheck.sh: /_tcp/ and /_uds/).
func TestNginxDecidesAppReadiness(t *testing.T) {
	p := loadCompose(t)
	for _, name := range []string{"nginx", "nginx-lo"} {
		s := p.Services[name]
		d, ok := s.DependsOn["app"]
		if !ok || d.Condition != "service_started" || !d.Restart {
			t.Errorf("%s depends on app %+v, want condition service_started with restart", name, d)
		}
		if s.HealthCheck == nil {
			t.Fatalf("%s has no healthcheck", name)
		}
		test := strings.Join(s.HealthCheck.Test, " ")
		script := strings.TrimPrefix(test[strings.LastIndex(test, " ")+1:], "/lab/")
		mounted := false
		for _, v := range s.Volumes {
			if v.Target == "/lab/"+script && v.ReadOnly {
				mounted = true
			}
		}
		if !mounted {
			t.Errorf("%s's healthcheck %q runs a script it does not mount read-only", name, test)
		}
		src, err := os.ReadFile(lab.Path(t, "nginx", script))
		if err != nil {
			t.Fatal(err)
		}
		if script != "healthcheck.sh" && !strings.Contains(string(src), "healthcheck.sh") {
			t.Errorf("%s's healthcheck (nginx/%s) does not run nginx/healthcheck.sh", name, script)
		}
	}
	src, err := os.ReadFile(lab.Path(t, "nginx", "healthcheck.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "for listener in tcp uds") {
		t.Error("nginx/healthcheck.sh does not ask the app on both listeners (/_tcp/, /_uds/)")
	}
}
