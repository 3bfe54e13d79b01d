package static

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
		// TESTID loadgen/run.sh names everything else by (compose.json, the
		// plan, k6's testid label, wrk's load.json).
		ids := map[string]string{}
		for what, re := range map[string]string{
			"results/last":            `echo (tick-[0-9]+) > results/last`,
			"loadgen/run.sh's TESTID": `TESTID=(tick-[0-9]+) MODE=[a-z]+ GENERATOR=[a-z0-9]+ .*loadgen/run\.sh`,
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
	if !strings.Contains(s, `APP_IMAGE=$APP_IMAGE: not on this machine and cannot be pulled`) {
		t.Errorf("scripts/up.sh does not name APP_IMAGE when its image cannot be had")
	}
}
