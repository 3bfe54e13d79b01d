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
// commands: make k8s-up, a run of two generator pods each sending every
// other request of the stream (make k8s-load K8S_PODS=2), and make k8s-report. The images are
// the stand-ins make e2e uses and the lab's own, imported into the node's
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
// make k8s-report asking for K8S_PROMETHEUS.
func TestKubernetes(t *testing.T) {
	if os.Getenv("UDS_LAB_E2E") == "" {
		t.Skip("needs the stand-in images and environment from tests/e2e/run.sh: run `make e2e`")
	}
	// Beside TestLab: the images are saved first, then the node runs alone
	// from TestLab's heavy scenarios (heavy).
	t.Parallel()
	root := lab.Root(t)
	dir, err := os.MkdirTemp("", "uds-lab-node-")
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(root, "tests", "k8s", "node", "node.sh")
	testid := "e2e-k8s-" + time.Now().UTC().Format("20060102-150405")
	// in runs a command in the node's network namespace (its API server,
	// Services and port-forwards are there), as a user runs it against a cluster.
	in := func(env []string, args ...string) (string, error) {
		cmd := exec.Command(node, append([]string{"in", dir}, args...)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(env []string, args ...string) string {
		t.Helper()
		out, err := in(env, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := in(nil, "kubectl", "get", "pods", "-A", "-o", "wide")
			t.Logf("pods:\n%s", out)
			out, _ = in(nil, "kubectl", "get", "events", "-A", "--sort-by=.lastTimestamp")
			t.Logf("events:\n%s", lastLines(out, 30))
			logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", filepath.Base(l), lastLines(string(b), 15))
			}
		}
		if out, err := exec.Command(node, "down", dir).CombinedOutput(); err != nil {
			t.Errorf("node.sh down: %v\n%s", err, out)
		}
		os.RemoveAll(dir)
		if !t.Failed() {
			runs, _ := filepath.Glob(lab.Path(t, "results", testid+"*"))
			for _, r := range runs {
				os.RemoveAll(r)
			}
		}
	})

	images := []string{os.Getenv("NGINX_IMAGE"), os.Getenv("NGINX_EXPORTER_IMAGE"), os.Getenv("PROMETHEUS_IMAGE"),
		os.Getenv("PYTHON_IMAGE"),
		"uds-lab/app:local", "uds-lab/nginx-log-exporter:local", "uds-lab/prometheus-auth:local", "uds-lab/openloop:local"}
	// Saved at once: TestLab's make clean, at its end, deletes the lab's images.
	saved := filepath.Join(dir, "images.tar")
	step(t, "the lab's own images (as docs/kubernetes.md says to build them), saved", func() {
		run(t, "docker", "compose", "build", "app", "nginx-log-exporter", "prometheus-auth", "openloop")
		run(t, "docker", append([]string{"save", "-o", saved}, images...)...)
	})
	alone(t)
	step(t, "node up", func() { run(t, node, "up", dir) })
	step(t, "images into the node's containerd", func() {
		bin := strings.TrimSpace(mustRead(t, filepath.Join(dir, "bin")))
		run(t, filepath.Join(bin, "ctr"), "--address", filepath.Join(dir, "containerd.sock"), "-n", "k8s.io", "images", "import", saved)
	})
	// The stand-ins' names, never pulled; requests that fit a 2-core node
	// running two generator pods beside the lab.
	values := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(values, []byte(fmt.Sprintf(`images:
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
`, images[0], images[1], images[2], images[3])), 0o644); err != nil {
		t.Fatal(err)
	}
	const ns = "uds-lab-e2e"
	env := []string{"K8S_VALUES=" + values, "K8S_NAMESPACE=" + ns, "K8S_NETWORK_PLUGIN=CNI bridge (test bed)"}
	// Restricted by default: the namespace enforces Pod Security's
	// restricted level (as a platform's namespaces do), and every pod of
	// the chart must run there (make k8s-up waits for them, the run for its Job).
	step(t, "make k8s-up in a namespace that enforces restricted", func() {
		must(nil, "kubectl", "create", "namespace", ns)
		must(nil, "kubectl", "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted",
			"pod-security.kubernetes.io/enforce-version=latest")
		must(env, "make", "k8s-up")
	})

	step(t, "make k8s-load K8S_PODS=2", func() {
		must(append(env, "K8S_PODS=2", "TESTID="+testid,
			"K8S_SET=load.rate=100 load.interleave=15 load.duration=5 load.rounds=1 load.warmup=1 load.idle=2"),
			"make", "k8s-load")
		var load struct {
			Segments *struct {
				Pods     int   `json:"pods"`
				Requests []int `json:"requests"`
			} `json:"segments"`
		}
		if err := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", testid, "load.json"))), &load); err != nil {
			t.Fatal(err)
		}
		if load.Segments == nil || load.Segments.Pods != 2 || len(load.Segments.Requests) != 2 ||
			load.Segments.Requests[0] == 0 || load.Segments.Requests[1] == 0 {
			t.Errorf("load.json's segments: %+v, want 2 pods that each sent requests", load.Segments)
		}
		// A plain pod (no mesh, no NAT rules in it) tracks no connection on
		// its loopback: after the run's thousands of new loopback
		// connections (tcp-lo), its namespace's conntrack table is empty.
		var cluster struct {
			Entries   *int                `json:"lo_conntrack_entries"`
			Kubelet   string              `json:"kubelet"`
			Placement map[string][]string `json:"placement"`
		}
		if err := json.Unmarshal([]byte(mustRead(t, lab.Path(t, "results", testid, "cluster.json"))), &cluster); err != nil {
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
	})

	step(t, "every pod ran under restricted", func() {
		phases := must(nil, "kubectl", "get", "pods", "-n", ns, "-o", "jsonpath={range .items[*]}{.metadata.name}={.status.phase}{\"\\n\"}{end}")
		for _, l := range strings.Fields(phases) {
			if !strings.HasSuffix(l, "=Running") && !strings.HasSuffix(l, "=Succeeded") {
				t.Errorf("pod %s under restricted", l)
			}
		}
		if ev := must(nil, "kubectl", "get", "events", "-n", ns, "--field-selector", "reason=FailedCreate", "-o", "name"); strings.TrimSpace(ev) != "" {
			t.Errorf("pods refused in the restricted namespace: %s", ev)
		}
		if l := must(nil, "kubectl", "get", "namespace", ns, "-o", "jsonpath={.metadata.labels.pod-security\\.kubernetes\\.io/enforce}"); l != "restricted" {
			t.Errorf("namespace %s enforces %q, want restricted", ns, l)
		}
	})

	step(t, "make k8s-report", func() {
		must(env, "make", "k8s-report", "RUN="+testid)
		md := mustRead(t, lab.Path(t, "results", testid, "report.md"))
		t.Logf("report.md:\n%s", md)
		for _, want := range []string{"Where: Kubernetes v1.37.2", "Loopback in the app's pod: not tracked", "The generator ran as 2 pods",
			"Placement: nginx and the app on one node (`uds-lab-node`)"} {
			if !strings.Contains(md, want) {
				t.Errorf("report.md does not say %q", want)
			}
		}
		r := readReport(t, testid)
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
	})

	// burst runs tcp-lo and uds-lo one at a time at 3,000 req/s, open loop
	// (requests pile up in flight when the app falls behind), and returns
	// each path's measured statuses (the generator's own counts). A burst
	// is past what the generator sends on a busy node: its phases may drop
	// requests at the in-flight cap, which fails the run (exit 1, load.json's
	// thresholds_failed names each phase); err is the run's failure but for
	// that.
	burst := func(id string) (map[string]map[string]int, error) {
		said, err := in(append(env, "TESTID="+id, "K8S_SET=load.rate=3000 load.interleave=0 load.paths={tcp-lo,uds-lo} "+
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
	step(t, "the backlog: the node's default, then net.core.somaxconn=1 in the app's pod", func() {
		calm, err := burst(testid + "-backlog-default")
		t.Logf("default backlog: %v", calm)
		if err != nil || calm["uds-lo"]["502"] != 0 || calm["tcp-lo"]["502"] != 0 {
			t.Errorf("at the node's default backlog the burst failed (%v): %v; want no 502 on either path", err, calm)
		}
		// The one exception to restricted (docs/kubernetes.md): refused
		// there by the chart, naming the label; run after the namespace is
		// relabelled privileged, as users must.
		if out, err := in(append(env, "K8S_SET=sysctls.somaxconn=1"), "make", "k8s-up"); err == nil ||
			!strings.Contains(out, "pod-security.kubernetes.io/enforce=privileged") {
			t.Errorf("sysctls.somaxconn in the restricted namespace: %v\n%s\nwant the chart's refusal naming the label", err, lastLines(out, 5))
		}
		must(nil, "kubectl", "label", "namespace", ns, "pod-security.kubernetes.io/enforce=privileged", "--overwrite")
		must(append(env, "K8S_SET=sysctls.somaxconn=1"), "make", "k8s-up")
		if got := strings.TrimSpace(must(nil, "kubectl", "exec", "-n", ns, "deploy/lab-app", "-c", "nginx", "--",
			"cat", "/proc/sys/net/core/somaxconn")); got != "1" {
			t.Fatalf("the app's pod has net.core.somaxconn=%s, want 1", got)
		}
		full, err := burst(testid + "-backlog-1")
		t.Logf("backlog 1: %v (make k8s-load: %v)", full, err)
		if err := refusedOnTheSocket(float64(full["uds-lo"]["502"]), float64(full["tcp-lo"]["502"])); err != nil {
			t.Errorf("with a backlog of 1: uds-lo %v, tcp-lo %v: %v", full["uds-lo"], full["tcp-lo"], err)
		}
	})

	// The cluster's Prometheus (docs/kubernetes.md, "Or the cluster's
	// Prometheus"), last: the release becomes one with no Prometheus of its
	// own and PodMonitors for the prometheus-operator's, in the namespace
	// enforcing restricted again (dropping sysctls.somaxconn makes a new app
	// pod, admitted there). No operator runs on the node (none is built
	// here): its PodMonitor CRD alone, the version tests/k8s installs, so
	// the API server validates and stores the PodMonitors and nothing
	// scrapes them.
	step(t, "the cluster's Prometheus: PodMonitors and no Prometheus, under restricted", func() {
		must(nil, "kubectl", "create", "-f", k8s.PodMonitorCRD(t))
		must(nil, "kubectl", "wait", "--for=condition=Established", "--timeout=30s", "crd/podmonitors.monitoring.coreos.com")
		must(nil, "kubectl", "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted", "--overwrite")
		must(append(env, "K8S_SET=prometheus.enabled=false podMonitors.enabled=true"), "make", "k8s-up")
		// Every pod of the release runs once the replaced ones (the app's
		// old pod, the Job's, Prometheus's) are gone: the app's and nginx's.
		var pods []string
		for end := time.Now().Add(90 * time.Second); ; time.Sleep(2 * time.Second) {
			pods = strings.Fields(must(nil, "kubectl", "get", "pods", "-n", ns, "-l", "app.kubernetes.io/instance=lab", "-o",
				`jsonpath={range .items[*]}{.metadata.labels.app\.kubernetes\.io/component}={.status.phase}{.metadata.deletionTimestamp}{"\n"}{end}`))
			if strings.Join(pods, " ") == "app=Running nginx=Running" || time.Now().After(end) {
				break
			}
		}
		if strings.Join(pods, " ") != "app=Running nginx=Running" {
			t.Errorf("the release's pods (component=phase, then when being deleted): %v; want app=Running nginx=Running", pods)
		}
		if ev := must(nil, "kubectl", "get", "events", "-n", ns, "--field-selector", "reason=FailedCreate", "-o", "name"); strings.TrimSpace(ev) != "" {
			t.Errorf("pods refused in the restricted namespace: %s", ev)
		}
		// Nothing of the chart's Prometheus, in the namespace or cluster-wide.
		for _, o := range strings.Fields(must(nil, "kubectl", "get", "-n", ns, "-o", "name",
			"deployments,services,secrets,serviceaccounts,roles,rolebindings,networkpolicies,configmaps")) {
			if strings.Contains(o, "prometheus") || strings.HasSuffix(o, "/lab-datasource") {
				t.Errorf("%s is left with prometheus.enabled=false", o)
			}
		}
		for _, o := range strings.Fields(must(nil, "kubectl", "get", "-o", "name", "clusterroles,clusterrolebindings")) {
			if strings.HasSuffix(o, "/lab-"+ns+"-prometheus") {
				t.Errorf("%s is left with prometheus.enabled=false", o)
			}
		}
		// A PodMonitor per job, named after the release, with the label the
		// operator's podMonitorSelector selects (podMonitors.labels'
		// default), selecting this release's pods on a port that a running
		// pod of the release has (the generator's pods run only in a run).
		ports := " " + must(nil, "kubectl", "get", "pods", "-n", ns, "-l", "app.kubernetes.io/instance=lab", "-o",
			`jsonpath={range .items[*]}{range .spec.containers[*]}{range .ports[*]}{.name} {end}{end}{range .spec.initContainers[*]}{range .ports[*]}{.name} {end}{end}{end}`)
		var names []string
		for _, l := range strings.Fields(must(nil, "kubectl", "get", "podmonitors", "-n", ns, "-l", "release=kube-prometheus-stack", "-o",
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
		if out, err := in(env, "make", "k8s-report", "RUN="+testid); err == nil ||
			!strings.Contains(out, "prometheus.enabled=false") || !strings.Contains(out, "K8S_PROMETHEUS=<namespace>/<service>:<port>") {
			t.Errorf("make k8s-report with no Prometheus in the release: %v\n%s\nwant a failure naming K8S_PROMETHEUS", err, lastLines(out, 5))
		}
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
