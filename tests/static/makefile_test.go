package static

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// TESTID is fixed once per make invocation: every command of `make load` and
// `make max` names the same run (results/last, compose.json, k6's testid),
// even when the clock crosses a second between them. A `date` that answers a
// new value at each call stands in for that clock.
func TestTestIDFixedPerInvocation(t *testing.T) {
	bin := t.TempDir()
	counter := filepath.Join(bin, "calls")
	script := "#!/bin/sh\nn=$(cat " + counter + " 2>/dev/null || echo 0); n=$((n+1)); echo $n > " + counter + "; echo tick-$n\n"
	if err := os.WriteFile(filepath.Join(bin, "date"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TESTID=") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "MAKEFLAGS=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+bin+":"+os.Getenv("PATH"))
	for _, target := range []string{"load", "max"} {
		os.Remove(counter)
		cmd := exec.Command("make", "-n", target)
		cmd.Dir = lab.Root(t)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		// Where the run is named: the pointer make report follows, and the
		// TESTID loadgen/lab_run.py names everything else by (compose.json, the
		// plan, k6's testid label, wrk's load.json).
		ids := map[string]string{}
		for what, re := range map[string]string{
			"results/last":                `echo (tick-[0-9]+) > results/last`,
			"loadgen/lab_run.py's TESTID": `TESTID=(tick-[0-9]+) MODE=[a-z]+ GENERATOR=[a-z0-9]+ .*loadgen/lab_run\.py`,
		} {
			m := regexp.MustCompile(re).FindAllStringSubmatch(string(out), -1)
			if m == nil {
				t.Errorf("make -n %s does not name the run in %s:\n%s", target, what, out)
			}
			for _, id := range m {
				ids[id[1]] = what
			}
		}
		if len(ids) > 1 {
			t.Errorf("make %s names %d runs (%v): TESTID must be set once per invocation\n%s", target, len(ids), ids, out)
		}
	}
}

// make up (scripts/up.sh) checks that every image is here or pullable before
// it starts anything (a pull that fails leaves nothing half-started), and
// names APP_IMAGE when that one is neither.
func TestUpPullsBeforeItStartsAnything(t *testing.T) {
	cmd := exec.Command("make", "-n", "up")
	cmd.Dir = lab.Root(t)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "scripts/up.sh") {
		t.Fatalf("make -n up does not run scripts/up.sh: %v\n%s", err, out)
	}
	b, err := os.ReadFile(lab.Path(t, "scripts", "up.sh"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	steps := regexp.MustCompile(`(?m)^\s*""\) (.*) ;;$`).FindStringSubmatch(s)
	if steps == nil || !regexp.MustCompile(`\bbuild; pull; start\b`).MatchString(steps[1]) {
		t.Errorf("scripts/up.sh does not build and pull before it starts the lab: %q", steps)
	}
	pull := regexp.MustCompile(`(?s)\npull\(\) \{.*?\n\}`).FindString(s)
	if !strings.Contains(pull, "pull --policy missing") || strings.Contains(pull, " up -d") {
		t.Errorf("scripts/up.sh's pull does not pull what is missing, or starts something:\n%s", pull)
	}
	if !strings.Contains(s, `APP_IMAGE=$APP_IMAGE: not on this machine and cannot be pulled`) || !strings.Contains(s, "STACK=$STACK: its image") {
		t.Errorf("scripts/up.sh does not name APP_IMAGE when its image cannot be had")
	}
}

// upApp runs `scripts/up.sh app` (make contract's step: the app's settings and
// image) with docker and compose played by a script that records its command
// lines; it returns the exit status, stderr, the calls and the settings file.
func upApp(t *testing.T, env ...string) (int, string, []string, string) {
	t.Helper()
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	stub := filepath.Join(dir, "docker")
	// docker image inspect finds only the stand-in images "standin/*".
	script := "#!/bin/sh\necho \"docker $*\" >> " + calls + "\n" +
		"case \"$1 $2 $3\" in \"image inspect standin/\"*) exit 0 ;; \"image inspect \"*) exit 1 ;; esac\n"
	if err := os.WriteFile(stub, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	upEnv := filepath.Join(dir, "lab", "up.env")
	cmd := exec.Command("bash", lab.Path(t, "scripts", "up.sh"), "app")
	cmd.Dir = lab.Root(t)
	cmd.Env = append([]string{"PATH=" + dir + ":" + os.Getenv("PATH"), "HOME=" + dir, "COMPOSE=docker compose", "UP_ENV=" + upEnv}, env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	code := 0
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatal(err)
		}
		code = exit.ExitCode()
	}
	b, _ := os.ReadFile(calls)
	written, _ := os.ReadFile(upEnv)
	return code, stderr.String(), strings.Split(strings.TrimSpace(string(b)), "\n"), string(written)
}

// make up STACK=<name> takes the stack's settings from its stack.env (yours
// win), builds its image from its folder on its pinned base, and records
// what it started for make's later commands; an unknown stack is refused,
// naming the setting.
func TestUpStack(t *testing.T) {
	s := lab.ReadStacks(t)["php-fpm"]
	code, stderr, calls, written := upApp(t, "STACK=php-fpm", "PHP_FPM_CHILDREN=3")
	if code != 0 {
		t.Fatalf("up.sh app STACK=php-fpm: exit %d: %s", code, stderr)
	}
	build := "docker build -q --build-arg BASE_IMAGE=" + s.Env["STACK_BASE_IMAGE"] + " -t " + s.Settings["APP_IMAGE"] + " stacks/php-fpm"
	if !slices.Contains(calls, build) {
		t.Errorf("calls %q, want %q", calls, build)
	}
	for k, v := range s.Settings {
		if k == "PHP_FPM_CHILDREN" {
			v = "3" // yours
		}
		if !strings.Contains(written, "\n"+k+"="+v+"\n") {
			t.Errorf("up.env lacks %s=%s:\n%s", k, v, written)
		}
	}
	if !strings.Contains(written, "\nSTACK=php-fpm\n") {
		t.Errorf("up.env does not name the stack:\n%s", written)
	}
	// Another image of yours (a stand-in): used as it is, not built.
	code, stderr, calls, written = upApp(t, "STACK=php-fpm", "APP_IMAGE=standin/php:1")
	if code != 0 || slices.ContainsFunc(calls, func(c string) bool { return strings.HasPrefix(c, "docker build") }) ||
		!strings.Contains(written, "\nAPP_IMAGE=standin/php:1\n") {
		t.Errorf("STACK=php-fpm APP_IMAGE=standin/php:1: exit %d (%s), calls %q, up.env:\n%s", code, stderr, calls, written)
	}
	// The lab's own app: no stack, no settings.
	code, _, _, written = upApp(t)
	if code != 0 || strings.Contains(written, "APP_IMAGE") || !strings.Contains(written, "\nSTACK=\n") {
		t.Errorf("no STACK: exit %d, up.env:\n%s", code, written)
	}
	code, stderr, _, _ = upApp(t, "STACK=rails")
	if code != 2 || !strings.Contains(stderr, `STACK="rails": no such stack (known: go`) {
		t.Errorf("STACK=rails: exit %d, stderr %q; want 2 naming the setting and the stacks", code, stderr)
	}
}

// A second lab from the same checkout (another COMPOSE_PROJECT_NAME and
// LAB_IMAGE_TAG, as make e2e runs) keeps what make up records and the images
// it builds apart from the first's: make up writes .lab/<project>/up.env, make
// clean removes only that lab's, and compose.yaml names its images by the tag.
func TestASecondLabKeepsItsOwnStateAndImages(t *testing.T) {
	dry := func(target string, env ...string) string {
		cmd := exec.Command("make", append([]string{"-n", target}, env...)...)
		cmd.Dir = lab.Root(t)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s %v: %v\n%s", target, env, err, out)
		}
		return string(out)
	}
	second := []string{"COMPOSE_PROJECT_NAME=second", "LAB_IMAGE_TAG=two"}
	if up := dry("up", second...); !strings.Contains(up, "UP_ENV=.lab/second/up.env scripts/up.sh") {
		t.Errorf("make up for project second does not record into .lab/second/up.env:\n%s", up)
	}
	if up := dry("up"); !strings.Contains(up, "UP_ENV=.lab/uds-lab/up.env scripts/up.sh") {
		t.Errorf("make up for .env's project does not record into .lab/uds-lab/up.env:\n%s", up)
	}
	clean := dry("clean", second...)
	for _, want := range []string{"uds-lab/app:two ", "uds-lab/openloop:two ", "rm -f .lab/second/up.env .lab/second/contract.env"} {
		if !strings.Contains(clean, want) {
			t.Errorf("make clean for the second lab lacks %q:\n%s", want, clean)
		}
	}
	if strings.Contains(clean, ":local") || strings.Contains(clean, ".lab/uds-lab/") {
		t.Errorf("make clean for the second lab touches the first's images or records:\n%s", clean)
	}
	// compose.yaml's defaults for the images the lab builds (make test runs
	// before make e2e installs Compose, so the file is read, not compose config).
	b, err := os.ReadFile(lab.Path(t, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	built := 0
	for _, m := range regexp.MustCompile(`(?m)^\s*image: \$\{\w+:-(uds-lab/[\w-]+:[^}\s]*\}?)\}$`).FindAllStringSubmatch(string(b), -1) {
		if strings.HasPrefix(m[1], "uds-lab/oha:") {
			continue // oha's image is named by its version
		}
		built++
		if !strings.HasSuffix(m[1], ":${LAB_IMAGE_TAG}") {
			t.Errorf("compose.yaml names %s for an image the lab builds, want the tag ${LAB_IMAGE_TAG}", m[1])
		}
	}
	if built < 9 {
		t.Errorf("compose.yaml names %d of the lab's own images, want the 9 it builds", built)
	}
}

// make passes loadgen/lab_run.py the settings it reads on the host
// (HOST_SETTINGS, settings.toml's host): each as your shell gives it,
// quotes, spaces and $ as they are, else .env's. The command line make would
// run is run with env in place of the program.
func TestLabRunGetsItsSettings(t *testing.T) {
	traffic := `/logs/it's a $HOME "log".gz,b.log`
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TRAFFIC=") && !strings.HasPrefix(kv, "APP_LO_NOTRACK=") && !strings.HasPrefix(kv, "MAKEFLAGS=") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command("make", "-n", "load")
	cmd.Dir = lab.Root(t)
	cmd.Env = append(env, "TRAFFIC="+traffic)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n load: %v\n%s", err, out)
	}
	line := regexp.MustCompile(`(?m)^rc=0; (.*) python3 loadgen/lab_run\.py compose `).FindSubmatch(out)
	if line == nil {
		t.Fatalf("make -n load runs no loadgen/lab_run.py:\n%s", out)
	}
	sh := exec.Command("bash", "-c", string(line[1])+" env")
	sh.Env = env
	got, err := sh.Output()
	if err != nil {
		t.Fatalf("%s: %v", line[1], err)
	}
	vars := map[string]string{}
	for _, kv := range strings.Split(string(got), "\n") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	for k, want := range map[string]string{"TRAFFIC": traffic, "APP_LO_NOTRACK": lab.Env(t)["APP_LO_NOTRACK"], "MODE": "rate"} {
		if v, ok := vars[k]; !ok || v != want {
			t.Errorf("lab_run.py gets %s=%q (set: %v), want %q\n%s", k, v, ok, want, line[1])
		}
	}
}
