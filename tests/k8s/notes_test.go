package k8s

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"uds-lab/tests/internal/lab"
)

// notes renders the chart's NOTES.txt as helm install shows it (a
// client-side dry run: helm template does not render notes) for a release
// and namespace, with sets.
func notes(t *testing.T, rel, ns string, sets []string) string {
	t.Helper()
	args := append([]string{"install", rel, chartDir(t), "--namespace", ns, "--dry-run=client", "-o", "json"}, setArgs(sets)...)
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm install --dry-run %v: %v", sets, err)
	}
	var r struct {
		Info struct {
			Notes string `json:"notes"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("helm install --dry-run -o json: %v\n%.500s", err, out)
	}
	if strings.TrimSpace(r.Info.Notes) == "" {
		t.Fatal("the chart shows no notes after an install (templates/NOTES.txt)")
	}
	return r.Info.Notes
}

// NOTES.txt tells the user what to run next, for this release and
// namespace, and what it says is what the run's program (make k8s-*:
// loadgen/lab_run.py k8s, loadgen/k8s_backend.py) does: the targets exist,
// the settings are its, the Secret and the Service are the ones its report
// reads.
func TestNotesSayWhatToRunNext(t *testing.T) {
	script, err := os.ReadFile(lab.Path(t, "loadgen", "k8s_backend.py"))
	if err != nil {
		t.Fatal(err)
	}
	makefile, err := os.ReadFile(lab.Path(t, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	// What the program does, which the notes must say in the same words.
	for _, s := range []string{`self.ns = env.get("K8S_NAMESPACE") or "uds-lab"`, `self.release = env.get("K8S_RELEASE") or "lab"`,
		`"get", "secret", f"{s.release}-prometheus-auth", "-o",`, `"jsonpath={.data.password}")`, `base64.b64decode(secret)`,
		`pns, svc, port = s.ns, f"{s.release}-prometheus", "9090"`, `"port-forward", f"svc/{svc}", f":{port}"`,
		`K8S_PROMETHEUS=<namespace>/<service>:<port>`, `[s.python, "-m", "report", "--run", run`,
		`values.pop("load", None)`, `sets = ["load.enabled=true", f"load.testid={self.testid}"`} {
		if !strings.Contains(string(script), s) {
			t.Fatalf("loadgen/k8s_backend.py no longer has %q: check templates/NOTES.txt still says what it does, then this test", s)
		}
	}
	for _, target := range []string{"k8s-load", "k8s-report"} {
		if !regexp.MustCompile(`(?m)^` + target + `:[^\n]*\n\t.*loadgen/lab_run.py k8s ` + strings.TrimPrefix(target, "k8s-")).Match(makefile) {
			t.Fatalf("the Makefile has no target %s running loadgen/lab_run.py k8s", target)
		}
	}

	const rel, ns = "other", "their-ns"
	n := notes(t, rel, ns, nil)
	for _, want := range []string{
		"K8S_NAMESPACE=" + ns + " K8S_RELEASE=" + rel + " make k8s-load",
		"K8S_NAMESPACE=" + ns + " K8S_RELEASE=" + rel + " make k8s-report",
		"results/<run>/report.md",
		"kubectl --namespace " + ns + " get secret " + rel + "-prometheus-auth -o jsonpath='{.data.password}' | base64 -d",
		"kubectl --namespace " + ns + " port-forward svc/" + rel + "-prometheus 9090",
		`user "uds-lab"`,
		"another release may share this namespace",
		"K8S_SET",
		"helm uninstall removes it",
	} {
		if !strings.Contains(n, want) {
			t.Errorf("the notes do not say %q:\n%s", want, n)
		}
	}
	// The objects they name are the chart's.
	m := parse(t, render(t, nil))
	m.must(t, "Secret", release+"-prometheus-auth")
	m.must(t, "Service", named("prometheus"))
	for _, d := range []string{"app", "nginx", "prometheus"} {
		m.must(t, "Deployment", named(d))
		if !strings.Contains(n, "deployment/"+rel+"-"+d) {
			t.Errorf("the notes do not wait for deployment/%s-%s", rel, d)
		}
	}
	if strings.Contains(n, "openloop-") {
		t.Errorf("without load.enabled the notes name a Job:\n%s", n)
	}
	// The costs: each value as set, what it gives and what it needs (the
	// ClusterRole the chart makes, the privileged label it asks).
	m.must(t, "ClusterRole", release+"-"+namespace+"-prometheus")
	for _, want := range []string{"costs.cadvisor=true: nginx's CPU per request and the generator's CPU",
		"the cluster-wide ClusterRole " + rel + "-" + ns + "-prometheus",
		"costs.nodeExporter=false: the host's context switches", "pod-security.kubernetes.io/enforce=privileged",
		"Off, the report reads those figures n/a"} {
		if !strings.Contains(n, want) {
			t.Errorf("the notes do not say %q:\n%s", want, n)
		}
	}
	if n := notes(t, rel, ns, []string{"costs.cadvisor=false"}); !strings.Contains(n, "costs.cadvisor=false:") {
		t.Errorf("with costs.cadvisor=false the notes do not say so:\n%s", n)
	}

	// With the cluster's Prometheus: the report reads the one the user names,
	// and they name the PodMonitors and the label the operator selects.
	n = notes(t, rel, ns, clusterPrometheusSets)
	for _, want := range []string{"K8S_NAMESPACE=" + ns + " K8S_RELEASE=" + rel + " K8S_PROMETHEUS=<namespace>/<service>:<port> make k8s-report",
		"PodMonitors " + rel + "-app, " + rel + "-nginx, " + rel + "-nginx-log and " + rel + "-openloop", "labelled release=monitoring"} {
		if !strings.Contains(n, want) {
			t.Errorf("the notes with the cluster's Prometheus do not say %q:\n%s", want, n)
		}
	}
	if strings.Contains(n, "deployment/"+rel+"-prometheus") || strings.Contains(n, "prometheus-auth") {
		t.Errorf("without the chart's Prometheus the notes name it:\n%s", n)
	}
	if !strings.Contains(n, "costs.cadvisor and costs.nodeExporter are the chart's Prometheus's") || strings.Contains(n, "ClusterRole") {
		t.Errorf("without the chart's Prometheus the notes do not say the costs are n/a, or name its ClusterRole:\n%s", n)
	}

	// Values change what they say: a Job in the release, Prometheus's user,
	// the sysctl's exception.
	n = notes(t, rel, ns, []string{"load.enabled=true", "load.testid=t1", "prometheus.user=reader", "sysctls.somaxconn=64"})
	for _, want := range []string{rel + "-openloop-t1", `user "reader"`, "--allowed-unsafe-sysctls"} {
		if !strings.Contains(n, want) {
			t.Errorf("the notes with %q do not say %q:\n%s", "load.enabled, prometheus.user, sysctls.somaxconn", want, n)
		}
	}
}
