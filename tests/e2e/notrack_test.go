package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// notrack applies APP_LO_NOTRACK=1 and then 0 to the running lab (make up's
// one-shot, services/notrack) and checks both by their effect: with loopback
// untracked, 200 requests through nginx-lo's tcp-lo add no entry for the
// loopback connection to the app's port to the app's namespace's
// connection-tracking table, and with it tracked about 200 (each request opens
// a new loopback connection to the app).
//
// It counts the entries that are new, by their addresses and ports, read from
// the namespace's /proc/net/nf_conntrack by nsenter, rather than the table's
// size: the size also falls while the kernel reaps the entries of earlier
// scenarios, by hundreds within a burst when labs run side by side.
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
	app := strings.TrimSpace(run(t, "docker", "compose", "ps", "-q", "app"))
	pid := strings.TrimSpace(run(t, "docker", "inspect", "-f", "{{.State.Pid}}", app))
	const port = "8080" // the app's TCP port in its namespace: compose.yaml's APP_TCP_ADDR
	loopback := func() map[string]bool {
		out, err := exec.Command("nsenter", "-t", pid, "-n", "cat", "/proc/net/nf_conntrack").CombinedOutput()
		if err != nil {
			t.Skipf("the app's namespace has no connection-tracking table to read (%v: %s)", err, out)
		}
		return loopbackEntries(string(out), port)
	}
	burst := func() int {
		before := loopback()
		run(t, "docker", "compose", "exec", "-T", "nginx", "sh", "-c",
			"for i in $(seq 200); do curl -s -o /dev/null http://app:8090/tcp-lo/ping; done")
		added := 0
		for k := range loopback() {
			if !before[k] {
				added++
			}
		}
		return added
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
	t.Logf("new loopback entries to the app's port %s after 200 requests through tcp-lo: %d untracked, %d tracked", port, untracked, tracked)
	if untracked > 10 || tracked < 150 {
		t.Errorf("loopback untracked added %d entries, tracked %d: want none untracked and about 200 tracked", untracked, tracked)
	}
}

// loopbackEntries keys the entries of a /proc/net/nf_conntrack listing whose
// original direction goes to 127.0.0.1 at port, by their original source
// port: one per loopback connection to the app.
func loopbackEntries(table, port string) map[string]bool {
	keys := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		var dst, dport, sport string
		for _, f := range strings.Fields(line) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			// The first of each is the original direction's.
			switch {
			case k == "dst" && dst == "":
				dst = v
			case k == "dport" && dport == "":
				dport = v
			case k == "sport" && sport == "":
				sport = v
			}
		}
		if dst == "127.0.0.1" && dport == port {
			keys[sport] = true
		}
	}
	return keys
}
