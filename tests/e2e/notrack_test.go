package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// notrack applies APP_LO_NOTRACK=1 and then 0 to the running lab (make up's
// one-shot, services/notrack) and checks both by their effect: with loopback
// untracked, 200 requests through nginx-lo's tcp-lo add about 200 fewer
// entries to the app's namespace's connection-tracking table than with it
// tracked (each request opens a new loopback connection to the app; the
// client's own connection to nginx-lo is tracked either way).
func notrack(t *testing.T) {
	set := func(v string) string {
		// --no-deps: the app's label records make up's setting; a run with
		// another would otherwise recreate the app (and its namespace) first.
		cmd := exec.Command("docker", "compose", "--profile", "notrack", "run", "--rm", "--build", "--no-deps", "notrack")
		cmd.Dir = lab.Root(t)
		cmd.Env = append(os.Environ(), "APP_LO_NOTRACK="+v)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("APP_LO_NOTRACK=%s: %v\n%s", v, err, out)
		}
		return string(out)
	}
	entries := func() int {
		out := run(t, "docker", "compose", "exec", "-T", "nginx", "curl", "-s", "http://app:8080/metrics")
		m := regexp.MustCompile(`(?m)^app_netns_conntrack_entries (\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Skip("the app's namespace has no connection tracking to turn off (no app_netns_conntrack_entries)")
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	burst := func() int {
		before := entries()
		run(t, "docker", "compose", "exec", "-T", "nginx", "sh", "-c",
			"for i in $(seq 200); do curl -s -o /dev/null http://app:8090/tcp-lo/ping; done")
		return entries() - before
	}
	defer set("0")
	if out := set("1"); !strings.Contains(out, "PREROUTING -i lo") || !strings.Contains(out, "OUTPUT -o lo") {
		t.Fatalf("APP_LO_NOTRACK=1: the raw table has no loopback rules:\n%s", out)
	}
	untracked := burst()
	if out := set("0"); strings.Contains(out, " lo ") {
		t.Fatalf("APP_LO_NOTRACK=0: loopback rules left:\n%s", out)
	}
	tracked := burst()
	t.Logf("conntrack entries added by 200 requests through tcp-lo: %d untracked, %d tracked", untracked, tracked)
	if tracked-untracked < 150 {
		t.Errorf("loopback untracked added %d entries, tracked %d: want about 200 fewer untracked", untracked, tracked)
	}
}
