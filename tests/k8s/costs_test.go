package k8s

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"gopkg.in/yaml.v3"

	"uds-lab/tests/internal/lab"
)

// A scrape job as far as these tests read it.
type job struct {
	JobName        string              `yaml:"job_name"`
	ScrapeInterval string              `yaml:"scrape_interval"`
	Scheme         string              `yaml:"scheme"`
	Params         map[string][]string `yaml:"params"`
	Authorization  struct {
		CredentialsFile string `yaml:"credentials_file"`
	} `yaml:"authorization"`
	TLSConfig struct {
		CAFile string `yaml:"ca_file"`
	} `yaml:"tls_config"`
	SD []struct {
		Role string `yaml:"role"`
	} `yaml:"kubernetes_sd_configs"`
	Relabel       []*relabel.Config `yaml:"relabel_configs"`
	MetricRelabel []*relabel.Config `yaml:"metric_relabel_configs"`
}

// promJobs: the jobs of the chart's Prometheus rendered with sets, by name,
// after promtool has accepted the config.
func promJobs(t *testing.T, sets []string) map[string]job {
	t.Helper()
	text := parse(t, render(t, sets)).must(t, "ConfigMap", release+"-prometheus").Data["prometheus.yml"]
	f := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(lab.Tool(t, "promtool"), "check", "config", "--syntax-only", f).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config %v: %v\n%s", sets, err, out)
	}
	var c struct {
		ScrapeConfigs []job `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(text), &c); err != nil {
		t.Fatal(err)
	}
	jobs := map[string]job{}
	for _, j := range c.ScrapeConfigs {
		jobs[j.JobName] = j
	}
	return jobs
}

// cAdvisor on a cluster: the chart's Prometheus finds the nodes and reads
// each kubelet's cAdvisor through the API server's node proxy, with its
// service account's token and the cluster's CA; its relabelling (applied
// here by Prometheus's own code) gives this release's containers the
// compose services the report and the dashboards select by, and drops every
// other series: other containers, other pods, other namespaces, another
// release whose name starts with this one's, the series nobody reads.
func TestCadvisorThroughTheAPIServer(t *testing.T) {
	jobs := promJobs(t, nil)
	j, ok := jobs["cadvisor"]
	if !ok {
		t.Fatal("no job cadvisor with the default values (costs.cadvisor)")
	}
	if len(j.SD) != 1 || j.SD[0].Role != "node" || j.Scheme != "https" ||
		j.Authorization.CredentialsFile != "/var/run/secrets/kubernetes.io/serviceaccount/token" ||
		j.TLSConfig.CAFile != "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt" {
		t.Errorf("job cadvisor: %+v; want node discovery, https with the service account's token and CA", j)
	}
	// A node as Prometheus discovers it: the kubelet's own address.
	target, keep := relabel.Process(labels.FromStrings("__address__", "10.0.0.7:10250", "__scheme__", "https",
		"__metrics_path__", "/metrics", "__meta_kubernetes_node_name", "node-a", "job", "cadvisor"), j.Relabel...)
	if !keep || target.Get("__address__") != "kubernetes.default.svc:443" ||
		target.Get("__metrics_path__") != "/api/v1/nodes/node-a/proxy/metrics/cadvisor" || target.Get("node") != "node-a" {
		t.Errorf("node-a's target: %v (kept %v); want the API server's node proxy to node-a's cAdvisor, labelled node=node-a", target, keep)
	}

	// Series as the kubelet labels them: namespace, pod, container (and id, image, name).
	const cpu = "container_cpu_usage_seconds_total"
	series := func(name, ns, pod, container string) labels.Labels {
		return labels.FromStrings("__name__", name, "namespace", ns, "pod", pod, "container", container,
			"id", "/kubepods/burstable/pod1/abc", "image", "x", "name", "abc")
	}
	const app, nginx, gen = "lab-app-6d5f7c9b8d-x2k4q", "lab-nginx-7f8b9c6d5-abcde", "lab-openloop-t1-1-q7w8e"
	for _, c := range []struct {
		in   labels.Labels
		want string // the compose service; "": dropped
	}{
		{series(cpu, namespace, app, "app"), "app"},
		{series(cpu, namespace, app, "nginx"), "nginx-lo"},
		{series(cpu, namespace, nginx, "nginx"), "nginx"},
		{series(cpu, namespace, gen, "openloop"), "openloop"},
		{series(cpu, namespace, "lab-openloop-20261127-1600-0-zzzzz", "openloop"), "openloop"},
		{series("container_memory_working_set_bytes", namespace, nginx, "nginx"), "nginx"},
		{series("container_spec_cpu_quota", namespace, gen, "openloop"), "openloop"},
		// Not the lab's services: the exporters, the pod's own cgroup, its sandbox.
		{series(cpu, namespace, app, "log-exporter"), ""},
		{series(cpu, namespace, nginx, "nginx-exporter"), ""},
		{series(cpu, namespace, app, ""), ""},
		{series(cpu, namespace, app, "POD"), ""},
		{series(cpu, namespace, gen, "plan"), ""},
		// Another namespace, another release (lab-app's nginx pod), another workload.
		{series(cpu, "other", app, "app"), ""},
		{series(cpu, namespace, "lab-app-nginx-7f8b9c6d5-abcde", "nginx"), ""},
		{series(cpu, namespace, "lab-appx-6d5f7c9b8d-x2k4q", "app"), ""},
		{series(cpu, "kube-system", "coredns-5d78c9869d-abcde", "coredns"), ""},
		{labels.FromStrings("__name__", cpu, "id", "/"), ""},
		// Series nobody reads.
		{series("container_fs_reads_total", namespace, nginx, "nginx"), ""},
		{series("container_network_receive_bytes_total", namespace, nginx, ""), ""},
		{labels.FromStrings("__name__", "machine_cpu_cores"), ""},
	} {
		out, keep := relabel.Process(c.in, j.MetricRelabel...)
		got := ""
		if keep {
			got = out.Get("container_label_com_docker_compose_service")
			if got == "" {
				got = "(kept unlabelled)"
			}
		}
		if got != c.want {
			t.Errorf("%v: %q; want %q", c.in, got, c.want)
		}
	}
	// The services are those the report reads: catalogue.json's nginx, the app, the generator.
	var catalogue struct {
		Nginx map[string]any `json:"nginx"`
	}
	b, err := os.ReadFile(lab.Path(t, "catalogue.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &catalogue); err != nil {
		t.Fatal(err)
	}
	for n := range catalogue.Nginx {
		if out, keep := relabel.Process(series(cpu, namespace, map[string]string{"nginx": nginx, "nginx-lo": app}[n], "nginx"), j.MetricRelabel...); !keep ||
			out.Get("container_label_com_docker_compose_service") != n {
			t.Errorf("catalogue.json's nginx %s: no cAdvisor series of it on the cluster", n)
		}
	}

	// Off: no job, no cluster-wide permission.
	if _, ok := promJobs(t, []string{"costs.cadvisor=false"})["cadvisor"]; ok {
		t.Error("costs.cadvisor=false: the job cadvisor is still there")
	}
	m := parse(t, render(t, []string{"costs.cadvisor=false"}))
	for _, o := range m {
		if clusterScoped[o.Kind] {
			t.Errorf("costs.cadvisor=false renders %s %s", o.Kind, o.Metadata.Name)
		}
	}
}

// The ClusterRole grants what the node proxy needs and nothing else, to
// Prometheus's service account alone.
func TestCadvisorPermissions(t *testing.T) {
	text := render(t, nil)
	var role struct {
		Rules []struct {
			APIGroups []string `yaml:"apiGroups"`
			Resources []string `yaml:"resources"`
			Verbs     []string `yaml:"verbs"`
		} `yaml:"rules"`
	}
	var binding struct {
		RoleRef  struct{ Kind, Name string } `yaml:"roleRef"`
		Subjects []struct{ Kind, Name, Namespace string }
	}
	name := fmt.Sprintf("%s-%s-prometheus", release, namespace)
	for _, doc := range strings.Split(text, "\n---") {
		// The binding's roleRef names the kind ClusterRole too.
		switch {
		case strings.Contains(doc, "\nkind: ClusterRoleBinding\n"):
			if err := yaml.Unmarshal([]byte(doc), &binding); err != nil {
				t.Fatal(err)
			}
		case strings.Contains(doc, "\nkind: ClusterRole\n"):
			if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
				t.Fatal(err)
			}
		}
	}
	var got []string
	for _, r := range role.Rules {
		got = append(got, fmt.Sprintf("%v %v %v", r.APIGroups, r.Resources, r.Verbs))
	}
	want := []string{"[] [nodes] [get list watch]", "[] [nodes/proxy nodes/metrics] [get]"}
	if !slices.Equal(got, want) {
		t.Errorf("the ClusterRole grants %q; want %q", got, want)
	}
	parse(t, text).must(t, "ClusterRole", name)
	if binding.RoleRef.Name != name || len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" ||
		binding.Subjects[0].Name != release+"-prometheus" || binding.Subjects[0].Namespace != namespace {
		t.Errorf("the ClusterRoleBinding: %+v; want %s bound to the ServiceAccount %s/%s-prometheus alone", binding, name, namespace, release)
	}
}

// node-exporter (costs.nodeExporter): a DaemonSet on the nodes under test,
// reading the host's / with the host's PIDs, scraped by compose's jobs
// node and node-cpu (their intervals, params and kept series), and by the
// chart's Prometheus alone (its NetworkPolicy).
func TestNodeExporter(t *testing.T) {
	if _, ok := promJobs(t, nil)["node"]; ok {
		t.Error("node-exporter is scraped with the default values (costs.nodeExporter is off)")
	}
	sets := []string{"costs.nodeExporter=true", "nodeUnderTest.labels.uds-lab/role=under-test"}
	jobs := promJobs(t, sets)
	b, err := os.ReadFile(lab.Path(t, "prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		ScrapeConfigs []job `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	for _, c := range compose.ScrapeConfigs {
		if c.JobName != "node" && c.JobName != "node-cpu" {
			continue
		}
		j, ok := jobs[c.JobName]
		if !ok {
			t.Errorf("costs.nodeExporter: no job %s", c.JobName)
			continue
		}
		cm, _ := yaml.Marshal(c.MetricRelabel)
		jm, _ := yaml.Marshal(j.MetricRelabel)
		if j.ScrapeInterval != c.ScrapeInterval || fmt.Sprint(j.Params) != fmt.Sprint(c.Params) || string(cm) != string(jm) {
			t.Errorf("job %s: every %q, params %v, keeps\n%s\ncompose: every %q, params %v, keeps\n%s",
				c.JobName, j.ScrapeInterval, j.Params, jm, c.ScrapeInterval, c.Params, cm)
		}
		target, keep := relabel.Process(labels.FromStrings("__address__", "10.1.0.9:9100",
			"__meta_kubernetes_pod_container_port_name", "node-metrics", "__meta_kubernetes_pod_node_name", "node-a",
			"__meta_kubernetes_pod_label_app_kubernetes_io_component", "node-exporter"), j.Relabel...)
		if !keep || target.Get("node") != "node-a" {
			t.Errorf("job %s does not scrape node-exporter's port: %v", c.JobName, target)
		}
	}
	m := parse(t, render(t, sets))
	ds := m.must(t, "DaemonSet", named("node-exporter"))
	pod := &ds.Spec.Template.Spec
	if v := pod.Volume("host"); v == nil || v.HostPath == nil || v.HostPath.Path != "/" || pod.Container("node-exporter").Mount("host") == nil ||
		!pod.HostPID || pod.NodeSelector["uds-lab/role"] != "under-test" {
		t.Errorf("node-exporter's pod: %+v; want the host's / mounted, hostPID, on the nodes under test", pod)
	}
	m.must(t, "NetworkPolicy", named("node-exporter"))
}

// can asks the server (a SubjectAccessReview) whether ns's Prometheus
// service account may do verb on resource (and its subresource, in
// namespace where given).
func (s *apiServer) can(t *testing.T, ns, verb, resource, sub, namespace string) bool {
	t.Helper()
	sa := "system:serviceaccount:" + ns + ":" + release + "-prometheus"
	body, _ := json.Marshal(map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
		"spec": map[string]any{"user": sa, "groups": []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			"resourceAttributes": map[string]string{"verb": verb, "resource": resource, "subresource": sub, "namespace": namespace, "name": "node-a"}}})
	code, b := s.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", body, false)
	if code != http.StatusCreated {
		t.Fatalf("SubjectAccessReview: HTTP %d %s", code, b)
	}
	var r struct {
		Status struct {
			Allowed bool `json:"allowed"`
		} `json:"status"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}

// On the real API server (RBAC on): Prometheus's service account may read
// the nodes and their kubelets' metrics through the proxy, and nothing else
// cluster-wide; with costs.cadvisor=false not even that; helm uninstall
// removes the cluster-wide objects too.
func testCadvisorRBAC(t *testing.T, s *apiServer) {
	const ns = "lab-costs"
	if out, err := helm(t, "install", release, chartDir(t), "--namespace", ns, "--create-namespace", "--kubeconfig", s.kubeconfig); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	for _, a := range [][3]string{{"get", "nodes", "proxy"}, {"get", "nodes", "metrics"}, {"list", "nodes", ""}, {"watch", "nodes", ""}, {"get", "nodes", ""}} {
		if !s.can(t, ns, a[0], a[1], a[2], "") {
			t.Errorf("Prometheus's service account may not %s %s/%s: the node proxy to cAdvisor needs it", a[0], a[1], a[2])
		}
	}
	// Anything else, cluster-wide or in another namespace.
	for _, a := range [][4]string{
		{"create", "nodes", "proxy", ""}, {"update", "nodes", "proxy", ""}, {"get", "nodes", "log", ""}, {"get", "nodes", "stats", ""},
		{"patch", "nodes", "", ""}, {"delete", "nodes", "", ""}, {"update", "nodes", "status", ""},
		{"list", "pods", "", ""}, {"list", "pods", "", "kube-system"}, {"get", "secrets", "", ""}, {"get", "secrets", "", ns},
		{"create", "pods", "exec", ns}, {"get", "services", "proxy", "kube-system"}, {"list", "namespaces", "", ""},
	} {
		if s.can(t, ns, a[0], a[1], a[2], a[3]) {
			t.Errorf("Prometheus's service account may %s %s/%s (namespace %q): more than the node proxy needs", a[0], a[1], a[2], a[3])
		}
	}
	if !s.can(t, ns, "list", "pods", "", ns) {
		t.Error("Prometheus's service account may not list pods in its namespace (pod discovery)")
	}
	if out, err := helm(t, "uninstall", release, "--namespace", ns, "--kubeconfig", s.kubeconfig, "--wait"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	name := release + "-" + ns + "-prometheus"
	for _, p := range []string{"clusterroles", "clusterrolebindings"} {
		if code, _ := s.get("/apis/rbac.authorization.k8s.io/v1/" + p + "/" + name); code != http.StatusNotFound {
			t.Errorf("%s %s after helm uninstall: HTTP %d, want 404", p, name, code)
		}
	}
	if s.can(t, ns, "get", "nodes", "proxy", "") {
		t.Error("after helm uninstall, Prometheus's service account may still get nodes/proxy")
	}
	const off = "lab-costs-off"
	if out, err := helm(t, "install", release, chartDir(t), "--namespace", off, "--create-namespace", "--kubeconfig", s.kubeconfig,
		"--set", "costs.cadvisor=false"); err != nil {
		t.Fatalf("helm install costs.cadvisor=false: %v\n%s", err, out)
	}
	if s.can(t, off, "get", "nodes", "proxy", "") || s.can(t, off, "list", "nodes", "", "") {
		t.Error("costs.cadvisor=false: Prometheus's service account may still read nodes")
	}
}

// node-exporter reads the host (hostPID, a hostPath volume): Pod Security
// admits its pod at privileged alone. The chart refuses it where the
// namespace enforces baseline or restricted, naming the label, and Pod
// Security refuses its pod there; at privileged both are admitted.
func testNodeExporterPodSecurity(t *testing.T, s *apiServer) {
	sets := []string{"costs.nodeExporter=true"}
	ds := "DaemonSet/" + named("node-exporter")
	for _, level := range []string{"restricted", "baseline", "privileged"} {
		ns := "node-exporter-" + level
		podSecurityNamespace(t, s, ns, level)
		_, err := helm(t, append([]string{"install", release, chartDir(t), "--namespace", ns, "--kubeconfig", s.kubeconfig}, setArgs(sets)...)...)
		got := admitPods(t, s, ns, render(t, sets))[ds]
		if level == "privileged" {
			if err != nil || got != "" {
				t.Errorf("costs.nodeExporter in a privileged namespace: install %v, its pod %q; want both admitted", err, got)
			}
			continue
		}
		want := fmt.Sprintf(`costs.nodeExporter: namespace %s enforces Pod Security %q, which refuses node-exporter's pods (hostPID and the host's / as a hostPath volume): install it in a namespace labelled pod-security.kubernetes.io/enforce=privileged`, ns, level)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("costs.nodeExporter in a %s namespace: install %v; want the chart's refusal %q", level, err, want)
		}
		if !strings.Contains(got, `violates PodSecurity "`+level+`:latest": host namespaces (hostPID=true), `) || !strings.Contains(got, `hostPath`) {
			t.Errorf("node-exporter's pod in a %s namespace: %q; want Pod Security's refusal of hostPID and the hostPath volume", level, got)
		}
	}
}

// The relabelling reads the kubelet's pod names, which Kubernetes cuts to 58
// characters before their random suffix: a release or a run whose pods'
// names would be cut is refused with costs.cadvisor (and let through
// without it), at the longest that still fits.
func TestCadvisorRefusesCutPodNames(t *testing.T) {
	for _, c := range []struct {
		rel  string
		sets []string
		want string // "": rendered
	}{
		{strings.Repeat("r", 40), nil, ""},
		{strings.Repeat("r", 41), nil, "costs.cadvisor: the release's name"},
		{strings.Repeat("r", 41), []string{"costs.cadvisor=false"}, ""},
		{"lab1", []string{"load.enabled=true", "load.testid=" + strings.Repeat("t", 40)}, ""},
		{"lab12", []string{"load.enabled=true", "load.testid=" + strings.Repeat("t", 40)}, "costs.cadvisor: the run's Job name"},
		{"lab12", []string{"load.enabled=true", "load.testid=" + strings.Repeat("t", 40), "costs.cadvisor=false"}, ""},
	} {
		_, err := helm(t, append([]string{"template", c.rel, chartDir(t), "--namespace", namespace}, setArgs(c.sets)...)...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("helm template %s %v: %v; want it rendered", c.rel, c.sets, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("helm template %s %v: %v; want a refusal with %q", c.rel, c.sets, err, c.want)
		}
	}
}
