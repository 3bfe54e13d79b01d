package static

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// The .env setting that names each stack's base image (its Dockerfile's
// ARG BASE_IMAGE default).
var stackImages = map[string]string{
	"php-fpm":  "PHP_FPM_IMAGE",
	"gunicorn": "GUNICORN_PYTHON_IMAGE",
	"node":     "NODE_IMAGE",
}

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

// dockerfileArgs returns a Dockerfile's ARG defaults (ARG NAME=value).
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

// Each stack of stacks/ is a folder users copy: a Dockerfile on its official
// image at the exact tag .env names, as the lab's user and nginx's group, a
// README, and lab.env with the settings the lab needs for it.
func TestStacksFolders(t *testing.T) {
	env := lab.Env(t)
	stacks := lab.ReadCatalogue(t).Stacks
	if len(stacks) < 4 {
		t.Fatalf("catalogue.json lists %d stacks, want the Go app and stacks/'s three", len(stacks))
	}
	for name, s := range stacks {
		if name == "go" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			dir := lab.Path(t, s.Dir)
			for _, f := range []string{"Dockerfile", "README.md", "lab.env"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Error(err)
				}
			}
			args := dockerfileArgs(t, filepath.Join(dir, "Dockerfile"))
			key := stackImages[name]
			if key == "" || env[key] == "" {
				t.Fatalf("no .env setting names %s's base image", name)
			}
			if args["BASE_IMAGE"] != env[key] {
				t.Errorf("%s/Dockerfile: ARG BASE_IMAGE=%s, .env %s=%s", s.Dir, args["BASE_IMAGE"], key, env[key])
			}
			if !exactVariantTag.MatchString(env[key]) {
				t.Errorf(".env %s=%s: want an exact version and variant tag", key, env[key])
			}
			for _, k := range []string{"APP_UID", "APP_GID"} {
				if args[k] != env[k] {
					t.Errorf("%s/Dockerfile: ARG %s=%s, .env %s", s.Dir, k, args[k], env[k])
				}
			}
			// lab.env: settings the lab knows (.env has each), the stack's image, its protocol.
			settings := map[string]string{"APP_PROTOCOL": "http"}
			for _, line := range readLines(t, filepath.Join(dir, "lab.env")) {
				if line == "" {
					continue
				}
				k, v, ok := strings.Cut(line, "=")
				if _, known := env[k]; !ok || (!known && k != "APP_IMAGE") {
					t.Errorf("%s/lab.env: %q is not a setting of .env", s.Dir, line)
				}
				settings[k] = v
			}
			if want := "uds-lab/stack-" + name + ":local"; settings["APP_IMAGE"] != want {
				t.Errorf("%s/lab.env: APP_IMAGE=%s, want %s (the tag its README builds)", s.Dir, settings["APP_IMAGE"], want)
			}
			if settings["APP_PROTOCOL"] != s.Protocol {
				t.Errorf("%s/lab.env: APP_PROTOCOL=%s, catalogue.json says %s", s.Dir, settings["APP_PROTOCOL"], s.Protocol)
			}
			if name == "php-fpm" {
				checkFPMChildren(t, env, settings)
			}
		})
	}
	req := readLines(t, lab.Path(t, "stacks", "gunicorn", "requirements.txt"))
	if want := "gunicorn==" + env["GUNICORN_VERSION"]; req[0] != want {
		t.Errorf("stacks/gunicorn/requirements.txt pins %q, .env GUNICORN_VERSION wants %q", req[0], want)
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

// A stand-in (tests/e2e/standins/stack-<name>.Dockerfile) runs the stack's own
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
	for name, s := range lab.ReadCatalogue(t).Stacks {
		if name == "go" {
			continue
		}
		standin := lab.Path(t, "tests", "e2e", "standins", "stack-"+name+".Dockerfile")
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
