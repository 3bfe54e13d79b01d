package k8s

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"uds-lab/tests/internal/lab"
)

// The run's program's cluster.json (loadgen/lab_run.py k8s cluster: what
// make k8s-load writes after each batch), run for real against the API server: with the release's pods bound to two nodes
// (created here as the scheduler and the kubelets would; none runs), it
// names the app's node and the node of every pod by component, so the
// report can say whether nginx's pod and the app's shared a node.
func testClusterPlacement(t *testing.T, s *apiServer) {
	const ns, id = "lab-placement", "p1"
	if out, err := helm(t, "install", release, chartDir(t), "--namespace", ns, "--create-namespace", "--kubeconfig", s.kubeconfig,
		"--set", "load.enabled=true", "--set", "load.testid="+id); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	create := func(path, body string) {
		t.Helper()
		if code, b := s.post(path, []byte(body), false); code != http.StatusCreated {
			t.Fatalf("POST %s: HTTP %d %s", path, code, b)
		}
	}
	for _, n := range []string{"n1", "n2"} {
		create("/api/v1/nodes", fmt.Sprintf(`{"apiVersion":"v1","kind":"Node","metadata":{"name":%q},
			"status":{"capacity":{"cpu":"4"},"nodeInfo":{"kubeletVersion":"v1.37.2","kernelVersion":"6.1.0","osImage":"Debian",
			"containerRuntimeVersion":"containerd://2.4.2","machineID":"","systemUUID":"","bootID":"","kubeProxyVersion":"",
			"operatingSystem":"linux","architecture":"amd64"}}}`, n))
	}
	create("/api/v1/namespaces/"+ns+"/serviceaccounts", `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default"}}`)
	for _, p := range []struct{ name, component, node string }{
		{"lab-app-6d5f7c9b8d-x2k4q", "app", "n1"}, {"lab-nginx-7f8b9c6d5-abcde", "nginx", "n2"},
		{"lab-openloop-p1-0-aaaaa", "openloop", "n2"}, {"lab-openloop-p1-1-bbbbb", "openloop", "n1"},
		{"lab-prometheus-5d78c9869d-ccccc", "prometheus", "n2"},
	} {
		create("/api/v1/namespaces/"+ns+"/pods", fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"labels":{
			"app.kubernetes.io/name":"uds-lab","app.kubernetes.io/instance":%q,"app.kubernetes.io/component":%q}},
			"spec":{"nodeName":%q,"containers":[{"name":"app","image":"x"},{"name":"nginx","image":"nginx:1.30.4"}]}}`, p.name, release, p.component, p.node))
	}
	// Another release's pod in the namespace: not this run's.
	create("/api/v1/namespaces/"+ns+"/pods", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"other-app","labels":{
		"app.kubernetes.io/name":"uds-lab","app.kubernetes.io/instance":"other","app.kubernetes.io/component":"app"}},
		"spec":{"nodeName":"n3","containers":[{"name":"app","image":"x"}]}}`)
	cmd := exec.Command("python3", lab.Path(t, "loadgen", "lab_run.py"), "k8s", "cluster", id)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(lab.Tool(t, "kubectl"))+":"+os.Getenv("PATH"),
		"KUBECONFIG="+s.kubeconfig, "K8S_NAMESPACE="+ns)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lab_run.py k8s cluster: %v\n%s", err, out)
	}
	var c struct {
		Node      string              `json:"node"`
		Kubelet   string              `json:"kubelet"`
		Placement map[string][]string `json:"placement"`
	}
	if err := json.Unmarshal(out, &c); err != nil {
		t.Fatalf("lab_run.py k8s cluster: %v\n%s", err, out)
	}
	want := map[string][]string{"app": {"n1"}, "nginx": {"n2"}, "openloop": {"n1", "n2"}, "prometheus": {"n2"}}
	if c.Node != "n1" || c.Kubelet != "v1.37.2" || !reflect.DeepEqual(c.Placement, want) {
		t.Errorf("lab_run.py k8s cluster: node %q, kubelet %q, placement %v; want n1, v1.37.2, %v\n%s", c.Node, c.Kubelet, c.Placement, want, out)
	}
}
