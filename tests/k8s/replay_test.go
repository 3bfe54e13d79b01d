package k8s

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// make k8s-load TRAFFIC=... (loadgen/k8s_replay.py): the run's plan and the
// replay's schedule, written on the host, reach the generator pods in
// ConfigMaps made for the run, the schedule gzipped and cut into parts.

// replayParts runs loadgen/k8s_replay.py's split on a schedule of lines
// lines (random targets: about 20 bytes gzipped each) and lays its parts out
// under dir/parts as the kubelet projects ConfigMaps' keys; it returns how
// many there are. dir/schedule is the schedule, dir/plan.json the plan.
func replayParts(t *testing.T, dir string, lines int) int {
	t.Helper()
	code := `
import os, random, sys
sys.path.insert(0, sys.argv[1])
import k8s_replay
dir, n = sys.argv[2], int(sys.argv[3])
rnd = random.Random(1)
sched = ("# uds-lab replay: due_us spacing_us method route target\n" + "".join(
    f"{i * 1000}\t250\tGET\t{i % 11}\t/replay/{rnd.getrandbits(64):x}/{rnd.getrandbits(32):x}\n"
    for i in range(n))).encode()
plan = '{"testid": "r1"}\n'
open(os.path.join(dir, "schedule"), "wb").write(sched)
open(os.path.join(dir, "plan.json"), "w").write(plan)
os.makedirs(os.path.join(dir, "parts"))
parts = k8s_replay.split("plan.json", plan, sched)
for p in parts:
    for k, v in p["data"].items():
        open(os.path.join(dir, "parts", k), "w").write(v)
    for k, v in p["binaryData"].items():
        open(os.path.join(dir, "parts", k), "wb").write(v)
print(len(parts))
`
	out, err := exec.Command(lab.Tool(t, "python3"), "-c", code, lab.Path(t, "loadgen"), dir, strconv.Itoa(lines)).Output()
	if err != nil {
		t.Fatalf("k8s_replay.split: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("k8s_replay.split said %q", out)
	}
	return n
}

func replaySets(id string, parts int) []string {
	return []string{"load.enabled=true", "load.testid=" + id, "load.pods=2", "load.startAt=1700000000000",
		fmt.Sprintf("load.replayParts=%d", parts)}
}

// The Job of a replay mounts the run's ConfigMaps, named as k8s_replay.py
// names them, in one folder; its init container, run here as the pod runs
// it on the parts k8s_replay.py cut from a schedule of 120,000 lines (2.3 MB
// gzipped: 3 ConfigMaps), gives back the same schedule and plan where
// openloop reads them, and fails when a part is missing.
func TestReplayJob(t *testing.T) {
	dir := t.TempDir()
	n := replayParts(t, dir, 120_000)
	if n != 3 {
		t.Fatalf("a schedule of 120,000 lines, 2.3 MB gzipped: %d ConfigMaps, want 3 of 1 MB", n)
	}
	rendering := render(t, replaySets("r1", n))
	kubeconform(t, rendering)
	m := parse(t, rendering)
	job := m.must(t, "Job", named("openloop-r1"))
	pod := &job.Spec.Template.Spec
	v := pod.Volume("replay")
	if v == nil || v.Projected == nil || len(v.Projected.Sources) != n {
		t.Fatalf("the Job's replay volume: %+v, want the run's %d ConfigMaps projected", v, n)
	}
	for k, src := range v.Projected.Sources {
		if want := fmt.Sprintf("%s-replay-r1-%d", release, k); src.ConfigMap == nil || src.ConfigMap.Name != want {
			t.Errorf("the replay volume's source %d: %+v, want ConfigMap %s", k, src.ConfigMap, want)
		}
	}
	plan, gen := pod.Container("plan"), pod.Container("openloop")
	env := plan.EnvMap()
	if mt := plan.Mount("replay"); mt == nil || mt.MountPath != env["REPLAY_DIR"] || !mt.ReadOnly {
		t.Fatalf("the plan container mounts the replay volume at %+v, its REPLAY_DIR is %q", mt, env["REPLAY_DIR"])
	}
	if pod.Volume("loadgen") != nil || plan.Mount("loadgen") != nil {
		t.Errorf("a replay's Job plans on the host: the pod needs no loadgen/plan.py")
	}
	if want := env["RUN_DIR"] + "/plan.json"; gen.EnvMap()["PLAN"] != want {
		t.Fatalf("openloop reads PLAN=%s, the init container writes %s", gen.EnvMap()["PLAN"], want)
	}
	join := func(parts string) (string, error) {
		out := filepath.Join(t.TempDir(), "results", "r1")
		cmd := exec.Command(plan.Command[0], plan.Command[1:]...)
		cmd.Env = append(os.Environ(), "REPLAY_DIR="+parts, "RUN_DIR="+out)
		b, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%v: %s", err, b)
		}
		return out, nil
	}
	out, err := join(filepath.Join(dir, "parts"))
	if err != nil {
		t.Fatalf("the init container's join: %v", err)
	}
	for src, dst := range map[string]string{"schedule": "replay.tsv", "plan.json": "plan.json"} {
		want, _ := os.ReadFile(filepath.Join(dir, src))
		got, err := os.ReadFile(filepath.Join(out, dst))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s after the join: %d bytes (%v), want the %d bytes written on the host", dst, len(got), err, len(want))
		}
	}
	if err := os.Remove(filepath.Join(dir, "parts", "replay.tsv.gz.001")); err != nil {
		t.Fatal(err)
	}
	if _, err := join(filepath.Join(dir, "parts")); err == nil {
		t.Errorf("the join without part 1 succeeded: the pod would send a schedule with a hole")
	}
}

// On the API server: the run's ConfigMaps as make k8s-load makes them
// (loadgen/k8s_backend.py's Kubernetes with TRAFFIC: the plan and schedule
// written on the host from the Job and catalogue helm renders for the run,
// read by kubectl from this server) are accepted, read back give the same
// plan and schedule, the Job owns them, and the run's end removes them.
func testReplayConfigMaps(t *testing.T, s *apiServer) {
	const ns, id = "lab-replay", "rp1"
	if out, err := helm(t, "install", release, chartDir(t), "--namespace", ns, "--create-namespace", "--kubeconfig", s.kubeconfig,
		"--set", "load.avoidNodeUnderTest=false"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "access.log")
	var b strings.Builder
	for i := 0; i < 300; i++ { // 300 requests over 30 s, a POST every 50th
		method := map[bool]string{true: "POST", false: "GET"}[i%50 == 0]
		fmt.Fprintf(&b, `{"msec":"%.3f","request":"%s /items/%d?token=s3cr3t HTTP/1.1","status":"200","body_bytes_sent":"%d","request_time":"0.002","upstream_response_time":"0.001"}`+"\n",
			1700000000+float64(i)*0.1, method, i%7, 100*(i%5))
	}
	if err := os.WriteFile(log, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	code := `
import json, sys
sys.path.insert(0, sys.argv[1])
import k8s_backend
k8s_backend.CHART = sys.argv[5]  # the run's folder is the test's: results/ below the working directory
s = k8s_backend.Settings(dict(__import__("os").environ))
k = k8s_backend.Kubernetes(s, sys.argv[2])
k.values = sys.argv[3]
k.replay.plan(["--values", k.values, *s.args, *k.job_sets({})])
sets = k.replay.make()
if sys.argv[4] == "own":
    k.helm_upgrade(*k.job_sets({"PLAN_FILE": "plan.json"}), *sets)
    k.replay.own(k.job)
print(json.dumps(sets), flush=True)  # a pipe buffers: the test waits for this line
sys.stdin.read()  # the test reads the cluster back, then closes stdin: the run's end
k.close()
`
	values := filepath.Join(dir, "values.json")
	if err := os.WriteFile(values, []byte(`{"load": {"avoidNodeUnderTest": false}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(lab.Path(t, ".venv", "bin", "python"), "-c", code, lab.Path(t, "loadgen"), id, values, "own", chartDir(t))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(lab.Tool(t, "kubectl"))+":"+os.Getenv("PATH"),
		"KUBECONFIG="+s.kubeconfig, "K8S_NAMESPACE="+ns, "K8S_PODS=2", "TRAFFIC="+log, "TRAFFIC_SPEED=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	defer func() {
		if !done { // a failed check: the run ends all the same
			stdin.Close()
			cmd.Wait() //nolint:errcheck // its error is not the test's
		}
	}()
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		stdin.Close()
		cmd.Wait() //nolint:errcheck // stderr says why
		done = true
		t.Fatalf("the run's plan and ConfigMaps: %v\n%s", err, stderr.String())
	}
	runDir := filepath.Join(dir, "results", id)
	schedule, _ := os.ReadFile(filepath.Join(runDir, "replay.tsv"))
	plan, _ := os.ReadFile(filepath.Join(runDir, "plan.json"))
	var doc struct {
		URLs     map[string]string `json:"urls"`
		Settings struct {
			Traffic struct {
				Cycles int `json:"cycles"`
			} `json:"traffic"`
		} `json:"settings"`
	}
	if err := json.Unmarshal(plan, &doc); err != nil {
		t.Fatalf("the host's plan.json: %v", err)
	}
	if doc.Settings.Traffic.Cycles != 294 {
		t.Errorf("the plan replays %d logged requests, want the log's 294 GETs", doc.Settings.Traffic.Cycles)
	}
	if u := doc.URLs["tcp-lo"]; !strings.HasPrefix(u, "http://"+release+"-app:") {
		t.Errorf("the plan's tcp-lo URL %q: not the release's app Service (the host planned with compose's catalogue)", u)
	}
	if strings.Contains(string(schedule), "s3cr3t") || strings.Contains(string(plan), "s3cr3t") {
		t.Errorf("the log's query string reached the schedule or the plan")
	}
	// Read back: one ConfigMap, the plan and the schedule's parts, owned by the Job.
	code2, body := s.get("/api/v1/namespaces/" + ns + "/configmaps/" + release + "-replay-" + id + "-0")
	var cm struct {
		Immutable *bool `json:"immutable"`
		Metadata  struct {
			OwnerReferences []struct {
				Kind string `json:"kind"`
				Name string `json:"name"`
			} `json:"ownerReferences"`
		} `json:"metadata"`
		Data       map[string]string `json:"data"`
		BinaryData map[string]string `json:"binaryData"`
	}
	if code2 != http.StatusOK || json.Unmarshal(body, &cm) != nil {
		t.Fatalf("the run's ConfigMap: HTTP %d %.300s", code2, body)
	}
	if cm.Immutable == nil || !*cm.Immutable || len(cm.Metadata.OwnerReferences) != 1 ||
		cm.Metadata.OwnerReferences[0].Kind != "Job" || cm.Metadata.OwnerReferences[0].Name != release+"-openloop-"+id {
		t.Errorf("the run's ConfigMap: immutable %v, owners %+v; want immutable, owned by the run's Job", cm.Immutable, cm.Metadata.OwnerReferences)
	}
	if cm.Data["plan.json"] != string(plan) {
		t.Errorf("the ConfigMap's plan.json is not the host's plan")
	}
	gz, err := base64.StdEncoding.DecodeString(cm.BinaryData["replay.tsv.gz.000"])
	if err != nil {
		t.Fatal(err)
	}
	if got := gunzip(t, gz); !bytes.Equal(got, schedule) {
		t.Errorf("the schedule read back: %d bytes, the host's %d", len(got), len(schedule))
	}
	stdin.Close()
	done = true
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the run's end: %v\n%s", err, stderr.String())
	}
	if code, _ := s.get("/api/v1/namespaces/" + ns + "/configmaps/" + release + "-replay-" + id + "-0"); code != http.StatusNotFound {
		t.Errorf("after the run: its ConfigMap answers HTTP %d, want 404 (removed)", code)
	}
	if _, err := os.Stat(filepath.Join(runDir, "replay.tsv")); !os.IsNotExist(err) {
		t.Errorf("after the run: results/%s/replay.tsv is still there (%v)", id, err)
	}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
