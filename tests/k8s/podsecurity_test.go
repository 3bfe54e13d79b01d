package k8s

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// post sends body to path as the admin; dryRun=All where dry.
func (s *apiServer) post(path string, body []byte, dry bool) (int, []byte) {
	if dry {
		path += "?dryRun=All"
	}
	req, _ := http.NewRequest(http.MethodPost, s.url+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	r, err := s.client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, b
}

// podSecurityNamespace creates a namespace whose Pod Security admission
// enforces level (restricted, baseline, privileged) at its latest version,
// with the default service account the controller-manager (not run here)
// would add.
func podSecurityNamespace(t *testing.T, s *apiServer, ns, level string) {
	t.Helper()
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q,"labels":{
		"pod-security.kubernetes.io/enforce":%q,"pod-security.kubernetes.io/enforce-version":"latest"}}}`, ns, level)
	if code, b := s.post("/api/v1/namespaces", []byte(body), false); code != http.StatusCreated {
		t.Fatalf("namespace %s: HTTP %d %s", ns, code, b)
	}
	sa := `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default"}}`
	if code, b := s.post("/api/v1/namespaces/"+ns+"/serviceaccounts", []byte(sa), false); code != http.StatusCreated {
		t.Fatalf("the default service account in %s: HTTP %d %s", ns, code, b)
	}
}

// admitPods asks the server to create (dryRun=All: admitted, not stored) a
// Pod from each pod template of a rendering (a Deployment's, a Job's: no
// controller makes their pods here) in ns, and returns, per object, the
// server's answer: "" where admitted, else its message.
func admitPods(t *testing.T, s *apiServer, ns, rendering string) map[string]string {
	t.Helper()
	out := map[string]string{}
	dec := yaml.NewDecoder(strings.NewReader(rendering))
	for {
		var o struct {
			Kind     string `yaml:"kind"`
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
			Spec struct {
				Template struct {
					Metadata map[string]any `yaml:"metadata"`
					Spec     map[string]any `yaml:"spec"`
				} `yaml:"template"`
			} `yaml:"spec"`
		}
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(podKinds, o.Kind) {
			continue
		}
		meta := o.Spec.Template.Metadata
		if meta == nil {
			meta = map[string]any{}
		}
		meta["name"] = o.Metadata.Name + "-admitted"
		pod, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": o.Spec.Template.Spec})
		if err != nil {
			t.Fatal(err)
		}
		code, body := s.post("/api/v1/namespaces/"+ns+"/pods", pod, true)
		if code == http.StatusCreated {
			out[o.Kind+"/"+o.Metadata.Name] = ""
			continue
		}
		var status struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &status)
		out[o.Kind+"/"+o.Metadata.Name] = fmt.Sprintf("HTTP %d: %s", code, status.Message)
	}
	if len(out) == 0 {
		t.Fatal("the rendering has no pod template")
	}
	return out
}

// Pod Security admission's refusal of the somaxconn sysctl, and the chart's.
const (
	sysctlRefusal = `forbidden sysctls (net.core.somaxconn)`
	chartRefusal  = `which refuses the app's pod with an unsafe sysctl (net.core.somaxconn): run the backlog scenario in a namespace labelled pod-security.kubernetes.io/enforce=privileged`
)

// Pod Security admission (built into kube-apiserver) at "restricted": each
// variant is installed into a namespace that enforces it, and a pod from
// every pod template of the chart is admitted. The app's pod with
// sysctls.somaxconn (the backlog scenario) is the one exception: Pod
// Security refuses it naming the sysctl, at restricted and at baseline too,
// and admits it at privileged; the chart refuses to install it where the
// namespace enforces another level, naming the label it needs
// (docs/kubernetes.md).
func testPodSecurity(t *testing.T, s *apiServer) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			ns := "restricted-" + v.name
			podSecurityNamespace(t, s, ns, "restricted")
			sysctl := slices.ContainsFunc(v.sets, func(s string) bool { return strings.HasPrefix(s, "sysctls.somaxconn=") })
			// node-exporter (costs.nodeExporter) is the other exception (costs_test.go): its refusal comes first.
			refusal := chartRefusal
			if slices.Contains(v.sets, "costs.nodeExporter=true") {
				refusal = "which refuses node-exporter's pods"
			}
			args := append([]string{"install", release, chartDir(t), "--namespace", ns, "--kubeconfig", s.kubeconfig}, setArgs(v.sets)...)
			out, err := helm(t, args...)
			switch {
			case sysctl && (err == nil || !strings.Contains(err.Error(), `enforces Pod Security "restricted", `+refusal)):
				t.Errorf("helm install with sysctls.somaxconn into a restricted namespace: %v; want the chart's refusal naming the label", err)
			case !sysctl && err != nil:
				t.Fatalf("helm install into a restricted namespace: %v\n%s", err, out)
			}
			for obj, refusal := range admitPods(t, s, ns, render(t, v.sets)) {
				switch {
				case sysctl && obj == "Deployment/"+named("app"):
					if !strings.Contains(refusal, `violates PodSecurity "restricted:latest": `+sysctlRefusal) {
						t.Errorf("%s with sysctls.somaxconn in a restricted namespace: %q; want Pod Security's refusal of the sysctl", obj, refusal)
					}
				case sysctl:
					// Without the install, Prometheus's service account is not there.
				case refusal != "":
					t.Errorf("%s: a pod from its template is refused in a restricted namespace: %s", obj, refusal)
				}
			}
		})
	}
	t.Run("somaxconn needs privileged", func(t *testing.T) {
		sets := []string{"sysctls.somaxconn=64"}
		for _, level := range []string{"baseline", "privileged"} {
			ns := "sysctl-" + level
			podSecurityNamespace(t, s, ns, level)
			args := append([]string{"install", release, chartDir(t), "--namespace", ns, "--kubeconfig", s.kubeconfig}, setArgs(sets)...)
			_, err := helm(t, args...)
			got := admitPods(t, s, ns, render(t, sets))["Deployment/"+named("app")]
			if level == "privileged" && (err != nil || got != "") {
				t.Errorf("sysctls.somaxconn in a privileged namespace: install %v, the app's pod %q; want both admitted", err, got)
			}
			if level == "baseline" && (err == nil || !strings.Contains(err.Error(), chartRefusal) ||
				!strings.Contains(got, `violates PodSecurity "baseline:latest": `+sysctlRefusal)) {
				t.Errorf("sysctls.somaxconn in a baseline namespace: install %v, the app's pod %q; want both refused", err, got)
			}
		}
	})
}
