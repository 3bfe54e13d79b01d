package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
	"uds-lab/tests/k8s"
)

// TestKubernetes runs the lab on a real single-node Kubernetes that the test
// bed builds and starts (tests/k8s/node/node.sh: etcd, kube-apiserver,
// controller manager, scheduler, containerd, runc, the CNI bridge, CoreDNS,
// kube-proxy and the kubelet, in namespaces of their own), with the users'
// commands, one named step each: make k8s-up, a run of two generator pods
// each sending every other request of the stream (make k8s-load
// K8S_PODS=2), make k8s-report, a PRECISION run of two pods (its second
// batch sized from the first) and a sweep of two steps. The images are the
// stand-ins make e2e uses and the lab's own, imported into the node's
// containerd as users import theirs. The namespace enforces Pod Security's
// restricted level, and every pod must run there; the report has nginx's
// CPU per request and the generator's CPU from the kubelet's cAdvisor.
// Then the failure users meet (the one exception to restricted: the
// namespace is relabelled privileged first, as users must): a small
// listen backlog (net.core.somaxconn, allowed by the kubelet) makes the
// socket answer 502 under a burst where TCP queues; at the node's default
// backlog the same burst fails with no 502. Last, the cluster's Prometheus
// option, back under restricted: the operator's PodMonitor CRD installed (no
// operator runs), PodMonitors in place of the chart's Prometheus, and
// make k8s-report asking for K8S_PROMETHEUS. A step the later ones stand on
// (the node, the images, make k8s-up, the first run) ends the test when it fails.
func TestKubernetes(t *testing.T) {
	if os.Getenv("UDS_LAB_E2E") == "" {
		t.Skip("needs the stand-in images and environment from tests/e2e/run.sh: run `make e2e`")
	}
	// Beside TestLab: the images are saved first, then the node runs alone
	// from TestLab's heavy scenarios (heavy).
	t.Parallel()
	k := newK8sNode(t)
	if !t.Run("the lab's own images, saved", k.saveImages) {
		return
	}
	alone(t)
	for _, s := range []struct {
		name   string
		fn     func(*testing.T)
		needed bool // by the steps after it
	}{
		{"node up", k.up, true},
		{"images into the node's containerd", k.importImages, true},
		{"make k8s-up in a namespace that enforces restricted", k.install, true},
		{"make k8s-load K8S_PODS=2", k.load, true},
		{"make k8s-load TRAFFIC=<a log> K8S_PODS=2, emulated on the lab's app", k.replay, false},
		{"every pod ran under restricted", k.restricted, false},
		{"make k8s-report", k.report, false},
		{"make k8s-load K8S_PODS=2 with PRECISION", k.precision, false},
		{"make k8s-load, a sweep of two steps", k.sweep, false},
		{"the backlog: the node's default, then net.core.somaxconn=1 in the app's pod", k.backlog, false},
		{"the cluster's Prometheus: PodMonitors and no Prometheus, under restricted", k.clusterPrometheus, false},
	} {
		if !t.Run(s.name, s.fn) && s.needed {
			return
		}
	}
}

// k8sNode is TestKubernetes's node and what its steps share.
type k8sNode struct {
	root, dir, node, testid, values, saved string
	images                                 []string
	env                                    []string // the settings every make k8s-* of the test gets
}

const k8sNamespace = "uds-lab-e2e"

func newK8sNode(t *testing.T) *k8sNode {
	root := lab.Root(t)
	dir, err := os.MkdirTemp("", "uds-lab-node-")
	if err != nil {
		t.Fatal(err)
	}
	k := &k8sNode{root: root, dir: dir, node: filepath.Join(root, "tests", "k8s", "node", "node.sh"),
		testid: "e2e-k8s-" + time.Now().UTC().Format("20060102-150405"), values: filepath.Join(dir, "values.yaml"),
		saved: filepath.Join(dir, "images.tar")}
	k.images = []string{os.Getenv("NGINX_IMAGE"), os.Getenv("NGINX_EXPORTER_IMAGE"), os.Getenv("PROMETHEUS_IMAGE"),
		os.Getenv("PYTHON_IMAGE"),
		"uds-lab/app:local", "uds-lab/nginx-log-exporter:local", "uds-lab/prometheus-auth:local", "uds-lab/openloop:local"}
	k.env = []string{"K8S_VALUES=" + k.values, "K8S_NAMESPACE=" + k8sNamespace, "K8S_NETWORK_PLUGIN=CNI bridge (test bed)"}
	t.Cleanup(func() { k.cleanup(t) })
	return k
}

// in runs a command in the node's network namespace (its API server,
// Services and port-forwards are there), as a user runs it against a cluster.
func (k *k8sNode) in(env []string, args ...string) (string, error) {
	cmd := exec.Command(k.node, append([]string{"in", k.dir}, args...)...)
	cmd.Dir = k.root
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (k *k8sNode) must(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, err := k.in(env, args...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// with is the test's settings and more.
func (k *k8sNode) with(more ...string) []string { return append(append([]string{}, k.env...), more...) }

func (k *k8sNode) cleanup(t *testing.T) {
	if t.Failed() {
		out, _ := k.in(nil, "kubectl", "get", "pods", "-A", "-o", "wide")
		t.Logf("pods:\n%s", out)
		out, _ = k.in(nil, "kubectl", "get", "events", "-A", "--sort-by=.lastTimestamp")
		t.Logf("events:\n%s", lastLines(out, 30))
		logs, _ := filepath.Glob(filepath.Join(k.dir, "logs", "*.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", filepath.Base(l), lastLines(string(b), 15))
		}
	}
	if out, err := exec.Command(k.node, "down", k.dir).CombinedOutput(); err != nil {
		t.Errorf("node.sh down: %v\n%s", err, out)
	}
	os.RemoveAll(k.dir)
	if !t.Failed() {
		runs, _ := filepath.Glob(lab.Path(t, "results", k.testid+"*"))
		for _, r := range runs {
			os.RemoveAll(r)
		}
	}
}

// saveImages builds the lab's own images as docs/kubernetes.md says and
// saves them with the stand-ins at once: TestLab's make clean, at its end,
// deletes the lab's images.
func (k *k8sNode) saveImages(t *testing.T) {
	run(t, "docker", "compose", "build", "app", "nginx-log-exporter", "prometheus-auth", "openloop")
	run(t, "docker", append([]string{"save", "-o", k.saved}, k.images...)...)
}

func (k *k8sNode) up(t *testing.T) { run(t, k.node, "up", k.dir) }

// importImages puts the images into the node's containerd and writes the
// values every install uses: the stand-ins' names, never pulled; requests
// that fit a 2-core node running two generator pods beside the lab.
func (k *k8sNode) importImages(t *testing.T) {
	bin := strings.TrimSpace(mustRead(t, filepath.Join(k.dir, "bin")))
	run(t, filepath.Join(bin, "ctr"), "--address", filepath.Join(k.dir, "containerd.sock"), "-n", "k8s.io", "images", "import", k.saved)
	if err := os.WriteFile(k.values, []byte(fmt.Sprintf(`images:
  nginx: %s
  nginxExporter: %s
  prometheus: %s
  python: %s
  pullPolicy: Never
load:
  avoidNodeUnderTest: false
  resources:
    limits:
      cpu: 300m
      memory: 512Mi
`, k.images[0], k.images[1], k.images[2], k.images[3])), 0o644); err != nil {
		t.Fatal(err)
	}
}

// install: restricted by default: the namespace enforces Pod Security's
// restricted level (as a platform's namespaces do), and every pod of the
// chart must run there (make k8s-up waits for them, the run for its Job).
func (k *k8sNode) install(t *testing.T) {
	k.must(t, nil, "kubectl", "create", "namespace", k8sNamespace)
	k.must(t, nil, "kubectl", "label", "namespace", k8sNamespace, "pod-security.kubernetes.io/enforce=restricted",
		"pod-security.kubernetes.io/enforce-version=latest")
	k.must(t, k.env, "make", "k8s-up")
}

// k8sLoad is what the tests read of a run's load.json.
type k8sLoad struct {
	Settings struct {
		Rate  int   `json:"rate"`
		Rates []int `json:"rates"`
	} `json:"settings"`
	Phases []struct {
		Name      string         `json:"name"`
		Path      string         `json:"path"`
		Round     int            `json:"round"`
		Step      int            `json:"step"`
		DurationS float64        `json:"duration_s"`
		Requests  int            `json:"requests"`
		Statuses  map[string]int `json:"statuses"`
	} `json:"phases"`
	Segments *struct {
		Pods          int   `json:"pods"`
		Requests      []int `json:"requests"`
		StartSpreadMs *int  `json:"start_spread_ms"`
	} `json:"segments"`
	Precision *struct {
		Met    bool `json:"met"`
		Rounds int  `json:"rounds"`
	} `json:"precision"`
	ThresholdsFailed []string `json:"thresholds_failed"`
}

func readK8sLoad(t *testing.T, id string) k8sLoad {
	t.Helper()
	var load k8sLoad
	if err := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", id, "load.json"))), &load); err != nil {
		t.Fatal(err)
	}
	return load
}

// twoPods checks that a run's two pods each sent requests, their starts
// within the merge's bound (loadgen/merge_segments.py's 5 ms).
func twoPods(t *testing.T, load k8sLoad) {
	t.Helper()
	seg := load.Segments
	if seg == nil || seg.Pods != 2 || len(seg.Requests) != 2 || seg.Requests[0] == 0 || seg.Requests[1] == 0 {
		t.Errorf("load.json's segments: %+v, want 2 pods that each sent requests", seg)
	} else if seg.StartSpreadMs == nil || *seg.StartSpreadMs > 5 {
		t.Errorf("load.json's segments: the pods' starts %v ms apart, want within 5 ms", seg.StartSpreadMs)
	} else {
		t.Logf("the pods' starts: %d ms apart", *seg.StartSpreadMs)
	}
}

// everyRequestSent checks that each measured phase of a run at a fixed rate
// sent what its plan asked, rate x seconds (pods merged: their sum).
func everyRequestSent(t *testing.T, load k8sLoad, rate func(step int) int) {
	t.Helper()
	for _, p := range load.Phases {
		if p.Round > 0 && p.Requests != rate(p.Step)*int(p.DurationS) {
			t.Errorf("phase %s: %d requests, want %d x %g s", p.Name, p.Requests, rate(p.Step), p.DurationS)
		}
	}
}

func (k *k8sNode) load(t *testing.T) {
	k.must(t, k.with("K8S_PODS=2", "TESTID="+k.testid,
		"K8S_SET=load.rate=100 load.interleave=15 load.duration=5 load.rounds=1 load.warmup=1 load.idle=2"),
		"make", "k8s-load")
	load := readK8sLoad(t, k.testid)
	twoPods(t, load)
	everyRequestSent(t, load, func(int) int { return 100 })
	// A plain pod (no mesh, no NAT rules in it) tracks no connection on
	// its loopback: after the run's thousands of new loopback
	// connections (tcp-lo), its namespace's conntrack table is empty.
	var cluster struct {
		Entries   *int                `json:"lo_conntrack_entries"`
		Kubelet   string              `json:"kubelet"`
		Placement map[string][]string `json:"placement"`
	}
	if err := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", k.testid, "cluster.json"))), &cluster); err != nil {
		t.Fatal(err)
	}
	if cluster.Entries == nil || *cluster.Entries != 0 || cluster.Kubelet == "" {
		t.Errorf("cluster.json: loopback conntrack entries %v, kubelet %q; want 0 entries (untracked) on a named kubelet", cluster.Entries, cluster.Kubelet)
	}
	// Each pod's node: one node here, so nginx's pod shares the app's
	// (nginx.apartFromApp is a preference).
	for _, c := range []string{"app", "nginx", "openloop", "prometheus"} {
		if n := cluster.Placement[c]; len(n) != 1 || n[0] != "uds-lab-node" {
			t.Errorf("cluster.json: the %s pods' nodes %v, want [uds-lab-node]", c, n)
		}
	}
}

// replay: a log written here (300 GETs of sizes and upstream times that
// vary, 10 POSTs, over 16 s) replayed on the lab's app by two pods, the
// schedule carried in the run's ConfigMaps (loadgen/k8s_replay.py): each
// path sent each GET once, none failed, the pods started together, the app
// answered its replay route 300 x 2 paths more times, and neither the
// ConfigMaps nor the schedule's file outlived the run.
func (k *k8sNode) replay(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 310; i++ {
		method := "GET"
		if i%31 == 30 {
			method = "POST"
		}
		fmt.Fprintf(&b, `{"msec":"%.3f","request":"%s /items/%d HTTP/1.1","status":"200","body_bytes_sent":"%d",`+
			`"request_time":"0.003","upstream_response_time":"0.00%d"}`+"\n", 1700000000+float64(i)*0.05, method, i%9, 500*(i%4), i%3)
	}
	log := filepath.Join(k.dir, "access.jsonl")
	if err := os.WriteFile(log, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	before := k.appReplayed(t)
	id := k.testid + "-replay"
	k.must(t, k.with("K8S_PODS=2", "TESTID="+id, "TRAFFIC="+log,
		"K8S_SET=load.warmup=0 load.idle=0 load.paths={tcp-lo,uds-lo}"), "make", "k8s-load")
	load := readK8sLoad(t, id)
	twoPods(t, load)
	var l struct {
		Phases pathPhases `json:"phases"`
	}
	if err := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", id, "load.json"))), &l); err != nil {
		t.Fatal(err)
	}
	paths := 0
	for _, p := range l.Phases {
		for path, v := range p.ByPath {
			paths++
			if v.Requests != 300 || v.FailedRate != 0 {
				t.Errorf("%s sent %v requests (%.2f%% failed), want each of the log's 300 GETs once, none failed", path, v.Requests, 100*v.FailedRate)
			}
		}
	}
	if paths != 2 {
		t.Errorf("%d paths replayed, want 2 (tcp-lo, uds-lo)", paths)
	}
	if got := k.appReplayed(t) - before; got != 600 {
		t.Errorf("the app answered its replay route %v more times with 200, want 300 GETs x 2 paths", got)
	}
	if cms := k.must(t, nil, "kubectl", "get", "configmaps", "-n", k8sNamespace, "-l", "uds-lab/run="+id, "-o", "name"); strings.TrimSpace(cms) != "" {
		t.Errorf("the run's ConfigMaps outlived it: %s", cms)
	}
	if _, err := os.Stat(lab.Path(t, "results", id, "replay.tsv")); !os.IsNotExist(err) {
		t.Errorf("the replay's schedule is left in results/%s (%v)", id, err)
	}
}

// appReplayed: the app's 200s on its replay route (GET /replay/:bytes/:us), from its /metrics.
func (k *k8sNode) appReplayed(t *testing.T) float64 {
	t.Helper()
	out := k.must(t, nil, "kubectl", "exec", "-n", k8sNamespace, "deploy/lab-app", "-c", "nginx", "--",
		"curl", "-sf", "-m", "10", "http://127.0.0.1:8080/metrics")
	n := 0.0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "app_http_requests_total{") && strings.Contains(line, `code="200"`) &&
			strings.Contains(line, `route="/replay/:bytes/:us"`) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err != nil {
				t.Fatalf("the app's /metrics: %q: %v", line, err)
			}
			n += v
		}
	}
	return n
}

func (k *k8sNode) restricted(t *testing.T) {
	ns := k8sNamespace
	phases := k.must(t, nil, "kubectl", "get", "pods", "-n", ns, "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.phase}{\"\\n\"}{end}")
	for _, l := range strings.Fields(phases) {
		if !strings.HasSuffix(l, "=Running") && !strings.HasSuffix(l, "=Succeeded") {
			t.Errorf("pod %s under restricted", l)
		}
	}
	if ev := k.must(t, nil, "kubectl", "get", "events", "-n", ns, "--field-selector", "reason=FailedCreate", "-o", "name"); strings.TrimSpace(ev) != "" {
		t.Errorf("pods refused in the restricted namespace: %s", ev)
	}
	if l := k.must(t, nil, "kubectl", "get", "namespace", ns, "-o", "jsonpath={.metadata.labels.pod-security\\.kubernetes\\.io/enforce}"); l != "restricted" {
		t.Errorf("namespace %s enforces %q, want restricted", ns, l)
	}
}

func (k *k8sNode) report(t *testing.T) {
	k.must(t, k.env, "make", "k8s-report", "RUN="+k.testid)
	md := mustRead(t, lab.Path(t, "results", k.testid, "report.md"))
	t.Logf("report.md:\n%s", md)
	for _, want := range []string{"Where: Kubernetes v1.37.2", "Loopback in the app's pod: not tracked", "The generator ran as 2 pods",
		"Placement: nginx and the app on one node (`uds-lab-node`)"} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md does not say %q", want)
		}
	}
	r := readReport(t, k.testid)
	ping := r.Workloads["ping"]
	// The answer: the socket against TCP over the pod's loopback, with intervals, from the interleaved stream.
	for _, want := range []string{"`uds-lo` against `tcp-lo`", "`uds-lo-ka` against `tcp-lo-ka`", "95% CI"} {
		if !strings.Contains(ping.Answer, want) {
			t.Errorf("the answer does not name %q: %s", want, ping.Answer)
		}
	}
	if ping.Interleaved == nil || len(ping.Interleaved.Paths) != 6 {
		t.Errorf("the interleaved stream's paths: %+v, want the 6 that exist on Kubernetes", ping.Interleaved)
	}
	// The costs on a cluster (costs.cadvisor, on by default): the
	// kubelet's cAdvisor through the API server's node proxy, each
	// container labelled with the compose service it stands for.
	containerCosts(t, r, "the kubelet's cAdvisor")
	if strings.Contains(md, "make up leaves it out") {
		t.Error("report.md gives compose's reason (make up) for a missing figure on a cluster")
	}
}

// precision: rounds of one path at a time (no stream), a target out of
// reach: the judge sizes one more batch from the first's spread (up to
// MAX_ROUNDS), a Job of its own from round 3, merged into load.json.
func (k *k8sNode) precision(t *testing.T) {
	id := k.testid + "-precision"
	k.must(t, k.with("K8S_PODS=2", "TESTID="+id, "K8S_SET=load.rate=100 load.interleave=0 load.paths={tcp-lo,uds-lo} "+
		"load.duration=2 load.rounds=2 load.warmup=0 load.idle=0 load.precision=0.01% load.maxRounds=3"), "make", "k8s-load")
	load := readK8sLoad(t, id)
	twoPods(t, load)
	everyRequestSent(t, load, func(int) int { return 100 })
	rounds := map[string][]int{}
	for _, p := range load.Phases {
		rounds[p.Path] = append(rounds[p.Path], p.Round)
	}
	for _, path := range []string{"tcp-lo", "uds-lo"} {
		if fmt.Sprint(rounds[path]) != "[1 2 3]" {
			t.Errorf("%s's rounds %v, want [1 2 3]: the first batch's two and the second's one", path, rounds[path])
		}
	}
	if load.Precision == nil || load.Precision.Met || load.Precision.Rounds != 3 {
		t.Errorf("load.json's precision: %+v, want not met after 3 rounds (MAX_ROUNDS)", load.Precision)
	}
}

// sweep: two steps of rising rates, one pod; each step a Job, judged by
// report/sweep.py, the second merged into load.json.
func (k *k8sNode) sweep(t *testing.T) {
	id := k.testid + "-sweep"
	k.must(t, k.with("TESTID="+id, "K8S_SET=load.mode=sweep load.sweepFrom=50 load.sweepTo=100 load.sweepSteps=2 "+
		"load.sweepRounds=2 load.interleave=0 load.paths={tcp-lo,uds-lo} load.duration=2 load.warmup=0 load.idle=0"),
		"make", "k8s-load")
	load := readK8sLoad(t, id)
	if fmt.Sprint(load.Settings.Rates) != "[50 100]" {
		t.Fatalf("the sweep's rates %v, want [50 100]", load.Settings.Rates)
	}
	steps := map[int]int{}
	for _, p := range load.Phases {
		if p.Round > 0 {
			steps[p.Step]++
		}
	}
	if steps[1] != 4 || steps[2] != 4 {
		t.Errorf("the sweep's measured phases by step: %v, want 4 in each of steps 1 and 2", steps)
	}
	everyRequestSent(t, load, func(step int) int { return load.Settings.Rates[step-1] })
}

// burst runs tcp-lo and uds-lo one at a time at 3,000 req/s, open loop
// (requests pile up in flight when the app falls behind), and returns
// each path's measured statuses (the generator's own counts). A burst
// is past what the generator sends on a busy node: its phases may drop
// requests at the in-flight cap, which fails the run (exit 1, load.json's
// thresholds_failed names each phase); err is the run's failure but for
// that.
func (k *k8sNode) burst(t *testing.T, id string) (map[string]map[string]int, error) {
	said, err := k.in(k.with("TESTID="+id, "K8S_SET=load.rate=3000 load.interleave=0 load.paths={tcp-lo,uds-lo} "+
		"load.duration=3 load.rounds=1 load.warmup=1 load.idle=0"), "make", "k8s-load")
	var load struct {
		Phases []struct {
			Path     string         `json:"path"`
			Round    int            `json:"round"`
			Statuses map[string]int `json:"statuses"`
		} `json:"phases"`
		ThresholdsFailed []string `json:"thresholds_failed"`
	}
	if jerr := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", id, "load.json"))), &load); jerr != nil {
		t.Fatal(jerr)
	}
	out := map[string]map[string]int{}
	for _, p := range load.Phases {
		if p.Round > 0 {
			out[p.Path] = p.Statuses
		}
	}
	dropsOnly := len(load.ThresholdsFailed) > 0
	for _, th := range load.ThresholdsFailed {
		dropsOnly = dropsOnly && strings.HasPrefix(th, "dropped_iterations:")
	}
	if dropsOnly && strings.Contains(said, "generator pod(s) failed") {
		t.Logf("%s: the generator's load did not all go out (%v): a burst's, not a failure", id, load.ThresholdsFailed)
		err = nil
	}
	return out, err
}

func (k *k8sNode) backlog(t *testing.T) {
	calm, err := k.burst(t, k.testid+"-backlog-default")
	t.Logf("default backlog: %v", calm)
	if err != nil || calm["uds-lo"]["502"] != 0 || calm["tcp-lo"]["502"] != 0 {
		t.Errorf("at the node's default backlog the burst failed (%v): %v; want no 502 on either path", err, calm)
	}
	// The one exception to restricted (docs/kubernetes.md): refused
	// there by the chart, naming the label; run after the namespace is
	// relabelled privileged, as users must.
	if out, err := k.in(k.with("K8S_SET=sysctls.somaxconn=1"), "make", "k8s-up"); err == nil ||
		!strings.Contains(out, "pod-security.kubernetes.io/enforce=privileged") {
		t.Errorf("sysctls.somaxconn in the restricted namespace: %v\n%s\nwant the chart's refusal naming the label", err, lastLines(out, 5))
	}
	k.must(t, nil, "kubectl", "label", "namespace", k8sNamespace, "pod-security.kubernetes.io/enforce=privileged", "--overwrite")
	k.must(t, k.with("K8S_SET=sysctls.somaxconn=1"), "make", "k8s-up")
	if got := strings.TrimSpace(k.must(t, nil, "kubectl", "exec", "-n", k8sNamespace, "deploy/lab-app", "-c", "nginx", "--",
		"cat", "/proc/sys/net/core/somaxconn")); got != "1" {
		t.Fatalf("the app's pod has net.core.somaxconn=%s, want 1", got)
	}
	full, err := k.burst(t, k.testid+"-backlog-1")
	t.Logf("backlog 1: %v (make k8s-load: %v)", full, err)
	if err := refusedOnTheSocket(float64(full["uds-lo"]["502"]), float64(full["tcp-lo"]["502"])); err != nil {
		t.Errorf("with a backlog of 1: uds-lo %v, tcp-lo %v: %v", full["uds-lo"], full["tcp-lo"], err)
	}
}

// The cluster's Prometheus (docs/kubernetes.md, "Or the cluster's
// Prometheus"), last: the release becomes one with no Prometheus of its
// own and PodMonitors for the prometheus-operator's, in the namespace
// enforcing restricted again (dropping sysctls.somaxconn makes a new app
// pod, admitted there). No operator runs on the node (none is built
// here): its PodMonitor CRD alone, the version tests/k8s installs, so
// the API server validates and stores the PodMonitors and nothing
// scrapes them.
func (k *k8sNode) clusterPrometheus(t *testing.T) {
	k.must(t, nil, "kubectl", "create", "-f", k8s.PodMonitorCRD(t))
	k.must(t, nil, "kubectl", "wait", "--for=condition=Established", "--timeout=30s", "crd/podmonitors.monitoring.coreos.com")
	k.must(t, nil, "kubectl", "label", "namespace", k8sNamespace, "pod-security.kubernetes.io/enforce=restricted", "--overwrite")
	k.must(t, k.with("K8S_SET=prometheus.enabled=false podMonitors.enabled=true"), "make", "k8s-up")
	// Every pod of the release runs once the replaced ones (the app's
	// old pod, the Job's, Prometheus's) are gone: the app's and nginx's.
	var pods []string
	for end := time.Now().Add(90 * time.Second); ; time.Sleep(2 * time.Second) {
		pods = strings.Fields(k.must(t, nil, "kubectl", "get", "pods", "-n", k8sNamespace, "-l", "app.kubernetes.io/instance=lab", "-o",
			`jsonpath={range .items[*]}{.metadata.labels.app\.kubernetes\.io/component}={.status.phase}{.metadata.deletionTimestamp}{"\n"}{end}`))
		if strings.Join(pods, " ") == "app=Running nginx=Running" || time.Now().After(end) {
			break
		}
	}
	if strings.Join(pods, " ") != "app=Running nginx=Running" {
		t.Errorf("the release's pods (component=phase, then when being deleted): %v; want app=Running nginx=Running", pods)
	}
	if ev := k.must(t, nil, "kubectl", "get", "events", "-n", k8sNamespace, "--field-selector", "reason=FailedCreate", "-o", "name"); strings.TrimSpace(ev) != "" {
		t.Errorf("pods refused in the restricted namespace: %s", ev)
	}
	// Nothing of the chart's Prometheus, in the namespace or cluster-wide.
	for _, o := range strings.Fields(k.must(t, nil, "kubectl", "get", "-n", k8sNamespace, "-o", "name",
		"deployments,services,secrets,serviceaccounts,roles,rolebindings,networkpolicies,configmaps")) {
		if strings.Contains(o, "prometheus") || strings.HasSuffix(o, "/lab-datasource") {
			t.Errorf("%s is left with prometheus.enabled=false", o)
		}
	}
	for _, o := range strings.Fields(k.must(t, nil, "kubectl", "get", "-o", "name", "clusterroles,clusterrolebindings")) {
		if strings.HasSuffix(o, "/lab-"+k8sNamespace+"-prometheus") {
			t.Errorf("%s is left with prometheus.enabled=false", o)
		}
	}
	// A PodMonitor per job, named after the release, with the label the
	// operator's podMonitorSelector selects (podMonitors.labels'
	// default), selecting this release's pods on a port that a running
	// pod of the release has (the generator's pods run only in a run).
	ports := " " + k.must(t, nil, "kubectl", "get", "pods", "-n", k8sNamespace, "-l", "app.kubernetes.io/instance=lab", "-o",
		`jsonpath={range .items[*]}{range .spec.containers[*]}{range .ports[*]}{.name} {end}{end}{range .spec.initContainers[*]}{range .ports[*]}{.name} {end}{end}{end}`)
	var names []string
	for _, l := range strings.Fields(k.must(t, nil, "kubectl", "get", "podmonitors", "-n", k8sNamespace, "-l", "release=kube-prometheus-stack", "-o",
		`jsonpath={range .items[*]}{.metadata.name}={.spec.selector.matchLabels.app\.kubernetes\.io/instance}={.spec.podMetricsEndpoints[0].port}{"\n"}{end}`)) {
		f := strings.Split(l, "=")
		names = append(names, f[0])
		if len(f) != 3 || f[1] != "lab" {
			t.Errorf("PodMonitor %s: want it to select the release lab's pods", l)
		} else if f[0] != "lab-openloop" && !strings.Contains(ports, " "+f[2]+" ") {
			t.Errorf("PodMonitor %s: no running pod of the release has the port %q (its pods' ports:%s)", f[0], f[2], ports)
		}
	}
	if strings.Join(names, " ") != "lab-app lab-nginx lab-nginx-log lab-openloop" {
		t.Errorf("PodMonitors labelled release=kube-prometheus-stack: %v; want lab-app lab-nginx lab-nginx-log lab-openloop", names)
	}
	// The report needs the cluster's Prometheus named: make k8s-report
	// without K8S_PROMETHEUS stops, naming the setting.
	if out, err := k.in(k.env, "make", "k8s-report", "RUN="+k.testid); err == nil ||
		!strings.Contains(out, "prometheus.enabled=false") || !strings.Contains(out, "K8S_PROMETHEUS=<namespace>/<service>:<port>") {
		t.Errorf("make k8s-report with no Prometheus in the release: %v\n%s\nwant a failure naming K8S_PROMETHEUS", err, lastLines(out, 5))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
