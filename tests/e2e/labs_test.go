package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
)

// make e2e runs three labs side by side, each a compose project of its own
// with its own ports and image tag (LAB_IMAGE_TAG), from one checkout
// (tests/e2e/run.sh), each in a go test process of its own: TestLab (with
// TestKubernetes beside it); TestOverloadAndStop, TestDoctor and TestApps;
// TestStacks. A file lock under UDS_LAB_E2E_LOCKS keeps their first make up
// apart (Prometheus's password is made once). Without it (go test run by
// hand) the lock is a no-op.

// lockFile takes an exclusive flock on UDS_LAB_E2E_LOCKS/name, held until
// release.
func lockFile(t *testing.T, name string) (release func()) {
	t.Helper()
	dir := os.Getenv("UDS_LAB_E2E_LOCKS")
	if dir == "" {
		return func() {}
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("flock %s: %v", name, err)
	}
	return func() { f.Close() }
}

// startLab brings this process's lab up (make up) in its compose project
// (COMPOSE_PROJECT_NAME), after the leftovers of an interrupted run, and
// returns Prometheus's and nginx's addresses and a run id starting with
// prefix. Its cleanup runs make clean and checks that nothing of the project
// is left behind.
func startLab(t *testing.T, prefix string) (prom, nginx, testid string) {
	t.Helper()
	paths = readPaths(t)
	project := os.Getenv("COMPOSE_PROJECT_NAME")
	prom = "http://127.0.0.1:" + os.Getenv("PROMETHEUS_PORT")
	nginx = "http://127.0.0.1:" + os.Getenv("NGINX_PORT")
	testid = prefix + "-" + time.Now().UTC().Format("20060102-150405")

	// Leftovers of an interrupted run; the images stay (make clean, asserted
	// at the end, would delete them while TestKubernetes builds its own).
	down(t)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("docker", "compose", "logs", "--no-color", "--tail=40").CombinedOutput()
			t.Logf("compose logs:\n%s", out)
		}
		mk(t, "clean")
		assertNothingLeft(t, project)
		assertNothingLeft(t, project+"-contract")
		// What the run wrote into the checkout: gone, unless a failure leaves
		// its runs to read. The images it built (the minimal app, the forged
		// app and their build stage, labelled minimalStage) are kept, as the
		// stand-ins are, so that the next run's builds are the builder's cache.
		if !t.Failed() {
			runs, _ := filepath.Glob(lab.Path(t, "results", testid+"*"))
			compared, _ := filepath.Glob(lab.Path(t, "results", "compare-"+testid+"*"))
			for _, r := range append(runs, compared...) {
				os.RemoveAll(r)
			}
			if last, err := os.ReadFile(lab.Path(t, "results", "last")); err == nil && strings.HasPrefix(string(last), testid) {
				os.Remove(lab.Path(t, "results", "last"))
			}
		}
	})

	step(t, "make up", func() { firstUp(t) })
	waitFor(t, "Prometheus scraping the app, nginx exporter and node-exporter", 60*time.Second, func() error {
		for _, job := range []string{"app", "nginx", "node", "prometheus"} {
			if v, ok := scalar(t, prom, fmt.Sprintf(`up{job=%q}`, job)); !ok || v != 1 {
				return fmt.Errorf("up{job=%q} = %v (present %v)", job, v, ok)
			}
		}
		return nil
	})
	if v, ok := scalar(t, prom, `nginx_up{job="nginx"}`); !ok || v != 1 {
		t.Errorf("nginx_up = %v, want 1: the exporter cannot read nginx's stub_status", v)
	}
	return prom, nginx, testid
}

// firstUp runs a lab's first make up, one at a time: the first makes
// Prometheus's password, the next finds it.
func firstUp(t *testing.T, settings ...string) {
	t.Helper()
	defer lockFile(t, "up")()
	mk(t, append([]string{"up"}, settings...)...)
}

// TestApps: the lab on other apps, in a lab of its own beside TestLab's (each
// scenario only waits on light loads and containers starting): make contract
// on the lab's app and on apps that fail it on purpose, and the lab swapped to
// another image; then the lab changed under it: nginx and Prometheus
// restarted under load, loopback untracked, the app killed and its socket
// left behind.
func TestApps(t *testing.T) {
	if os.Getenv("UDS_LAB_E2E") == "" {
		t.Skip("needs the stand-in images and environment from tests/e2e/run.sh: run `make e2e`")
	}
	prom, nginx, testid := startLab(t, "e2e-apps")

	// make contract: the lab's app and the minimal app keep it.
	t.Run("contract", checkContracts)
	// The lab on another app, the minimal app built with series of other
	// sources' names on its /metrics (forged): nginx follows it and make load
	// works through it (swapApp), and Prometheus's app job keeps none of
	// those series (forgedMetrics); then back to the lab's app. One make up
	// and one image serve both.
	t.Run("swap", func(t *testing.T) {
		t.Cleanup(func() { step(t, "make up: back to the lab's app", func() { mk(t, "up") }) })
		buildForged(t)
		swapApp(t, prom, nginx, forgedImage, testid+"-swap")
		forgedMetrics(t, prom)
		// make load TRAFFIC= TRAFFIC_SEND=logged on the minimal app's routes, every path (replay_test.go).
		t.Run("replay", func(t *testing.T) { replayMinimal(t, prom, testid+"-replay") })
	})
	// nginx and Prometheus restarted under load: the app is unaffected.
	t.Run("restart", func(t *testing.T) { restartUnderLoad(t, prom, nginx, testid+"-restart") })
	// APP_LO_NOTRACK: loopback out of connection tracking in the app's namespace, and back.
	t.Run("notrack", notrack)
	// A crash leaves the socket behind; make down and make up start over it,
	// and Prometheus keeps its data across them.
	t.Run("stale-socket", func(t *testing.T) { staleSocket(t, prom, nginx) })
}

// TestStacks: the reference stacks (stand-ins from Debian's packages, running
// the same app code and config as stacks/*), each behind the lab, in a third
// lab beside TestLab's and TestApps's (light loads, containers starting):
// every path serves. make compare runs them, the lab's app first, and writes
// the comparison; then make contract on each stack.
func TestStacks(t *testing.T) {
	if os.Getenv("UDS_LAB_E2E") == "" {
		t.Skip("needs the stand-in images and environment from tests/e2e/run.sh: run `make e2e`")
	}
	prom, _, testid := startLab(t, "e2e-stacks")
	// The lab's app first, then every stack of the catalogue.
	stacks := []string{"go"}
	// A stack the test bed cannot build (STACK_TEST_BED=static) is left out.
	cat := lab.ReadCatalogue(t).Stacks
	for _, name := range slices.Sorted(maps.Keys(cat)) {
		if name != "go" && cat[name].Env["STACK_TEST_BED"] != "static" {
			stacks = append(stacks, name)
		}
	}
	// The answer's pairs over loopback (new connections and pooled), both
	// through nginx-lo: what a stack changes is its side of the
	// connection, the same on every hop (tests/integration serves every
	// path of every stack natively); the pairs across the bridge are
	// left "not measured", which compare.json must say. The shortest
	// phases that give each path stackRun's 80 requests: what it checks
	// is that each stack serves and is counted, not a figure.
	measured := []string{"tcp-lo", "uds-lo", "tcp-lo-ka", "uds-lo-ka"}
	step(t, "make compare", func() {
		mk(t, "compare", "TESTID="+testid, "STACKS="+strings.Join(stacks, ","), "SCENARIO=ping", "PATHS="+strings.Join(measured, ","),
			"RATE=40", "DURATION=2", "ROUNDS=1", "WARMUP=0", "IDLE=0")
	})
	for _, name := range stacks {
		t.Run(name, func(t *testing.T) { stackRun(t, prom, name, "compare-"+testid+"-"+name, len(measured)) })
	}
	var c struct {
		Pairs  []string // catalogue.json's answer pairs, "uds-lo/tcp-lo" ...
		Stacks map[string]struct {
			Workloads map[string]map[string]struct{ Verdict string }
		}
	}
	if err := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", "compare-"+testid, "compare.json"))), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Pairs) == 0 {
		t.Error("compare.json names no pairs")
	}
	for _, name := range stacks {
		for _, pair := range c.Pairs {
			socket, tcp, _ := strings.Cut(pair, "/")
			v := c.Stacks[name].Workloads["ping"][pair].Verdict
			switch {
			case !slices.Contains(measured, socket) || !slices.Contains(measured, tcp):
				if v != "" && !strings.HasPrefix(v, "not measured") {
					t.Errorf("compare.json: %s: %s %q, want not measured (its paths were not run)", name, pair, v)
				}
			case v == "" || strings.HasPrefix(v, "not measured"):
				t.Errorf("compare.json: %s: %s %q, want a verdict", name, pair, v)
			}
		}
	}
	t.Logf("%s", mustRead(t, lab.Path(t, "results", "compare-"+testid, "compare.md")))
}
