package static

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
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
// lab.ReadStacks read them); STACK_POOLS_WITH and STACK_TEST_BED are the ones
// a stack may leave out.
var stackFacts = []string{"STACK_ABOUT", "STACK_LACKS", "STACK_POOLS", "STACK_BASE_IMAGE", "STACK_TEST_PACKAGES"}

// static: the test bed cannot build the stack (STACK_TEST_BED=static: no
// registry, no Debian package of it), so it has no stand-in and only
// TestStaticStacks checks it. Absent, or run: it builds and runs it.
func static(s lab.Stack) bool { return s.Env["STACK_TEST_BED"] == "static" }

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
				_, err := os.Stat(filepath.Join(dir, f))
				switch {
				case f == "standin.Dockerfile" && static(s) && err == nil:
					t.Errorf("%s/standin.Dockerfile: the stack is STACK_TEST_BED=static, so nothing builds its stand-in (one would test something else)", s.Dir)
				case f == "standin.Dockerfile" && static(s):
				case err != nil:
					t.Error(err)
				}
			}
			if b := s.Env["STACK_TEST_BED"]; b != "" && b != "run" && b != "static" {
				t.Errorf("%s/stack.env: STACK_TEST_BED=%q, want run or static", s.Dir, b)
			}
			for _, k := range stackFacts {
				if s.Env[k] == "" {
					t.Errorf("%s/stack.env: no %s", s.Dir, k)
				}
			}
			for k := range s.Env {
				if strings.HasPrefix(k, "STACK_") && !slices.Contains(stackFacts, k) && k != "STACK_POOLS_WITH" && k != "STACK_TEST_BED" {
					t.Errorf("%s/stack.env: %s is no fact the lab reads (%v, STACK_POOLS_WITH, STACK_TEST_BED)", s.Dir, k, stackFacts)
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
		if static(s) {
			continue // no stand-in (TestStacksFolders)
		}
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

// phpRoutes runs a static-only PHP stack's lab.php (its routes and settings,
// all but the server) on the test bed's php-cli: each [method, path] through
// lab_route(), each mode through lab_config(). What it prints, per case.
const phpRoutes = `<?php
require $argv[1];
$in = json_decode(stream_get_contents(STDIN), true);
$out = ['routes' => [], 'modes' => []];
foreach ($in['routes'] as [$method, $path]) {
    [$status, $headers, $body, $wait] = lab_route($method, $path);
    $out['routes'][] = ['status' => $status, 'type' => $headers['Content-Type'] ?? '', 'size' => strlen($body),
        'sha256' => hash('sha256', $body), 'json' => json_decode($body, true), 'wait' => $wait];
}
foreach ($in['modes'] as $mode) {
    try {
        $out['modes'][] = ['mode' => lab_config(['APP_SOCKET_MODE' => $mode])['mode']];
    } catch (LabSettingError $e) {
        $out['modes'][] = ['error' => $e->getMessage()];
    }
}
echo json_encode($out);
`

type phpRoute struct {
	Status int            `json:"status"`
	Type   string         `json:"type"`
	Size   int            `json:"size"`
	SHA256 string         `json:"sha256"`
	JSON   map[string]any `json:"json"`
	Wait   int            `json:"wait"`
}

// goPattern is the Go app's payload: byte i is (i % 255) + 1.
func goPattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i%255) + 1
	}
	return b
}

// A stack the test bed cannot build (STACK_TEST_BED=static: swoole) is
// checked with what it can run, never with a stand-in: its PHP's syntax
// (Debian's php -l), and its lab.php, which holds all but the server, against
// the contract: every route of catalogue.json's workloads (200 and the Go
// app's answer: the byte pattern, the SHA-256 digest, the sleep; a JSON 404
// for what it lacks), the JSON errors, and every mode of
// contract/socket-modes.json. hadolint checks its Dockerfile (TestHadolint).
func TestStaticStacks(t *testing.T) {
	php := lab.Tool(t, "php")
	env := lab.Env(t)
	cat := lab.ReadCatalogue(t)
	var modes struct{ Keep, Break []string }
	if err := json.Unmarshal([]byte(strings.Join(readLines(t, lab.Path(t, "contract", "socket-modes.json")), "\n")), &modes); err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, s := range lab.ReadStacks(t) {
		if !static(s) {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			dir := lab.Path(t, s.Dir)
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				switch f := e.Name(); {
				case f == "Dockerfile" || f == "README.md" || f == "stack.env":
				case strings.HasSuffix(f, ".php"):
					if out, err := exec.Command(php, "-l", filepath.Join(dir, f)).CombinedOutput(); err != nil {
						t.Errorf("php -l %s/%s: %v\n%s", s.Dir, f, err, out)
					}
				default:
					t.Errorf("%s/%s: the test bed has no check for it (a static-only stack is PHP: php -l and lab.php)", s.Dir, f)
				}
			}
			// The contract's routes, as the checker asks them (catalogue.json
			// with .env's parameters), and the errors.
			type want struct {
				method, path string
				status       int
				check        func(phpRoute) string
			}
			var cases []want
			for w, wl := range cat.Workloads {
				if w == "custom" {
					continue
				}
				path := strings.NewReplacer("{CPU_ITERATIONS}", env["CPU_ITERATIONS"], "{SLEEP_MS}", env["SLEEP_MS"]).Replace(wl.Route)
				if slices.Contains(s.Lacks, w) {
					cases = append(cases, want{"GET", path, 404, func(r phpRoute) string {
						if r.JSON["error"] != "no route for GET "+path {
							return fmt.Sprintf("error %v", r.JSON["error"])
						}
						return ""
					}})
					continue
				}
				cases = append(cases, want{"GET", path, 200, func(r phpRoute) string {
					switch seg := strings.Split(path, "/"); seg[1] {
					case "bytes":
						n, _ := strconv.Atoi(seg[2])
						if sum := sha256.Sum256(goPattern(n)); r.Size != n || r.SHA256 != hex.EncodeToString(sum[:]) {
							return fmt.Sprintf("%d bytes, not the Go app's pattern of %d", r.Size, n)
						}
					case "cpu":
						n, _ := strconv.Atoi(seg[2])
						state := make([]byte, 32)
						for range n {
							sum := sha256.Sum256(state)
							state = sum[:]
						}
						if r.JSON["digest"] != hex.EncodeToString(state) || r.JSON["iterations"] != float64(n) {
							return fmt.Sprintf("%v, want the Go app's digest of %d rounds", r.JSON, n)
						}
					case "sleep":
						ms, _ := strconv.Atoi(seg[2])
						if r.Wait != ms || r.JSON["slept_ms"] != float64(ms) {
							return fmt.Sprintf("waits %d ms and says %v, want %d", r.Wait, r.JSON, ms)
						}
					case "ping":
						if r.JSON["message"] != "pong" {
							return fmt.Sprintf("%v", r.JSON)
						}
					}
					return ""
				}})
			}
			for _, p := range []string{"/healthz", "/readyz"} {
				cases = append(cases, want{"GET", p, 200, func(phpRoute) string { return "" }})
			}
			errorSays := func(text string) func(phpRoute) string {
				return func(r phpRoute) string {
					if e, _ := r.JSON["error"].(string); !strings.Contains(e, text) || r.Type != "application/json; charset=utf-8" {
						return fmt.Sprintf("%s %v, want a JSON error saying %q", r.Type, r.JSON, text)
					}
					return ""
				}
			}
			cases = append(cases,
				want{"GET", "/bytes/x", 400, errorSays(`parameter n="x" is not an integer`)},
				want{"GET", "/bytes/16777217", 400, errorSays("parameter n=16777217 exceeds the maximum 16777216")},
				want{"GET", "/cpu/0", 400, errorSays("parameter iterations=0 is below the minimum 1")},
				want{"POST", "/ping", 405, errorSays("method POST not allowed for /ping")},
				want{"GET", "/nope", 404, errorSays("no route for GET /nope")})
			var in struct {
				Routes [][2]string `json:"routes"`
				Modes  []string    `json:"modes"`
			}
			for _, c := range cases {
				in.Routes = append(in.Routes, [2]string{c.method, c.path})
			}
			in.Modes = append(append(in.Modes, modes.Keep...), modes.Break...)
			script := filepath.Join(t.TempDir(), "routes.php")
			if err := os.WriteFile(script, []byte(phpRoutes), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(php, script, filepath.Join(dir, "lab.php"))
			b, _ := json.Marshal(in)
			cmd.Stdin = strings.NewReader(string(b))
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("php %s/lab.php: %v\n%s", s.Dir, err, out)
			}
			var got struct {
				Routes []phpRoute
				Modes  []struct {
					Mode  *int
					Error string
				}
			}
			if err := json.Unmarshal(out, &got); err != nil || len(got.Routes) != len(cases) || len(got.Modes) != len(in.Modes) {
				t.Fatalf("php %s/lab.php: %v: %s", s.Dir, err, out)
			}
			for i, c := range cases {
				r := got.Routes[i]
				if r.Status != c.status {
					t.Errorf("%s %s %s: %d, want %d", s.Dir, c.method, c.path, r.Status, c.status)
				} else if why := c.check(r); why != "" {
					t.Errorf("%s %s %s: %s", s.Dir, c.method, c.path, why)
				}
			}
			for i, m := range in.Modes {
				g := got.Modes[i]
				v, _ := strconv.ParseUint(m, 8, 32)
				switch keep := slices.Contains(modes.Keep, m); {
				case keep && (g.Mode == nil || *g.Mode != int(v)):
					t.Errorf("%s: APP_SOCKET_MODE=%s refused (%s), want it kept (contract/socket-modes.json)", s.Dir, m, g.Error)
				case !keep && !strings.Contains(g.Error, `APP_SOCKET_MODE="`+m+`"`):
					t.Errorf("%s: APP_SOCKET_MODE=%s kept, want it refused naming the setting (contract/socket-modes.json)", s.Dir, m)
				}
			}
		})
	}
	if n == 0 {
		t.Error("no stack with STACK_TEST_BED=static: stacks/swoole is one")
	}
}

// scripts/stack.sh --list names every stack; --list run those the test bed
// builds and runs (its stand-ins, tests/integration, e2e), --list static the
// others (swoole), each from its stack.env's STACK_TEST_BED.
func TestStackList(t *testing.T) {
	list := func(args ...string) []string {
		out, err := exec.Command(lab.Path(t, "scripts", "stack.sh"), append([]string{"--list"}, args...)...).Output()
		if err != nil {
			t.Fatalf("scripts/stack.sh --list %v: %v", args, err)
		}
		return strings.Fields(string(out))
	}
	all, run, st := []string{"go"}, []string{"go"}, []string{}
	for _, name := range slices.Sorted(maps.Keys(lab.ReadStacks(t))) {
		all = append(all, name)
		if static(lab.ReadStacks(t)[name]) {
			st = append(st, name)
		} else {
			run = append(run, name)
		}
	}
	if got := list(); !slices.Equal(got, all) {
		t.Errorf("--list: %v, want %v", got, all)
	}
	if got := list("run"); !slices.Equal(got, run) || slices.Contains(got, "swoole") {
		t.Errorf("--list run: %v, want %v (not swoole)", got, run)
	}
	if got := list("static"); !slices.Equal(got, st) || !slices.Contains(got, "swoole") {
		t.Errorf("--list static: %v, want %v (swoole among them)", got, st)
	}
	if err := exec.Command(lab.Path(t, "scripts", "stack.sh"), "--list", "runs").Run(); err == nil {
		t.Error("--list runs: accepted, want exit 2")
	}
}
